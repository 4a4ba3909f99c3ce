"""ScramControlManager: users' SCRAM credentials (AlterUserScramCredentials) as
UserScramCredential / RemoveUserScramCredential records. The request carries salted passwords
(the client salted and iterated them); this manager keeps only StoredKey and ServerKey (RFC
5802), so neither the password nor the salted password reaches the metadata log.
Controller thread only.
"""

from __future__ import annotations

import logging
import re

from client.errors import ConfigError, ErrorCode
from client.protocol.body import Body
from client.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MECHANISMS,
    MIN_ITERATIONS,
    credential_from_salted,
    new_credential,
)
from controller.metadata.records import RemoveUserScramCredential, UserScramCredential
from controller.quorum.state import ControllerCore, ControlManager
from controller.results import ScramCredentialResult

_log = logging.getLogger(__name__)
ScramRecord = UserScramCredential | RemoveUserScramCredential
_ENTRY = re.compile(r"^(SCRAM-SHA-256|SCRAM-SHA-512)=\[(.*)\]$")


def parse_bootstrap_file(path: str) -> list[UserScramCredential]:
    """sasl.scram.bootstrap.file: one credential per line in the form of Kafka's
    `kafka-storage format --add-scram`, `SCRAM-SHA-512=[name=admin,password=SECRET]` (an
    optional `iterations=N`; a password may be "double-quoted" to hold commas); `#` comments.
    Salted and iterated here: the records hold only salt, StoredKey and ServerKey. ConfigError
    naming the file and line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"sasl.scram.bootstrap.file={path!r}: {exc.strerror or exc}") from exc
    out: list[UserScramCredential] = []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"sasl.scram.bootstrap.file {path}, line {n}"
        m = _ENTRY.match(line)
        if m is None:
            raise ConfigError(f"{where}: expected SCRAM-SHA-256=[name=USER,password=PASSWORD]")
        fields: dict[str, str] = {}
        for key, value in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,]*)', m.group(2)):
            fields[key] = value[1:-1].replace('\\"', '"') if value.startswith('"') else value
        if not fields.get("name") or not fields.get("password"):
            raise ConfigError(f"{where}: name= and password= are required")
        try:
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
            cred = new_credential(m.group(1), fields["password"], iterations)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        out.append(
            UserScramCredential(
                fields["name"],
                MECHANISMS[m.group(1)][0],
                cred.salt,
                cred.stored_key,
                cred.server_key,
                cred.iterations,
            )
        )
    return out


class ScramControlManager(ControlManager):
    def __init__(
        self, core: ControllerCore, bootstrap: list[UserScramCredential] | None = None
    ) -> None:
        """`bootstrap`: the credentials of sasl.scram.bootstrap.file, written by the active
        controller while the metadata log has none (`write_bootstrap`)."""
        super().__init__(core)
        self._bootstrap = list(bootstrap or [])

    def write_bootstrap(self) -> None:
        """On the active controller of a log without any SCRAM credential: write the
        bootstrap credentials (once: the image holds them as soon as they are written)."""
        if not self._bootstrap or self.image.scram_credentials or not self.core.log.is_leader():
            return
        self._write(list(self._bootstrap))
        _log.info(
            "[controller=%d] %d SCRAM credential(s) of sasl.scram.bootstrap.file written"
            " to the metadata log (users: %s)",
            self.settings.node_id,
            len(self._bootstrap),
            ", ".join(sorted({c.name for c in self._bootstrap})),
        )

    def alter_user_scram_credentials(
        self, deletions: list[Body], upsertions: list[Body]
    ) -> list[ScramCredentialResult]:
        """Deletions [{name, mechanism}] and upsertions [{name, mechanism, iterations, salt,
        salted_password}] → one result per user named, [{user, error_code, error_message}],
        in first-named order. A user with any refused item changes nothing."""
        self._check_active()
        order: list[str] = []
        errors: dict[str, tuple[int, str]] = {}
        records: dict[str, list[ScramRecord]] = {}
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
        out: list[ScramRecord] = []
        results: list[ScramCredentialResult] = []
        for user in order:
            code, message = errors.get(user, (0, None))
            if not code:
                out += records.get(user, [])
            results.append({"user": user, "error_code": code, "error_message": message})
        if out:
            self._write(out)
        return results
