"""Named listeners (broker/listeners.py): parsing, advertised addresses by name, the
inter-broker listener, bound ports, and the errors a bad combination gets."""

from __future__ import annotations

import pytest

from broker.listeners import Endpoint, Listeners, parse_endpoints
from client.config import load_config
from client.errors import ConfigError
from controller.metadata.image import BrokerRegistration
from controller.metadata.records import RegisterBroker, decode_record, encode_record


def _listeners(**overrides: str) -> Listeners:
    values = {k.replace("_", "."): v for k, v in overrides.items()}
    return Listeners.from_config(load_config("broker", None, {}, values))


def test_one_unnamed_listener_is_plaintext_and_advertises_what_it_binds() -> None:
    ls = _listeners(listeners="127.0.0.1:9092")
    assert ls.bind == (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    assert ls.advertised == ls.bind and ls.inter_broker == "PLAINTEXT"
    assert ls.registration() == [("PLAINTEXT", "127.0.0.1", 9092)]


def test_unnamed_advertised_matches_plaintext() -> None:
    ls = _listeners(listeners="0.0.0.0:9092", advertised_listeners="localhost:9092")
    assert ls.inter_broker_endpoint == Endpoint("PLAINTEXT", "localhost", 9092)


def test_two_named_listeners_advertised_by_name_in_any_order() -> None:
    ls = _listeners(
        listeners="INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092",
        advertised_listeners="external://localhost:19092,INTERNAL://broker-1:9092",
        inter_broker_listener_name="internal",
    )
    assert [e.name for e in ls.bind] == ["INTERNAL", "EXTERNAL"]
    assert ls.advertised == (
        Endpoint("INTERNAL", "broker-1", 9092),
        Endpoint("EXTERNAL", "localhost", 19092),
    )
    assert ls.inter_broker == "INTERNAL"
    assert ls.advertised_for("EXTERNAL") == Endpoint("EXTERNAL", "localhost", 19092)
    assert ls.advertised_for("OTHER") is None
    assert ls.describe() == [
        "listener INTERNAL: bound 0.0.0.0:9092, advertised broker-1:9092 (inter-broker)",
        "listener EXTERNAL: bound 0.0.0.0:19092, advertised localhost:19092",
    ]


def test_inter_broker_defaults_to_the_first_listener_and_unadvertised_ones_bind_address() -> None:
    ls = _listeners(
        listeners="REPL://10.0.0.5:9093,CLIENT://0.0.0.0:9092",
        advertised_listeners="CLIENT://h:9092",
    )
    assert ls.inter_broker == "REPL"
    assert ls.inter_broker_endpoint == Endpoint("REPL", "10.0.0.5", 9093)


def test_port_zero_is_replaced_by_the_bound_port() -> None:
    ls = _listeners(
        listeners="A://127.0.0.1:0,B://127.0.0.1:0",
        advertised_listeners="B://localhost:0",
    )
    bound = ls.with_bound({"A": ("127.0.0.1", 4001), "B": ("127.0.0.1", 4002)})
    assert bound.bind == (Endpoint("A", "127.0.0.1", 4001), Endpoint("B", "127.0.0.1", 4002))
    assert bound.advertised == (Endpoint("A", "127.0.0.1", 4001), Endpoint("B", "localhost", 4002))


def test_ipv6_listener() -> None:
    (e,) = parse_endpoints("PLAINTEXT://[::1]:9092")
    assert e == Endpoint("PLAINTEXT", "::1", 9092) and e.address == "[::1]:9092"


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"listeners": "A://h:1,a://h:2"}, "appears twice"),
        ({"listeners": "h:1,h:2"}, "appears twice"),
        ({"listeners": "A://h:1", "advertised.listeners": "B://x:1"}, "not in listeners"),
        ({"listeners": "A://h:1", "inter.broker.listener.name": "B"}, "inter.broker.listener.name"),
    ],
)
def test_bad_combinations_name_the_key(overrides: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        Listeners.from_config(load_config("broker", None, {}, overrides))


def test_listener_name_with_digits_is_accepted_by_the_config_validator() -> None:
    cfg = load_config("broker", None, {}, {"listeners": "INTERNAL2://127.0.0.1:9092"})
    assert Listeners.from_config(cfg).bind[0].name == "INTERNAL2"


def test_config_by_environment() -> None:
    env = {
        "GREGOR_LISTENERS": "INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092",
        "GREGOR_ADVERTISED_LISTENERS": "INTERNAL://broker-1:9092,EXTERNAL://localhost:19092",
        "GREGOR_INTER_BROKER_LISTENER_NAME": "INTERNAL",
    }
    ls = Listeners.from_config(load_config("broker", None, env))
    assert ls.advertised_for("EXTERNAL") == Endpoint("EXTERNAL", "localhost", 19092)


def test_registration_endpoint_by_listener() -> None:
    eps = (("INTERNAL", "broker-1", 9092), ("EXTERNAL", "localhost", 19092))
    b = BrokerRegistration(4, 7, "broker-1", 9092, None, "i", False, eps)
    assert b.endpoint("EXTERNAL") == ("localhost", 19092)
    assert b.endpoint("INTERNAL") == ("broker-1", 9092)
    assert b.endpoint("OTHER") is None  # left out of that listener's answers, as in Kafka
    old = BrokerRegistration(4, 7, "h", 1, None, "i", False)  # registered with host/port only
    assert old.endpoint("ANY") == ("h", 1)


def test_register_broker_record_round_trips_its_endpoints() -> None:
    r = RegisterBroker(4, 7, "b", 1, None, "i", True, (("A", "b", 1), ("B", "localhost", 2)))
    assert decode_record(encode_record(r)) == r
    assert decode_record(encode_record(RegisterBroker(4, 7, "b", 1))).endpoints == ()


# -- security protocols: all four are built (issue 25); SASL replication needs credentials


@pytest.mark.parametrize(
    ("overrides", "listener", "protocol"),
    [
        ({"listeners": "sasl_ssl://h:1"}, "SASL_SSL", "SASL_SSL"),
        ({"listeners": "SASL_PLAINTEXT://h:2,PLAINTEXT://h:1"}, "SASL_PLAINTEXT", "SASL_PLAINTEXT"),
        (
            {"listeners": "PLAINTEXT://h:1,CLIENT://h:2", "listener.security.protocol.map": "CLIENT:SASL_SSL", "inter.broker.listener.name": "CLIENT"},
            "CLIENT",
            "SASL_SSL",
        ),
    ],
)  # fmt: skip
def test_a_sasl_inter_broker_listener_needs_the_brokers_credentials(
    overrides: dict[str, str], listener: str, protocol: str
) -> None:
    with pytest.raises(ConfigError) as e:
        Listeners.from_config(load_config("broker", None, {}, overrides))
    msg = str(e.value)
    assert f"inter.broker.listener.name: listener {listener} uses {protocol}" in msg, msg
    assert "set sasl.inter.broker.username and sasl.inter.broker.password" in msg, msg
    with_creds = {**overrides, "sasl.inter.broker.username": "b", "sasl.inter.broker.password": "p"}
    listeners = Listeners.from_config(load_config("broker", None, {}, with_creds))
    assert listeners.inter_broker_protocol == protocol


@pytest.mark.parametrize(
    ("overrides", "protocols"),
    [
        ({"listeners": "PLAINTEXT://h:1"}, ["PLAINTEXT"]),
        ({"listeners": "INTERNAL://h:1,EXTERNAL://h:2"}, ["PLAINTEXT", "PLAINTEXT"]),  # not in the map
        ({"listeners": "CLIENT://h:1", "listener.security.protocol.map": "CLIENT:PLAINTEXT"}, ["PLAINTEXT"]),
        ({"listeners": "SSL://h:1", "listener.security.protocol.map": "ssl:plaintext"}, ["PLAINTEXT"]),
        ({"listeners": "SSL://h:1"}, ["SSL"]),
        ({"listeners": "SSL://h:1", "listener.security.protocol.map": "CLIENT:PLAINTEXT"}, ["SSL"]),
        (
            {"listeners": "INTERNAL://h:1,EXTERNAL://h:2", "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:PLAINTEXT"},
            ["SSL", "PLAINTEXT"],
        ),
        ({"listeners": "SSL://h:1,SASL_SSL://h:2,SASL_PLAINTEXT://h:3"}, ["SSL", "SASL_SSL", "SASL_PLAINTEXT"]),
    ],
)  # fmt: skip
def test_listeners_named_or_mapped_get_their_protocol(
    overrides: dict[str, str], protocols: list[str]
) -> None:
    listeners = Listeners.from_config(load_config("broker", None, {}, overrides))
    expected = [
        f"{name.upper()}://{address}"
        for name, _, address in (i.partition("://") for i in overrides["listeners"].split(","))
    ]
    assert [str(e) for e in listeners.bind] == expected
    assert [listeners.protocol(e.name) for e in listeners.bind] == protocols
    assert listeners.inter_broker == listeners.bind[0].name
    assert listeners.inter_broker_protocol == protocols[0]


def test_a_malformed_protocol_map_is_refused_by_the_loader() -> None:
    with pytest.raises(ConfigError, match="listener.security.protocol.map.*PROTOCOL one of"):
        load_config("broker", None, {}, {"listener.security.protocol.map": "CLIENT:TLS"})
