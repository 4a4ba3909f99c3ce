"""ScramControlManager: users' SCRAM credentials (AlterUserScramCredentials) as
UserScramCredential / RemoveUserScramCredential records. The request carries salted passwords
(the client salted and iterated them); this manager keeps only StoredKey and ServerKey (RFC
5802), so neither the password nor the salted password reaches the metadata log.
Controller thread only.
"""

from __future__ import annotations

from client.errors import ErrorCode
from client.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    credential_from_salted,
)
from controller.metadata.records import RemoveUserScramCredential, UserScramCredential
from controller.quorum.state import ControlManager


class ScramControlManager(ControlManager):
    def alter_user_scram_credentials(
        self, deletions: list[dict], upsertions: list[dict]
    ) -> list[dict]:
        """Deletions [{name, mechanism}] and upsertions [{name, mechanism, iterations, salt,
        salted_password}] → one result per user named, [{user, error_code, error_message}],
        in first-named order. A user with any refused item changes nothing."""
        self._check_active()
        order: list[str] = []
        errors: dict[str, tuple[int, str]] = {}
        records: dict[str, list] = {}
        seen: set[tuple[str, int]] = set()

        def fail(user: str, code: ErrorCode, message: str) -> None:
            errors.setdefault(user, (int(code), message))

        for item, upsert in [(d, False) for d in deletions] + [(u, True) for u in upsertions]:
            user, mech = item["name"], int(item["mechanism"])
            if user not in order:
                order.append(user)
            if not user:
                fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "the user name is empty")
                continue
            if mech not in MECHANISM_NAMES:
                fail(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"unknown mechanism {mech}")
                continue
            if (user, mech) in seen:
                fail(
                    user,
                    ErrorCode.DUPLICATE_RESOURCE,
                    f"{MECHANISM_NAMES[mech]} of {user!r} named twice in one request",
                )
                continue
            seen.add((user, mech))
            if not upsert:
                if mech not in self.image.scram_credentials.get(user, {}):
                    fail(
                        user,
                        ErrorCode.RESOURCE_NOT_FOUND,
                        f"{user!r} has no {MECHANISM_NAMES[mech]} credential to delete",
                    )
                    continue
                records.setdefault(user, []).append(RemoveUserScramCredential(user, mech))
                continue
            iterations = int(item["iterations"])
            if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
                fail(
                    user,
                    ErrorCode.UNACCEPTABLE_CREDENTIAL,
                    f"iterations {iterations}: expected {MIN_ITERATIONS} to {MAX_ITERATIONS}",
                )
                continue
            salt, salted = bytes(item["salt"]), bytes(item["salted_password"])
            if not salt or not salted:
                fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "empty salt or salted password")
                continue
            cred = credential_from_salted(MECHANISM_NAMES[mech], salt, salted, iterations)
            records.setdefault(user, []).append(
                UserScramCredential(
                    user, mech, cred.salt, cred.stored_key, cred.server_key, iterations
                )
            )
        out: list = []
        results = []
        for user in order:
            code, message = errors.get(user, (0, None))  # type: ignore[assignment]
            if not code:
                out += records.get(user, [])
            results.append({"user": user, "error_code": code, "error_message": message})
        if out:
            self._write(out)
        return results
