"""Named listeners: Kafka's `listeners`, `advertised.listeners` and `inter.broker.listener.name`.

    listeners: INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092
    advertised.listeners: INTERNAL://broker-1:9092,EXTERNAL://localhost:19092
    inter.broker.listener.name: INTERNAL

Each listener is one listening socket. An item without `NAME://` is named PLAINTEXT, so the
one-listener form (`listeners: 127.0.0.1:9092`) keeps working. Every listener speaks the same
plaintext protocol; the name says which advertised address a client that connected on it is given:

- the broker registers the advertised endpoint of every listener with the controller;
- Metadata and DescribeCluster answer, for each broker, its endpoint on the listener the request
  came in on (a broker without that listener is left out, as Kafka does), so a client on the host
  that bootstrapped from localhost:19092 is told `localhost:1909N`, and a client inside the compose
  network that used broker-1:9092 is told `broker-N:9092`;
- followers fetch from the leader's endpoint on `inter.broker.listener.name` (default: the first
  listener), the one the registration's own host/port also carry.

An advertised entry names a listener (the unnamed form matches PLAINTEXT); a listener with no
advertised entry advertises the address it binds, and port 0 in either is replaced by the
port actually bound (tests bind ephemeral ports).

Security protocols: as in Kafka, `listener.security.protocol.map` gives each listener name its
security protocol (by default PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL map to themselves, and
a map that leaves one of these names out still gives it its own protocol).
All four are built (docs/security.md); an inter-broker listener that is a SASL one needs the
broker's own credentials (sasl.inter.broker.username / .password).
A name the map does not list (INTERNAL, CLIENT...) is PLAINTEXT,
where Kafka would refuse it.

Wire protocols: `listener.protocol.map` (`NAME:PROTOCOL,...`, default `KAFKA:KAFKA`) says which
protocol each listener speaks: GREGOR, the native one, or KAFKA, Apache Kafka's (broker/kafka/,
docs/kafka-compat.md). A name it does not list speaks GREGOR. Both kinds register and advertise
the same way, so a Kafka client bootstrapped on `KAFKA://...` is given every broker's KAFKA
address. Replication speaks GREGOR, so inter.broker.listener.name must name a GREGOR listener.

The map itself is parsed in client/security/protocols.py (controllers read it too, for
controller.listener.names). Pure parsing, no sockets: any thread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from client.config import setting
from client.config.loader import Config
from client.config.types import parse_list
from client.errors import ConfigError
from client.security.protocols import SASL_PROTOCOLS, protocol_of, security_protocols

DEFAULT_NAME = "PLAINTEXT"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.name}://{self.address}"


def _items(value: Any) -> tuple[str, ...]:
    return () if value is None else parse_list(value)


def parse_endpoint(item: str, key: str = "listeners") -> Endpoint:
    """`NAME://HOST:PORT`, `HOST:PORT` (named PLAINTEXT) or `[v6]:PORT` → Endpoint."""
    name, rest = DEFAULT_NAME, item
    if "://" in item:
        name, rest = item.split("://", 1)
        if not _NAME.match(name):
            raise ConfigError(
                f"{key}: listener name {name!r} in {item!r} must be letters, digits, _"
            )
        name = name.upper()
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{key}: expected [NAME://]HOST:PORT, got {item!r}")
    return Endpoint(name, host.strip("[]"), int(port))


def parse_endpoints(value: Any, key: str = "listeners") -> list[Endpoint]:
    """Every item of a comma-separated string or list; ConfigError on a repeated name."""
    out = [parse_endpoint(i, key) for i in _items(value)]
    seen: set[str] = set()
    for e in out:
        if e.name in seen:
            raise ConfigError(
                f"{key}: listener name {e.name} appears twice in {','.join(_items(value))!r}"
                " (give each listener its own NAME://)"
            )
        seen.add(e.name)
    return out


def check_security(listeners: Listeners, config: Config) -> None:
    """ConfigError when the inter-broker listener is a SASL one and this broker has no SASL
    credentials of its own to fetch with (sasl.inter.broker.username / .password)."""
    name = listeners.inter_broker
    protocol = listeners.protocol(name)
    if protocol in SASL_PROTOCOLS and not (
        setting(config, "sasl_inter_broker_username", None)
        and setting(config, "sasl_inter_broker_password", None)
    ):
        raise ConfigError(
            f"inter.broker.listener.name: listener {name} uses {protocol}, so followers must"
            " authenticate to leaders: set sasl.inter.broker.username and"
            " sasl.inter.broker.password (a SCRAM user, e.g. from sasl.scram.bootstrap.file),"
            " or give replication an SSL (mTLS) or PLAINTEXT listener of its own named in"
            " inter.broker.listener.name (docs/security.md)"
        )


WIRE_PROTOCOLS = ("GREGOR", "KAFKA")


def wire_protocols(value: Any) -> dict[str, str]:
    """`listener.protocol.map` (`NAME:PROTOCOL,...`) -> {NAME: GREGOR|KAFKA}, upper-cased."""
    out: dict[str, str] = {}
    for item in _items(value):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not _NAME.match(name) or protocol not in WIRE_PROTOCOLS:
            raise ConfigError(
                f"listener.protocol.map: expected NAME:PROTOCOL with PROTOCOL GREGOR or KAFKA,"
                f" got {item!r}"
            )
        out[name.upper()] = protocol
    return out


def kafka_listener_names(config: Config, listeners: Listeners) -> frozenset[str]:
    """The names of the listeners that speak Kafka's protocol; ConfigError when the
    inter-broker listener is one of them (replication speaks Gregor's protocol). Any security
    protocol goes: TLS wraps the transport below the Kafka decoder, and SASL is Kafka's own
    SaslHandshake/SaslAuthenticate (broker/kafka/apis_sasl.py)."""
    protocols = wire_protocols(setting(config, "listener_protocol_map", ("KAFKA:KAFKA",)))
    names = frozenset(e.name for e in listeners.bind if protocols.get(e.name) == "KAFKA")
    if listeners.inter_broker in names:
        raise ConfigError(
            f"inter.broker.listener.name: {listeners.inter_broker} speaks KAFKA"
            " (listener.protocol.map), but brokers replicate over Gregor's protocol: name a"
            " GREGOR listener (or list one first in listeners)"
        )
    return names


@dataclass(frozen=True)
class Listeners:
    """What the broker binds (`bind`), what it advertises per listener (`advertised`, same order
    and names), and the listener replicas use (`inter_broker`)."""

    bind: tuple[Endpoint, ...]
    advertised: tuple[Endpoint, ...]
    inter_broker: str
    protocols: Mapping[str, str] = field(default_factory=dict)  # every bound name -> protocol

    @classmethod
    def from_config(cls, config: Config) -> Listeners:
        bind = parse_endpoints(setting(config, "listeners", ()), "listeners")
        if not bind:
            raise ConfigError("listeners: no listener configured")
        mapped = security_protocols(setting(config, "listener_security_protocol_map", ()))
        protocols = {e.name: protocol_of(e.name, mapped) for e in bind}
        by_name = {e.name: e for e in bind}
        adv = parse_endpoints(setting(config, "advertised_listeners", ()), "advertised.listeners")
        for e in adv:
            if e.name not in by_name:
                raise ConfigError(
                    f"advertised.listeners: {e} names listener {e.name}, which is not in"
                    f" listeners ({','.join(str(b) for b in bind)})"
                )
        adv_by_name = {e.name: e for e in adv}
        advertised = tuple(adv_by_name.get(b.name, b) for b in bind)
        inter = str(setting(config, "inter_broker_listener_name", "") or "").upper() or bind[0].name
        if inter not in by_name:
            raise ConfigError(
                f"inter.broker.listener.name: {inter} is not a listener (listeners:"
                f" {', '.join(by_name)})"
            )
        out = cls(tuple(bind), advertised, inter, protocols)
        check_security(out, config)
        return out

    def with_bound(self, bound: Mapping[str, tuple[str, int]]) -> Listeners:
        """Port 0 (advertised or not) replaced by the port `bound[name]` the socket got."""

        def fix(e: Endpoint) -> Endpoint:
            b = bound.get(e.name)
            return e if e.port != 0 or b is None else Endpoint(e.name, e.host, b[1])

        return Listeners(
            tuple(Endpoint(e.name, *bound[e.name]) if e.name in bound else e for e in self.bind),
            tuple(fix(e) for e in self.advertised),
            self.inter_broker,
            self.protocols,
        )

    def protocol(self, name: str) -> str:
        """The security protocol of listener `name`."""
        return self.protocols.get(name, DEFAULT_NAME)

    @property
    def inter_broker_protocol(self) -> str:
        return self.protocol(self.inter_broker)

    def advertised_for(self, name: str) -> Endpoint | None:
        for e in self.advertised:
            if e.name == name:
                return e
        return None

    @property
    def inter_broker_endpoint(self) -> Endpoint:
        e = self.advertised_for(self.inter_broker)
        assert e is not None  # checked in from_config
        return e

    def registration(self) -> list[tuple[str, str, int]]:
        """The endpoints a broker registers: (name, advertised host, advertised port)."""
        return [(e.name, e.host, e.port) for e in self.advertised]

    def describe(self) -> list[str]:
        """One line per listener, for the start-up output: bound and advertised address."""
        return [
            f"listener {b.name}: bound {b.address}, advertised {a.address}"
            + ("" if self.protocol(b.name) == DEFAULT_NAME else f" ({self.protocol(b.name)})")
            + (" (inter-broker)" if b.name == self.inter_broker else "")
            for b, a in zip(self.bind, self.advertised, strict=True)
        ]
