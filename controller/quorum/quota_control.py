"""ClientQuotaControlManager: client quotas (AlterClientQuotas) as ClientQuota records, one per
key set or removed. Each entry of a request is checked on its own and written or refused whole
(Kafka's). Controller thread only.
"""

from __future__ import annotations

from client.errors import ErrorCode
from client.protocol.body import Body
from client.quotas import check_value, make_entity
from controller.metadata.records import ClientQuota
from controller.quorum.state import ControlManager
from controller.results import ClientQuotaAlterResult, QuotaEntityPart


class ClientQuotaControlManager(ControlManager):
    def alter_client_quotas(
        self, entries: list[Body], validate_only: bool = False
    ) -> list[ClientQuotaAlterResult]:
        """entries [{entity: [{entity_type, entity_name}], ops: [{key, value, remove}]}] →
        [{error_code, error_message, entity}], one per entry, in order. `validate_only`:
        check, write nothing."""
        self._check_active()
        results: list[ClientQuotaAlterResult] = []
        records: list[ClientQuota] = []
        for entry in entries:
            entity_wire: list[QuotaEntityPart] = [
                {"entity_type": e["entity_type"], "entity_name": e["entity_name"]}
                for e in entry["entity"]
            ]
            out, message = self._entry_records(entry)
            code = ErrorCode.INVALID_REQUEST if message is not None else ErrorCode.NONE
            results.append(
                {"error_code": int(code), "error_message": message, "entity": entity_wire}
            )
            records += out
        if records and not validate_only:
            self._write(records)
        return results

    def _entry_records(self, entry: Body) -> tuple[list[ClientQuota], str | None]:
        parts: dict[str, str | None] = {}
        for e in entry["entity"]:
            if e["entity_type"] in parts:
                return [], f"entity type {e['entity_type']!r} named twice"
            if e["entity_name"] == "":
                return [], f"empty {e['entity_type']} name (a nil name is the default entity)"
            parts[e["entity_type"]] = e["entity_name"]
        try:
            entity = make_entity(parts)
        except ValueError as exc:
            return [], str(exc)
        seen: set[str] = set()
        out = []
        for op in entry["ops"]:
            key = op["key"]
            if key in seen:
                return [], f"quota key {key!r} named twice"
            seen.add(key)
            if op["remove"]:
                why = check_value(key, 1.0)  # only the key matters
                value = None
            else:
                value = float(op["value"])
                why = check_value(key, value)
            if why is not None:
                return [], why
            out.append(ClientQuota(entity, key, value))
        return out, None
