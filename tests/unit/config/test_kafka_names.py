"""Config names carry over from Kafka (issue 22, item 5).

- Kafka's coarser time-unit names (log.retention.hours, log.retention.minutes, log.roll.hours,
  offsets.retention.minutes, leader.imbalance.check.interval.seconds...) set the ms key, with
  Kafka's precedence inside one source (ms > minutes > hours) and the usual order across sources.
- A Kafka key Gregor has no twin for says so and what Gregor does instead.
- Errors say where the value came from (file, environment variable, flag, client argument),
  never a bare "override".
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from client.aio.config import resolve_config
from client.config import REGISTRY, client_config, load_config
from client.config.kafka_keys import KAFKA_KEYS, explain
from client.errors import ConfigError

HOUR = 3_600_000


def _yaml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "b.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("name", "value", "key", "ms"),
    [
        ("log.retention.hours", 1, "log.retention.ms", HOUR),
        ("log.retention.minutes", 90, "log.retention.ms", 90 * 60_000),
        ("log.retention.hours", -1, "log.retention.ms", -1),  # Kafka: negative keeps forever
        ("log.roll.hours", 24, "log.roll.ms", 24 * HOUR),
        ("offsets.retention.minutes", 10080, "offsets.retention.ms", 7 * 24 * HOUR),
        ("leader.imbalance.check.interval.seconds", 300, "leader.imbalance.check.interval.ms", 300_000),
    ],
)  # fmt: skip
def test_time_unit_names_set_the_ms_key(tmp_path, name, value, key, ms) -> None:
    path = _yaml(tmp_path, f"{name}: {value}\n")
    cfg = load_config("broker", path, {})
    assert cfg[key] == ms
    assert cfg.source(key) == f"{name} in config file {path}"


def test_log_retention_hours_reaches_the_logs() -> None:
    """The broker's LogConfig is what retention runs on."""
    from broker.node_settings import log_config_from

    cfg = load_config("broker", None, {}, {"log.retention.hours": "2"})
    assert log_config_from(cfg).retention_ms == 2 * HOUR


def test_within_one_source_ms_beats_minutes_beats_hours_in_any_order(tmp_path, caplog) -> None:
    path = _yaml(
        tmp_path,
        "log.retention.hours: 5\nlog.retention.ms: 1000\nlog.retention.minutes: 3\n"
        "log.roll.ms: 2000\nlog.roll.hours: 1\n",
    )
    with caplog.at_level(logging.WARNING, logger="client.config.loader"):
        cfg = load_config("broker", path, {})
    assert cfg.log_retention_ms == 1000 and cfg.log_roll_ms == 2000
    assert cfg.source("log.retention.ms") == f"config file {path}"
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "'log.retention.hours'" in said and "'log.roll.hours'" in said, said
    assert "takes precedence" in said
    cfg = load_config(
        "broker", _yaml(tmp_path, "log.retention.hours: 5\nlog.retention.minutes: 3\n"), {}
    )
    assert cfg.log_retention_ms == 3 * 60_000


def test_across_sources_the_later_source_wins_whatever_the_unit(tmp_path) -> None:
    path = _yaml(tmp_path, "log.retention.ms: 1000\n")
    cfg = load_config("broker", path, {"GREGOR_LOG_RETENTION_HOURS": "2"})
    assert cfg.log_retention_ms == 2 * HOUR
    assert cfg.source("log.retention.ms") == (
        "log.retention.hours in environment variable GREGOR_LOG_RETENTION_HOURS"
    )
    cfg = load_config(
        "broker", path, {"GREGOR_LOG_RETENTION_HOURS": "2"}, {"log_retention_minutes": 1}
    )
    assert cfg.log_retention_ms == 60_000


def test_bad_time_unit_values_name_the_alias_its_unit_and_the_source(tmp_path) -> None:
    path = _yaml(tmp_path, "log.retention.hours: 1.5h\n")
    with pytest.raises(ConfigError) as e:
        load_config("broker", path, {})
    msg = str(e.value)
    assert "'log.retention.hours' (log.retention.ms in hours)" in msg, msg
    assert f"config file {path}" in msg and "a whole number of hours" in msg, msg
    with pytest.raises(ConfigError, match=r"log.roll.hours.*expected >= 1"):
        load_config("broker", None, {}, {"log.roll.hours": 0})


def test_time_unit_name_of_another_role_and_typos() -> None:
    with pytest.raises(ConfigError, match="'log.retention.hours'.*not used by a producer"):
        client_config("producer", {"log.retention.hours": 1})
    with pytest.raises(ConfigError, match="did you mean 'log.retention.hours'"):
        load_config("broker", None, {}, {"log.retention.hour": 1})
    with pytest.raises(ConfigError, match="GREGOR_LOG_RETENTION_HOURS"):
        load_config("broker", None, {"GREGOR_LOG_RETENTION_HOUR": "1"})


