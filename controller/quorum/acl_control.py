"""AclControlManager: ACLs (CreateAcls, DeleteAcls) as AccessControlEntry /
RemoveAccessControlEntry records (docs/security.md, "Authorization"). Creating an ACL that
already exists writes nothing and succeeds (Kafka's behaviour); deleting removes every ACL a
filter matches and names them. Controller thread only.
"""

from __future__ import annotations

import logging
from typing import cast

from client.errors import ErrorCode
from client.protocol.body import Body
from client.security.acl import validate_binding
from client.security.acl_wire import binding_from_wire, binding_to_wire, filter_from_wire
from controller.metadata.acls import record_from_binding
from controller.metadata.records import RemoveAccessControlEntry
from controller.quorum.state import ControlManager
from controller.results import AclCreationResult, AclDeletionResult, AclMatch

_log = logging.getLogger(__name__)


class AclControlManager(ControlManager):
    def create_acls(self, creations: list[Body]) -> list[AclCreationResult]:
        """[{resource_type, resource_name, resource_pattern_type, principal, host, operation,
        permission_type}] → one {error_code, error_message} per creation, in order. A refused
        creation (INVALID_REQUEST) writes nothing; the others are written."""
        self._check_active()
        existing = set(self.image.acls.values())
        results: list[AclCreationResult] = []
        records = []
        for c in creations:
            try:
                b = binding_from_wire(c)
                reason = validate_binding(b)
            except ValueError as exc:
                reason = str(exc)
            if reason is not None:
                results.append(
                    {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": reason}
                )
                continue
            if b not in existing:
                existing.add(b)
                records.append(record_from_binding(self._new_acl_id(), b))
            results.append({"error_code": 0, "error_message": None})
        if records:
            self._write(records)
            _log.info("[controller=%d] %d ACL(s) created", self.settings.node_id, len(records))
        return results

    def delete_acls(self, filters: list[Body]) -> list[AclDeletionResult]:
        """[DeleteAcls filter] → one {error_code, error_message, matching_acls} per filter: the
        ACLs it matched, each removed once (a later filter matching one already removed by
        an earlier one does not list it again)."""
        self._check_active()
        remaining = dict(self.image.acls)
        out: list[AclDeletionResult] = []
        records = []
        for f in filters:
            try:
                flt = filter_from_wire(f)
                reason = flt.validate()
            except ValueError as exc:
                reason = str(exc)
            if reason is not None:
                out.append(
                    {
                        "error_code": int(ErrorCode.INVALID_REQUEST),
                        "error_message": reason,
                        "matching_acls": [],
                    }
                )
                continue
            matched = [(i, b) for i, b in sorted(remaining.items()) if flt.matches(b)]
            for acl_id, _ in matched:
                del remaining[acl_id]
                records.append(RemoveAccessControlEntry(acl_id))
            out.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "matching_acls": [
                        cast(
                            AclMatch, {"error_code": 0, "error_message": None, **binding_to_wire(b)}
                        )
                        for _, b in matched
                    ],
                }
            )
        if records:
            self._write(records)
            _log.info("[controller=%d] %d ACL(s) deleted", self.settings.node_id, len(records))
        return out

    def _new_acl_id(self) -> bytes:
        while True:
            acl_id = self.core.rng.getrandbits(128).to_bytes(16, "big")
            if acl_id not in self.image.acls:
                return acl_id
