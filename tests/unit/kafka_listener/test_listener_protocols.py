"""listener.protocol.map: which listeners speak Kafka's protocol (broker/listeners.py)."""

from __future__ import annotations

import pytest

from broker.listeners import Listeners, kafka_listener_names, wire_protocols
from client.config import load_config
from client.errors import ConfigError


def _config(**values: str):
    base = {"listeners": "GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0", "log.dirs": "/tmp/x"}
    return load_config("broker", None, {}, {**base, **values})


def test_default_map_makes_the_listener_named_kafka_speak_kafka() -> None:
    cfg = _config()
    assert kafka_listener_names(cfg, Listeners.from_config(cfg)) == {"KAFKA"}


def test_map_names_other_listeners_and_case_does_not_matter() -> None:
    cfg = _config(
        **{
            "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0,KAFKA://127.0.0.1:0",
            "listener.protocol.map": "external:kafka,KAFKA:GREGOR",
        }
    )
    assert kafka_listener_names(cfg, Listeners.from_config(cfg)) == {"EXTERNAL"}
    assert wire_protocols("a:Kafka,B:gregor") == {"A": "KAFKA", "B": "GREGOR"}


def test_inter_broker_listener_must_speak_gregor() -> None:
    cfg = _config(**{"inter.broker.listener.name": "KAFKA"})
    with pytest.raises(ConfigError, match="replicate over Gregor's protocol"):
        kafka_listener_names(cfg, Listeners.from_config(cfg))


@pytest.mark.parametrize("bad", ["KAFKA:HTTP", "KAFKA", "1X:KAFKA"])
def test_bad_map_is_refused_naming_the_key(bad: str) -> None:
    with pytest.raises(ConfigError, match="listener.protocol.map"):
        _config(**{"listener.protocol.map": bad})
    with pytest.raises(ConfigError, match="listener.protocol.map"):
        wire_protocols(bad)


@pytest.mark.parametrize("security", ["SSL", "SASL_SSL", "SASL_PLAINTEXT"])
def test_a_kafka_listener_takes_any_security_protocol(security) -> None:
    cfg = _config(
        **{
            "listeners": "GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0",
            "listener.security.protocol.map": f"KAFKA:{security},GREGOR:PLAINTEXT",
        }
    )
    listeners = Listeners.from_config(cfg)
    assert kafka_listener_names(cfg, listeners) == {"KAFKA"}
    assert listeners.protocol("KAFKA") == security
