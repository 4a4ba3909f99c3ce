"""Admin's SCRAM user calls (docs/security.md): Kafka's describe/alter_user_scram_credentials
and the shorthands create_user / delete_user / list_users.

The password never leaves the client: create_user salts it (32 random bytes) and iterates it
here (PBKDF2, `iterations`), and sends the salted password; the controller keeps only
StoredKey and ServerKey derived from it.

Loop-owned: every function runs on the admin's event loop.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from client.errors import GregorError, ResourceNotFoundError, error_for_code
from client.protocol import ApiKey
from client.security.scram import (
    DEFAULT_ITERATIONS,
    MECHANISM_NAMES,
    MECHANISMS,
    check_iterations,
    salted_password,
)


@dataclass(frozen=True, slots=True)
class ScramCredentialInfo:
    mechanism: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    iterations: int


@dataclass(frozen=True, slots=True)
class UserScramCredentialUpsertion:
    user: str
    mechanism: str
    password: str
    iterations: int = DEFAULT_ITERATIONS


@dataclass(frozen=True, slots=True)
class UserScramCredentialDeletion:
    user: str
    mechanism: str


def _mechanism_number(mechanism: str) -> int:
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise ValueError(
            f"unknown SCRAM mechanism {mechanism!r} (expected {', '.join(MECHANISMS)})"
        ) from None


async def describe(cluster: Any, users: list[str] | None) -> dict[str, list[ScramCredentialInfo]]:
    """{user: its credentials}; every user when `users` is None. ResourceNotFoundError for a
    named user without credentials."""
    body = {"users": None if users is None else [{"name": u} for u in users]}
    resp = await cluster.send_any(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body)
    if resp["error_code"]:
        raise error_for_code(resp["error_code"])(resp["error_message"] or "DescribeUserScram")
    out: dict[str, list[ScramCredentialInfo]] = {}
    for r in resp["results"]:
        if r["error_code"]:
            raise error_for_code(r["error_code"])(r["error_message"] or r["user"])
        out[r["user"]] = [
            ScramCredentialInfo(
                MECHANISM_NAMES.get(c["mechanism"], str(c["mechanism"])), c["iterations"]
            )
            for c in r["credential_infos"]
        ]
    return out


async def alter(
    cluster: Any,
    upsertions: list[UserScramCredentialUpsertion],
    deletions: list[UserScramCredentialDeletion],
) -> dict[str, GregorError | None]:
    """{user: None (done) or the error refusing that user's changes}."""
    ups = []
    for u in upsertions:
        check_iterations(u.iterations)
        salt = secrets.token_bytes(32)
        ups.append(
            {
                "name": u.user,
                "mechanism": _mechanism_number(u.mechanism),
                "iterations": u.iterations,
                "salt": salt,
                "salted_password": salted_password(u.mechanism, u.password, salt, u.iterations),
            }
        )
    dels = [{"name": d.user, "mechanism": _mechanism_number(d.mechanism)} for d in deletions]
    resp = await cluster.send_any(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"deletions": dels, "upsertions": ups}
    )
    return {
        r["user"]: error_for_code(r["error_code"])(r["error_message"] or r["user"])
        if r["error_code"]
        else None
        for r in resp["results"]
    }


async def create_user(
    cluster: Any, name: str, password: str, mechanism: str, iterations: int
) -> None:
    """Set `name`'s credential for `mechanism` (replacing one it had)."""
    result = await alter(
        cluster, [UserScramCredentialUpsertion(name, mechanism, password, iterations)], []
    )
    err = result.get(name)
    if err is not None:
        raise err


async def delete_user(cluster: Any, name: str) -> None:
    """Remove every SCRAM credential of `name`; ResourceNotFoundError when it has none."""
    creds = (await describe(cluster, [name]))[name]
    if not creds:
        raise ResourceNotFoundError(f"user {name!r} has no SCRAM credentials")
    result = await alter(
        cluster, [], [UserScramCredentialDeletion(name, c.mechanism) for c in creds]
    )
    err = result.get(name)
    if err is not None:
        raise err
