"""Security protocols of listeners: Kafka's `listener.security.protocol.map` and
`controller.listener.names`, parsed once for brokers and controllers alike.

    listener.security.protocol.map: INTERNAL:SSL,EXTERNAL:SSL,CONTROLLER:SSL
    controller.listener.names: CONTROLLER

`security_protocols(value)` → {NAME: PROTOCOL}; `protocol_of(name, map)` → the protocol of a
listener (its entry; else the name itself when it is one of Kafka's four; else PLAINTEXT);
`controller_protocol(config)` → the protocol of the controllers' listener, which every
controller serves and brokers and controllers use to reach one.

Pure parsing; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from client.config import setting
from client.config.loader import Config
from client.config.types import SECURITY_PROTOCOLS, parse_list
from client.errors import ConfigError

PLAINTEXT = "PLAINTEXT"
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
BUILT_PROTOCOLS = SECURITY_PROTOCOLS
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def security_protocols(value: Any) -> dict[str, str]:
    """`listener.security.protocol.map` (`NAME:PROTOCOL,...`) -> {NAME: PROTOCOL}, upper-cased."""
    out: dict[str, str] = {}
    for item in () if value is None else parse_list(value):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not _NAME.match(name) or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                "listener.security.protocol.map: expected NAME:PROTOCOL with PROTOCOL one of"
                f" {', '.join(SECURITY_PROTOCOLS)}, got {item!r}"
            )
        out[name.upper()] = protocol
    return out


def protocol_of(name: str, protocols: Mapping[str, str]) -> str:
    """The security protocol of listener `name` under the parsed map."""
    return protocols.get(name, name if name in SECURITY_PROTOCOLS else PLAINTEXT)


def controller_protocol(config: Config) -> str:
    """The protocol of the controllers' listener (the first of controller.listener.names);
    ConfigError for SASL (nodes have no SASL credentials of their own yet: use SSL with
    ssl.client.auth=required)."""
    names = parse_list(setting(config, "controller_listener_names", ("CONTROLLER",)) or ())
    name = (names[0] if names else "CONTROLLER").upper()
    protocol = protocol_of(
        name, security_protocols(setting(config, "listener_security_protocol_map", ()))
    )
    if protocol in SASL_PROTOCOLS:
        raise ConfigError(
            f"listener.security.protocol.map: the controllers' listener {name}"
            f" (controller.listener.names) maps to {protocol}: SASL between nodes is not"
            " built yet; map it to SSL (with ssl.client.auth=required, mTLS) or PLAINTEXT"
            " (docs/security.md)"
        )
    return protocol
