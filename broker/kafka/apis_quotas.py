"""Client quota APIs on the Kafka listener, translated to the native handlers:

    API                    versions  native
    DescribeClientQuotas   0-1       DescribeClientQuotas (48)
    AlterClientQuotas      0-1       AlterClientQuotas (49)

Kafka's entity types "user" and "client-id" are Gregor's; "ip" (connection-rate quotas) is not
built and is refused per entry with INVALID_REQUEST.

Threads: I/O threads; answers from the thread the native handler answers on.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from broker.kafka.apis import api
from broker.kafka.kio_requests import AlterClientQuotasRequest, DescribeClientQuotasRequest
from broker.kafka.request import KafkaContext, whole_error
from client.protocol import ApiKey
from client.protocol.body import Body


class _EntityPart(Protocol):
    """One (entity_type, entity_name) of a quota entity, in any version's kio class."""

    @property
    def entity_type(self) -> str: ...

    @property
    def entity_name(self) -> str | None: ...


def _entity(entity: Iterable[_EntityPart]) -> list[Body]:
    return [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entity]


@api(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1)
def describe_client_quotas(ctx: KafkaContext, body: DescribeClientQuotasRequest) -> None:
    native = {
        "components": [
            {"entity_type": c.entity_type, "match_type": int(c.match_type), "match": c.match}
            for c in body.components
        ],
        "strict": bool(body.strict),
    }

    def answer(a: Body) -> None:
        code = whole_error(a) or a.get("error_code", 0)
        entries = a.get("entries")
        ctx.respond(
            {
                "throttle_time": 0,
                "error_code": code,
                "error_message": a.get("error_message"),
                "entries": None
                if entries is None or code
                else [{"entity": e["entity"], "values": e["values"]} for e in entries],
            },
            code,
        )

    ctx.call_native(ApiKey.DESCRIBE_CLIENT_QUOTAS, native, answer)


@api(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1)
def alter_client_quotas(ctx: KafkaContext, body: AlterClientQuotasRequest) -> None:
    native = {
        "entries": [
            {
                "entity": _entity(e.entity),
                "ops": [
                    {"key": op.key, "value": float(op.value), "remove": bool(op.remove)}
                    for op in e.ops
                ],
            }
            for e in body.entries
        ],
        "validate_only": bool(body.validate_only),
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        rows = a.get("entries") or [
            {
                "error_code": code,
                "error_message": a.get("error_message"),
                "entity": entry["entity"],
            }
            for entry in native["entries"]  # type: ignore[attr-defined]
        ]
        ctx.respond({"throttle_time": 0, "entries": rows})

    ctx.call_native(ApiKey.ALTER_CLIENT_QUOTAS, native, answer)
