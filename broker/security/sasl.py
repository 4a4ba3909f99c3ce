"""SASL on the broker: the settings of the SASL listeners and one exchange per connection.

    settings = SaslSettings.from_config(config)
    exchange = SaslExchange("SCRAM-SHA-256", credentials_of)   # after SaslHandshake
    reply, user = exchange.step(auth_bytes)                     # each SaslAuthenticate
    # user is the authenticated name once the exchange is done (None before);
    # AuthenticationFailed: refuse (the same answer whatever the cause)

Credentials come from the latest metadata image (`credentials_of(user)` → the user's
UserScramCredential records, by mechanism number): SCRAM checks the proof against StoredKey;
PLAIN recomputes the salted password with the stored salt and iterations and compares
StoredKey, so one set of salted keys serves both and no password is ever stored.

Threads: an exchange belongs to one connection, stepped by whichever I/O thread runs that
connection's request (the connection is muted meanwhile, so never two at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from client.config import setting
from client.config.loader import Config
from client.config.types import parse_list
from client.errors import ConfigError
from client.security.scram import (
    MECHANISMS,
    AuthenticationFailed,
    ScramCredential,
    ScramServer,
    check_plain,
)

SUPPORTED_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")

CredentialsOf = Callable[[str], Mapping[int, Any]]  # user -> {mechanism number: record}


@dataclass(frozen=True)
class SaslSettings:
    enabled_mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")
    plain_without_tls: bool = False
    max_receive_bytes: int = 512 * 1024
    authentication_timeout_ms: int = 10_000
    failed_delay_ms: int = 100

    @classmethod
    def from_config(cls, config: Config) -> SaslSettings:
        mechanisms = tuple(
            m.upper()
            for m in parse_list(setting(config, "sasl_enabled_mechanisms", cls.enabled_mechanisms))
        )
        for m in mechanisms:
            if m not in SUPPORTED_MECHANISMS:
                raise ConfigError(
                    f"sasl.enabled.mechanisms: {m} is not supported (expected some of"
                    f" {', '.join(SUPPORTED_MECHANISMS)})"
                )
        return cls(
            enabled_mechanisms=mechanisms,
            plain_without_tls=bool(setting(config, "sasl_plain_allow_without_tls", False)),
            max_receive_bytes=int(setting(config, "sasl_server_max_receive_size", 512 * 1024)),
            authentication_timeout_ms=int(
                setting(config, "sasl_server_authentication_timeout_ms", 10_000)
            ),
            failed_delay_ms=int(setting(config, "connection_failed_authentication_delay_ms", 100)),
        )

    def offered(self, tls: bool) -> list[str]:
        """The mechanisms a connection may choose: PLAIN only over TLS unless allowed."""
        return [m for m in self.enabled_mechanisms if m != "PLAIN" or tls or self.plain_without_tls]


def _scram_credential(mechanism: str, rec: Any) -> ScramCredential:
    return ScramCredential(mechanism, rec.salt, rec.stored_key, rec.server_key, rec.iterations)


class SaslExchange:
    def __init__(self, mechanism: str, credentials_of: CredentialsOf) -> None:
        self.mechanism = mechanism
        self.user: str | None = None  # the name tried (known once the client sent it)
        self._credentials_of = credentials_of
        self._scram: ScramServer | None = None
        self._step = 0
        if mechanism in MECHANISMS:
            num = MECHANISMS[mechanism][0]

            def lookup(user: str) -> ScramCredential | None:
                rec = credentials_of(user).get(num)
                return None if rec is None else _scram_credential(mechanism, rec)

            self._scram = ScramServer(mechanism, lookup)

    def step(self, auth_bytes: bytes) -> tuple[bytes, str | None]:
        """(reply, authenticated user or None while going on); AuthenticationFailed."""
        self._step += 1
        data = bytes(auth_bytes)
        if self._scram is None:  # PLAIN: one step
            if self._step > 1:
                raise AuthenticationFailed("PLAIN takes one step")
            user = data.split(b"\0")[1].decode(errors="replace") if data.count(b"\0") == 2 else None
            self.user = user

            def creds(name: str) -> list[ScramCredential]:
                by_num = self._credentials_of(name)
                return [
                    _scram_credential(m, by_num[n])
                    for m, (n, _h) in MECHANISMS.items()
                    if n in by_num
                ]

            return b"", check_plain(data, creds)
        if self._step == 1:
            try:
                reply = self._scram.first(data)
            finally:
                self.user = self._scram.username
            return reply, None
        if self._step == 2:
            return self._scram.final(data), self._scram.username
        raise AuthenticationFailed("SCRAM takes two steps")
