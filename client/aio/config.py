"""Client configuration: Kafka's dotted names in a dict, or snake_case keyword arguments.

    Producer({"bootstrap.servers": "localhost:9092", "linger.ms": 10})
    Producer(bootstrap_servers="localhost:9092", linger_ms=10)

Both spellings go through `client.config.client_config` (the one key registry: types,
defaults, validation, ConfigError naming the key and the closest known key). This module adds
what a running client needs on top: bootstrap servers as (host, port) pairs, acks as an int,
a default client id (gregor-ROLE-PID-N), the TLS context of security.protocol=SSL
(`ssl_context`, built once from ssl.cafile / ssl.certfile / ssl.keyfile), and the (de)serializer callables, which are
arguments, not config keys.
"""

from __future__ import annotations

import itertools
import os
import ssl
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from client.config import client_config
from client.errors import ConfigError
from client.security.scram import SaslCredentials
from client.security.tls import TlsSettings, client_context

SERIALIZERS = {
    "producer": ("key_serializer", "value_serializer"),
    "consumer": ("key_deserializer", "value_deserializer"),
    "admin": (),
}

_ids = itertools.count(1)


def resolve_config(
    role: str, config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]
) -> SimpleNamespace:
    """One config object for `role` from a dict of dotted (or snake_case) names and kwargs
    (kwargs win). Returns a namespace with snake_case attributes."""
    settings = dict(config or {})
    extra = dict(kwargs)
    explicit_idempotence = any(
        k in src for src in (settings, extra) for k in ("enable.idempotence", "enable_idempotence")
    )
    callables: dict[str, Any] = dict.fromkeys(SERIALIZERS[role])
    for source in (settings, extra):
        for name in list(source):
            attr = name.replace(".", "_")
            if attr in callables:
                fn = source.pop(name)
                if fn is not None and not callable(fn):
                    raise ConfigError(f"{role} {name}={fn!r}: expected a callable")
                callables[attr] = fn
    cfg = client_config(role, settings, **extra)
    out = {name.replace(".", "_"): value for name, value in cfg.items()}
    out.update(callables)
    if out.get("client_id") is None:
        # unique per process and per client, as Kafka's consumer-<group>-<n> / producer-<n>
        # are within a JVM: the broker's logs tell two processes' clients apart
        out["client_id"] = f"gregor-{role}-{os.getpid()}-{next(_ids)}"
    out["bootstrap_servers"] = parse_bootstrap(out["bootstrap_servers"])
    out["ssl_context"] = tls_context(out)
    out["sasl"] = sasl_credentials(out)
    if role == "producer":
        out["acks"] = {"all": -1, "-1": -1, "0": 0, "1": 1}[str(out["acks"])]
        out["compression_type"] = out.get("compression_type") or "none"
        out["idempotence_explicit"] = explicit_idempotence
    return SimpleNamespace(role=role, **out)


def tls_context(settings: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The TLS context of security.protocol SSL or SASL_SSL (None otherwise); ConfigError for
    a PEM file that is missing or does not load."""
    protocol = settings.get("security_protocol") or "PLAINTEXT"
    if protocol not in ("SSL", "SASL_SSL"):
        return None
    return client_context(TlsSettings.from_config(SimpleNamespace(**settings)))


def sasl_credentials(settings: Mapping[str, Any]) -> SaslCredentials | None:
    """sasl.mechanism/username/password for security.protocol SASL_*; None otherwise.
    ConfigError when the user name or password is missing."""
    protocol = settings.get("security_protocol") or "PLAINTEXT"
    if not protocol.startswith("SASL_"):
        return None
    username, password = settings.get("sasl_username"), settings.get("sasl_password")
    if not username or password is None:
        raise ConfigError(
            f"security.protocol={protocol} needs sasl.username and sasl.password (missing:"
            f" {', '.join(k for k, v in (('sasl.username', username), ('sasl.password', password)) if not v)})"
        )
    return SaslCredentials(str(settings.get("sasl_mechanism")), str(username), str(password))


def parse_bootstrap(
    value: str | Sequence[str | tuple[str, int]],
) -> list[tuple[str, int]]:
    """'h1:p1,h2:p2' (or a sequence of 'h:p' / (h, p), optionally NAME://h:p) -> [(host, port)]."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, tuple):
            out.append((str(item[0]), int(item[1])))
            continue
        item = item.strip().rpartition("://")[2]
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigError(f"bootstrap.servers entry {item!r}: expected host:port")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise ConfigError(f"bootstrap.servers={value!r}: expected at least one host:port")
    return out