def test_not_yet_time_unit_name_is_checked_like_its_key(caplog) -> None:
    from client.config.loader import _warned

    _warned.discard("log.roll.jitter.ms")
    with caplog.at_level(logging.WARNING, logger="client.config.loader"):
        cfg = load_config("broker", None, {}, {"log.roll.jitter.hours": 1})
    assert cfg.log_roll_jitter_ms == HOUR
    said = [r.getMessage() for r in caplog.records if "log.roll.jitter.ms" in r.getMessage()]
    assert said and "set by log.roll.jitter.hours in the overrides argument" in said[0], said


def test_every_time_unit_alias_is_documented() -> None:
    from client.config.docs import render

    text = render()
    for name in REGISTRY.unit_aliases:
        assert f"`{name}`" in text, name


# -- Kafka keys Gregor does not have


@pytest.mark.parametrize(
    ("role", "name", "says"),
    [
        ("producer", "interceptor.classes", "wrap send()"),
        ("producer", "interceptor_classes", "wrap send()"),
        ("producer", "partitioner.class", "partition=N"),
        ("consumer", "sasl.jaas.config", "no JAAS, Kerberos or OAuth"),
        ("consumer", "ssl.truststore.location", "PEM files, not Java keystores: ssl.certfile"),
        ("admin", "ssl_keystore_password", "PEM files, not Java keystores"),
        ("consumer", "client.rack", "leader"),
    ],
)
def test_a_kafka_client_key_says_it_is_kafkas_and_what_gregor_does(role, name, says) -> None:
    with pytest.raises(ConfigError) as e:
        client_config(role, {name: "x"})
    msg = str(e.value)
    assert f"'{name}'" in msg and "is a Kafka key that Gregor does not have" in msg, msg
    assert says in msg and f"the {role}'s config dict" in msg, msg


def test_a_kafka_broker_key_in_a_file_says_so(tmp_path) -> None:
    path = _yaml(tmp_path, "zookeeper.connect: zk:2181\n")
    with pytest.raises(
        ConfigError, match=r"'zookeeper.connect' \(from config file .*Raft controller quorum"
    ):
        load_config("broker", path, {})


def test_group_protocol_and_security_protocol_keep_gregors_values_and_refuse_the_rest() -> None:
    """Kafka keys whose one Gregor-compatible value is what Gregor does are keys, so that value
    still works; any other value is refused saying what Gregor does instead."""
    assert client_config("consumer", group_protocol="consumer").group_protocol == "consumer"
    assert (
        client_config("consumer", {"security.protocol": "PLAINTEXT"}).security_protocol
        == "PLAINTEXT"
    )
    with pytest.raises(ConfigError) as e:
        client_config("consumer", group_protocol="classic")
    msg = str(e.value)
    assert "'group.protocol'" in msg and "keyword argument group_protocol" in msg, msg
    assert "KIP-848" in msg and "group.remote.assignor" in msg, msg
    with pytest.raises(ConfigError, match="SASL_SSL needs sasl.username and sasl.password"):
        resolve_config("producer", {"security.protocol": "SASL_SSL"}, {})


def test_the_kafka_table_names_no_key_gregor_has() -> None:
    for name in KAFKA_KEYS:
        assert REGISTRY.get(name) is None and REGISTRY.unit_alias(name) is None, name
    for name in REGISTRY.by_alias:
        assert explain(name) is None, name


# -- where a value came from, instead of "override"


def test_errors_say_where_the_value_came_from() -> None:
    with pytest.raises(ConfigError, match="from the producer's keyword argument linger_ms"):
        client_config("producer", linger_ms="soon")
    with pytest.raises(ConfigError, match="from the consumer's config dict"):
        client_config("consumer", {"max.poll.records": 0})
    with pytest.raises(ConfigError, match="set by the consumer's config dict"):
        client_config("consumer", {"group.protocol": "classic"})
    with pytest.raises(ConfigError, match="from environment variable GREGOR_NUM_IO_THREADS"):
        load_config("broker", None, {"GREGOR_NUM_IO_THREADS": "0"})
    with pytest.raises(ConfigError, match="from command-line --override"):
        load_config(
            "broker", None, {}, {"num.io.threads": 0}, overrides_source="command-line --override"
        )
    for call in (
        lambda: client_config("producer", linger_ms="soon"),
        lambda: load_config("broker", None, {"GREGOR_NUM_IO_THREADS": "0"}),
    ):
        with pytest.raises(ConfigError) as e:
            call()
        assert "override" not in str(e.value), str(e.value)
