"""Option parsing of the gregor Spark source/sink (pure; no Spark, no broker)."""

from __future__ import annotations

import pytest

from client.errors import ConfigError
from client.spark.options import parse_sink_options, parse_source_options

BASE = {"bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def _err(opts: dict, batch: bool | None = True) -> str:
    with pytest.raises(ConfigError) as ei:
        parse_source_options(opts, batch=batch)
    return str(ei.value)


def test_defaults_batch_and_streaming() -> None:
    b = parse_source_options(BASE, batch=True)
    assert b.strategy == "subscribe" and b.topics == ("a", "b")
    assert b.starting.kind == "earliest" and b.ending.kind == "latest"
    assert b.fail_on_data_loss and not b.include_headers and b.use_arrow
    s = parse_source_options(BASE, batch=False)
    assert s.starting.kind == "latest"


def test_kafka_prefixed_bootstrap_and_case_insensitive_names() -> None:
    o = parse_source_options(
        {"kafka.bootstrap.servers": "h:1,h2:2", "SUBSCRIBEPATTERN": "ev.*"}, batch=False
    )
    assert o.bootstrap_servers == "h:1,h2:2" and o.pattern == "ev.*"
    assert o.matches("events") and not o.matches("xevents")


def test_bootstrap_required_and_checked() -> None:
    assert "bootstrap.servers" in _err({"subscribe": "a"})
    assert "host:port" in _err({"bootstrap.servers": "nohost", "subscribe": "a"})


@pytest.mark.parametrize(
    "extra",
    [{}, {"subscribePattern": "x"}, {"assign": '{"a":[0]}', "subscribePattern": "x"}],
)
def test_exactly_one_subscription(extra: dict) -> None:
    opts = {"bootstrap.servers": "h:1", **extra}
    if not extra:
        msg = _err(opts)
    else:
        msg = _err({**opts, "subscribe": "a"})
    assert "exactly one of" in msg and "subscribePattern" in msg and "assign" in msg


def test_assign_json() -> None:
    o = parse_source_options(
        {"bootstrap.servers": "h:1", "assign": '{"a":[1,0],"b":[2]}'}, batch=True
    )
    assert o.assigned == (("a", 0), ("a", 1), ("b", 2))
    msg = _err({"bootstrap.servers": "h:1", "assign": '{"a":"0"}'})
    assert "'assign'" in msg and "accepted" in msg
    assert "'assign'" in _err({"bootstrap.servers": "h:1", "assign": "a:0"})


def test_starting_and_ending_offsets_json() -> None:
    o = parse_source_options(
        {
            **BASE,
            "startingOffsets": '{"a":{"0":5,"1":-2}}',
            "endingOffsets": '{"a":{"0":50,"1":-1}}',
        },
        batch=True,
    )
    assert o.starting.as_dict() == {("a", 0): 5, ("a", 1): -2}
    assert o.ending.as_dict() == {("a", 0): 50, ("a", 1): -1}


def test_batch_rules() -> None:
    msg = _err({**BASE, "startingOffsets": "latest"})
    assert "'startingOffsets'" in msg and "batch" in msg and "earliest" in msg
    assert "'endingOffsets'" in _err({**BASE, "endingOffsets": "earliest"})
    assert "'startingOffsets'" in _err({**BASE, "startingOffsets": '{"a":{"0":-1}}'})
    assert "'endingOffsets'" in _err({**BASE, "endingOffsets": '{"a":{"0":-2}}'})
    assert "'maxOffsetsPerTrigger'" in _err({**BASE, "maxOffsetsPerTrigger": "10"})


def test_streaming_rules() -> None:
    msg = _err({**BASE, "endingOffsets": "latest"}, batch=False)
    assert "'endingOffsets'" in msg and "streaming" in msg
    o = parse_source_options({**BASE, "startingOffsets": '{"a":{"0":-1}}'}, batch=False)
    assert o.starting.as_dict() == {("a", 0): -1}


def test_mode_unknown_accepts_either() -> None:
    parse_source_options({**BASE, "startingOffsets": "latest"}, batch=None)
    parse_source_options(
        {**BASE, "endingOffsets": "latest", "maxOffsetsPerTrigger": "5"}, batch=None
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("startingOffsets", "soonest"),
        ("startingOffsets", "{bad json"),
        ("startingOffsets", '{"a":{"x":1}}'),
        ("startingOffsets", '{"a":{"0":-7}}'),
        ("maxOffsetsPerTrigger", "0"),
        ("maxOffsetsPerTrigger", "ten"),
        ("minPartitions", "-1"),
        ("failOnDataLoss", "yes"),
        ("includeHeaders", "1"),
        ("startingTimestamp", "yesterday"),
        ("startingOffsetsByTimestamp", '{"a":{"0":-5}}'),
        ("startingOffsetsByTimestampStrategy", "closest"),
        ("subscribePattern", "("),
    ],
)
def test_bad_value_names_option_and_accepted_values(name: str, value: str) -> None:
    opts = {**BASE, name: value}
    if name == "subscribePattern":
        opts.pop("subscribe")
    msg = _err(opts, batch=False)
    assert repr(name) in msg or name in msg
    assert "accepted" in msg or "regular expression" in msg


def test_timestamp_precedence() -> None:
    o = parse_source_options(
        {
            **BASE,
            "startingOffsets": "earliest",
            "startingOffsetsByTimestamp": '{"a":{"0":1000}}',
        },
        batch=True,
    )
    assert o.starting.kind == "timestamps" and o.starting.as_dict() == {("a", 0): 1000}
    o = parse_source_options(
        {**BASE, "startingOffsetsByTimestamp": '{"a":{"0":1000}}', "startingTimestamp": "7"},
        batch=True,
    )
    assert o.starting.kind == "timestamp" and o.starting.timestamp == 7


def test_assign_offsets_must_be_assigned() -> None:
    msg = _err(
        {"bootstrap.servers": "h:1", "assign": '{"a":[0]}', "startingOffsets": '{"a":{"1":3}}'}
    )
    assert "'startingOffsets'" in msg and "a/1" in msg


def test_numbers_and_flags() -> None:
    o = parse_source_options(
        {
            **BASE,
            "maxOffsetsPerTrigger": "100",
            "minPartitions": "8",
            "failOnDataLoss": "False",
            "includeHeaders": "TRUE",
            "useArrow": "false",
        },
        batch=False,
    )
    assert o.max_offsets_per_trigger == 100 and o.min_partitions == 8
    assert not o.fail_on_data_loss and o.include_headers and not o.use_arrow


def test_sink_options() -> None:
    s = parse_sink_options({"bootstrap.servers": "h:1", "topic": "out"}, ["key", "value"])
    assert s.topic == "out"
    s = parse_sink_options({"kafka.bootstrap.servers": "h:1"}, ["value", "topic"])
    assert s.topic is None
    with pytest.raises(ConfigError, match="'value' column"):
        parse_sink_options({"bootstrap.servers": "h:1", "topic": "t"}, ["key"])
    with pytest.raises(ConfigError, match="topic"):
        parse_sink_options({"bootstrap.servers": "h:1"}, ["value"])
    with pytest.raises(ConfigError, match="'subscribe'"):
        parse_sink_options({"bootstrap.servers": "h:1", "subscribe": "t"}, ["value", "topic"])
