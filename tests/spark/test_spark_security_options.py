"""Spark-Kafka security options (client/spark/security.py): JAAS and PEM stores become
Gregor's client keys; forms Gregor does not take are refused naming the option and what to
give instead (pure: no Spark, no broker)."""

from __future__ import annotations

import pytest

from client.errors import ConfigError
from client.spark.options import parse_sink_options, parse_source_options
from client.spark.security import parse_jaas

BASE = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "kafka.security.protocol": "SASL_SSL"}
SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p;=\\"x";'


def _source(**extra: str) -> dict[str, str]:
    # Spark lower-cases option names
    opts = {k.lower(): v for k, v in {**BASE, **extra}.items()}
    return dict(parse_source_options(opts, batch=True).consumer_config)


def _err(**extra: str) -> str:
    with pytest.raises(ConfigError) as ei:
        _source(**extra)
    return str(ei.value)


def test_jaas_syntax() -> None:
    assert parse_jaas(SCRAM) == (
        "org.apache.kafka.common.security.scram.ScramLoginModule",
        {"username": "u", "password": 'p;="x'},
    )
    assert parse_jaas("a.b.PlainLoginModule required username=bob password=pw ;") == (
        "a.b.PlainLoginModule",
        {"username": "bob", "password": "pw"},
    )
    for bad in ("", "username=u password=p;", SCRAM.rstrip(";"), SCRAM + " extra"):
        with pytest.raises(ConfigError, match="not a JAAS login module entry"):
            parse_jaas(bad)


def test_jaas_and_pem_stores_become_gregor_keys() -> None:
    got = _source(
        **{
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": SCRAM,
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": "/ca.pem",
            "kafka.ssl.keystore.type": "pem",
            "kafka.ssl.keystore.location": "/me.pem",
        }
    )
    assert got == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "u",
        "sasl.password": 'p;="x',
        "ssl.cafile": "/ca.pem",
        "ssl.certfile": "/me.pem",
    }
    plain = "kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required"
    sink = parse_sink_options(
        {
            "bootstrap.servers": "h:1",
            "topic": "t",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": f'{plain} username="a" password="b";',
        },
        ["value"],
    )
    assert dict(sink.producer_config)["sasl.username"] == "a"


def test_refusals_name_the_option_and_what_to_give() -> None:
    krb = "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"
    msg = _err(**{"kafka.sasl.mechanism": "GSSAPI", "kafka.sasl.jaas.config": krb})
    assert "Krb5LoginModule is not supported" in msg and "kafka.sasl.username" in msg
    msg = _err(**{"kafka.sasl.jaas.config": SCRAM})  # no mechanism: Kafka's default is GSSAPI
    assert "ScramLoginModule goes with kafka.sasl.mechanism SCRAM-SHA-256 or SCRAM-SHA-512" in msg
    msg = _err(**{"kafka.sasl.mechanism": "PLAIN", "kafka.sasl.jaas.config": SCRAM})
    assert "not PLAIN" in msg
    msg = _err(
        **{
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": SCRAM,
            "kafka.sasl.username": "other",
        }
    )
    assert "'kafka.sasl.jaas.config' and 'kafka.sasl.username' disagree" in msg
    msg = _err(**{"kafka.ssl.truststore.location": "/ts.jks"})
    assert "'kafka.ssl.truststore.location': a JKS store is not supported" in msg
    assert "kafka.ssl.cafile" in msg
    msg = _err(**{"kafka.ssl.keystore.location": "/ks.p12", "kafka.ssl.keystore.type": "PKCS12"})
    assert "a PKCS12 store is not supported" in msg
    msg = _err(**{"kafka.ssl.truststore.password": "x"})  # the registry's refusal
    assert "kafka.ssl.truststore.password" in msg and "PEM" in msg
