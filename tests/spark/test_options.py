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
    # at load() Spark has not said batch or streaming yet: what is valid for either passes,
    # and is parsed as given; the batch/streaming rules then apply
    o = parse_source_options({**BASE, "startingOffsets": "latest"}, batch=None)
    assert o.starting.kind == "latest"
    assert "'startingOffsets'" in _err({**BASE, "startingOffsets": "latest"}, batch=True)
    opts = {**BASE, "endingOffsets": "latest", "maxOffsetsPerTrigger": "5"}
    o = parse_source_options(opts, batch=None)
    assert o.ending.kind == "latest" and o.max_offsets_per_trigger == 5
    assert "'maxOffsetsPerTrigger'" in _err(opts, batch=True)
    assert "'endingOffsets'" in _err(opts, batch=False)


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


@pytest.mark.parametrize(
    ("given", "suggested"),
    [
        ("startingOffset", "startingOffsets"),
        ("STARTINGOFFSET", "startingOffsets"),  # Spark passes names lower-cased
        ("failOnDataLos", "failOnDataLoss"),
        ("maxOffsetPerTrigger", "maxOffsetsPerTrigger"),
        ("includeHeader", "includeHeaders"),
    ],
)
def test_unknown_option_is_refused_with_a_suggestion(given: str, suggested: str) -> None:
    for batch in (True, False, None):
        msg = _err({**BASE, given: "earliest"}, batch=batch)
        assert f"unknown option {given.lower()!r}" in msg
        assert f"did you mean {suggested}?" in msg


def test_unknown_option_without_a_close_name_lists_the_accepted_ones() -> None:
    msg = _err({**BASE, "zzz": "1"})
    assert "unknown option 'zzz'" in msg and "did you mean" not in msg
    assert "startingOffsets" in msg and "kafka.<client key>" in msg


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("endingTimestamp", "endingOffsets"),
        ("groupIdPrefix", "consumer group"),
        ("minOffsetsPerTrigger", "maxOffsetsPerTrigger"),
        ("path", "subscribe"),
    ],
)
def test_spark_kafka_options_gregor_lacks_say_so(name: str, hint: str) -> None:
    msg = _err({**BASE, name: "1"})
    assert f"{name.lower()!r} is an option of Spark's Kafka source" in msg and hint in msg


def test_spark_poll_timeout_name_is_accepted() -> None:
    o = parse_source_options({**BASE, "kafkaConsumer.pollTimeoutMs": "5000"}, batch=True)
    assert o.poll_timeout_ms == 5000
    o = parse_source_options({**BASE, "pollTimeoutMs": "7000"}, batch=True)
    assert o.poll_timeout_ms == 7000
    msg = _err({**BASE, "pollTimeoutMs": "1", "kafkaConsumer.pollTimeoutMs": "2"})
    assert "disagree" in msg


def test_kafka_prefixed_keys_go_to_the_consumer_checked_by_the_registry() -> None:
    o = parse_source_options(
        {**BASE, "kafka.max.poll.records": "100", "KAFKA.client.id": "spark-job"}, batch=True
    )
    assert dict(o.consumer_config) == {"max.poll.records": "100", "client.id": "spark-job"}
    msg = _err({**BASE, "kafka.max.poll.record": "100"})  # typo: the registry's suggestion
    assert "'kafka.max.poll.record'" in msg and "max.poll.records" in msg
    msg = _err({**BASE, "kafka.max.poll.records": "many"})  # bad value
    assert "'kafka.max.poll.records'" in msg and "many" in msg
    msg = _err({**BASE, "kafka.acks": "all"})  # a producer key
    assert "'kafka.acks'" in msg and "producer" in msg


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("kafka.auto.offset.reset", "startingOffsets"),
        ("kafka.group.id", "consumer group"),
        ("kafka.enable.auto.commit", "checkpoint"),
        ("kafka.value.deserializer", "bytes"),
    ],
)
def test_kafka_keys_the_source_owns_are_refused(name: str, hint: str) -> None:
    msg = _err({**BASE, name: "x"})
    assert f"option {name!r} is not supported" in msg and hint in msg


def test_bootstrap_given_twice_must_agree() -> None:
    same = {**BASE, "kafka.bootstrap.servers": "127.0.0.1:9092"}
    assert parse_source_options(same, batch=True).bootstrap_servers == "127.0.0.1:9092"
    assert "disagree" in _err({**BASE, "kafka.bootstrap.servers": "other:1"})


def test_sink_options_are_checked_too() -> None:
    cols = ["key", "value"]
    base = {"bootstrap.servers": "h:1", "topic": "out"}
    s = parse_sink_options({**base, "checkpointLocation": "/tmp/ck", "kafka.linger.ms": "20"}, cols)
    assert dict(s.producer_config) == {"linger.ms": "20"}
    with pytest.raises(ConfigError, match="unknown option 'topik'.*did you mean topic\\?"):
        parse_sink_options({"bootstrap.servers": "h:1", "topik": "out"}, ["value", "topic"])
    with pytest.raises(ConfigError, match="'kafka.max.poll.records'.*consumer"):
        parse_sink_options({**base, "kafka.max.poll.records": "5"}, cols)
    with pytest.raises(ConfigError, match="'kafka.value.serializer' is not supported"):
        parse_sink_options({**base, "kafka.value.serializer": "x"}, cols)
    with pytest.raises(ConfigError, match="'failOnDataLoss' is a reader option"):
        parse_sink_options({**base, "failOnDataLoss": "true"}, cols)
