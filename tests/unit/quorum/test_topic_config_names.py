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
