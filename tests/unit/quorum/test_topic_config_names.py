"""Unknown topic configs get the same help as broker and client keys (issue 22, item 5): the
closest topic config for a typo, the millisecond key and value for Kafka's broker-only hours
and minutes names, the topic twin of a broker key, and what Gregor does instead of a Kafka
topic config it lacks."""

from __future__ import annotations

import pytest

from controller.quorum.topic_configs import TOPIC_CONFIGS, TOPIC_DEFAULTS, validate_topic_config


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("min.insync.replica", "2", "did you mean 'min.insync.replicas'?"),
        ("retention.msec", "5", "did you mean 'retention.ms'?"),
        ("cleanup.polcy", None, "did you mean 'cleanup.policy'?"),  # a delete gets it too
        ("retention.hours", "2", "topics take retention.ms (milliseconds; the hours and minutes names are broker keys): set retention.ms=7200000"),
        ("log.retention.minutes", "3", "set retention.ms=180000"),
        ("retention.hours", "-1", "set retention.ms=-1"),
        ("segment.hours", "x", "set segment.ms"),
        ("log.retention.ms", "5", "log.retention.ms is the broker-wide default; the topic config is 'retention.ms'"),
        ("log.cleaner.min.cleanable.ratio", "0.1", "the topic config is 'min.cleanable.dirty.ratio'"),
        ("preallocate", "true", "a Kafka topic config that Gregor does not have: segment files grow as written"),
    ],
)  # fmt: skip
def test_unknown_topic_configs_say_what_to_set(name: str, value: str | None, says: str) -> None:
    err = validate_topic_config(name, value)
    assert err is not None and f"unknown topic config {name!r}" in err and says in err, err


def test_nonsense_gets_no_suggestion() -> None:
    assert validate_topic_config("zzzz", "1") == "unknown topic config 'zzzz'"


def test_every_topic_key_has_its_broker_default() -> None:
    assert set(TOPIC_DEFAULTS) <= set(TOPIC_CONFIGS)


@pytest.mark.parametrize(
    "value", ["0.11.0", "0.11.0.2", "0.11.0-IV2", "1.0", "2.8-IV1", "3.0-IV1", "3.7"]
)
def test_message_format_version_takes_the_v2_versions(value: str) -> None:
    assert validate_topic_config("message.format.version", value) is None


@pytest.mark.parametrize("value", ["0.10.0.0", "0.10.2-IV0", "0.8.2", "0.9.0"])
def test_message_format_version_refuses_the_formats_before_v2(value: str) -> None:
    err = validate_topic_config("message.format.version", value)
    assert err is not None and "older than v2" in err and "only the v2 record batch" in err, err


@pytest.mark.parametrize("value", ["latest", "3", "0.12.0", "3.0-beta", ""])
def test_message_format_version_refuses_what_is_not_a_kafka_version(value: str) -> None:
    err = validate_topic_config("message.format.version", value)
    assert err is not None and "expected a Kafka version" in err, err
