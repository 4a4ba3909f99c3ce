"""Admin's client quota calls (docs/security.md, "Quotas"): Kafka's describeClientQuotas and
alterClientQuotas, with Kafka's types.

    entity = ClientQuotaEntity.of({"user": "alice"})            # None: the default entity
    await admin.alter_client_quotas([ClientQuotaAlteration(entity, [Op("producer_byte_rate",
                                                                       1_048_576)])])
    await admin.describe_client_quotas([ClientQuotaFilterComponent.of_entity("user", "alice")])
    → {ClientQuotaEntity((("user", "alice"),)): {"producer_byte_rate": 1048576.0}}

Loop-owned: every function runs on the admin's event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from client.errors import GregorError, error_for_code
from client.protocol import ApiKey
from client.protocol.body import Body
from client.quotas import Entity, describe_entity, make_entity

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """(entity type, name) pairs sorted by type: "user", "client-id"; name None = default."""

    entries: Entity

    @classmethod
    def of(cls, entries: Mapping[str, str | None]) -> ClientQuotaEntity:
        """From {type: name or None}; ValueError for an unknown type or none at all."""
        return cls(make_entity(entries))

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.entries)

    def __str__(self) -> str:
        return describe_entity(self.entries)


@dataclass(frozen=True, slots=True)
class Op:
    """Set quota `key` to `value`, or remove it (`value` None)."""

    key: str
    value: float | None


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    entity: ClientQuotaEntity
    ops: Sequence[Op]


@dataclass(frozen=True, slots=True)
class ClientQuotaFilterComponent:
    entity_type: str
    match: str | None = None
    match_type: int = MATCH_SPECIFIED

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        """Entities of `entity_type` named `name`."""
        return cls(entity_type, name, MATCH_EXACT)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> ClientQuotaFilterComponent:
        """The default entity of `entity_type`."""
        return cls(entity_type, None, MATCH_DEFAULT)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        """Any named (not default) entity of `entity_type`."""
        return cls(entity_type, None, MATCH_SPECIFIED)


def _entity_wire(entity: ClientQuotaEntity) -> list[Body]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity.entries]


def _entity_from(wire: list[Body]) -> ClientQuotaEntity:
    return ClientQuotaEntity(tuple(sorted((e["entity_type"], e["entity_name"]) for e in wire)))


async def describe(
    cluster: Any, components: Sequence[ClientQuotaFilterComponent], strict: bool
) -> dict[ClientQuotaEntity, dict[str, float]]:
    body = {
        "components": [
            {"entity_type": c.entity_type, "match_type": c.match_type, "match": c.match}
            for c in components
        ],
        "strict": strict,
    }
    resp = await cluster.send_any(ApiKey.DESCRIBE_CLIENT_QUOTAS, body)
    if resp["error_code"]:
        raise error_for_code(resp["error_code"])(resp["error_message"] or "DescribeClientQuotas")
    return {
        _entity_from(e["entity"]): {v["key"]: v["value"] for v in e["values"]}
        for e in resp["entries"] or []
    }


async def alter(
    cluster: Any, alterations: Sequence[ClientQuotaAlteration], validate_only: bool
) -> dict[ClientQuotaEntity, GregorError | None]:
    """{entity: None (done) or the error refusing that entity's changes}."""
    entries = [
        {
            "entity": _entity_wire(a.entity),
            "ops": [
                {
                    "key": op.key,
                    "value": 0.0 if op.value is None else float(op.value),
                    "remove": op.value is None,
                }
                for op in a.ops
            ],
        }
        for a in alterations
    ]
    if not entries:
        return {}
    resp = await cluster.send_any(
        ApiKey.ALTER_CLIENT_QUOTAS, {"entries": entries, "validate_only": validate_only}
    )
    out: dict[ClientQuotaEntity, GregorError | None] = {}
    for a, r in zip(alterations, resp["entries"], strict=True):
        out[a.entity] = (
            error_for_code(r["error_code"])(r["error_message"] or str(a.entity))
            if r["error_code"]
            else None
        )
    return out
