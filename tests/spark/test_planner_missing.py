"""The missing-topic rule of the gregor source (docs/spark.md "Missing topics") and the shape
of its errors, with an in-memory Admin (no broker, no Spark)."""

from __future__ import annotations

import logging
import traceback
from types import SimpleNamespace

import pytest

from client.errors import ConfigError, UnknownTopicOrPartitionError
from client.spark.errors import GregorSparkError, reason_of, surfaced, surfaced_iter
from client.spark.options import parse_source_options
from client.spark.planner import Planner


class FakeAdmin:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics

    def list_topics(self) -> list[str]:
        return sorted(self.topics)

    def describe_topic(self, name: str) -> SimpleNamespace:
        if name not in self.topics:
            raise UnknownTopicOrPartitionError(f"topic {name!r}")
        parts = [
            SimpleNamespace(partition=p, log_start_offset=0, high_watermark=5)
            for p in range(self.topics[name])
        ]
        return SimpleNamespace(partitions=parts, topic_id=None)

    def close(self) -> None:
        pass


def _planner(topics: dict[str, int], **opts: str) -> Planner:
    o = parse_source_options({"bootstrap.servers": "h:1", **opts}, batch=None)
    p = Planner(o)
    p._admin = FakeAdmin(topics)
    return p


def _check(p: Planner, batch: bool) -> dict:
    state = p.state()
    p.check_missing(state, batch=batch)
    return state


def test_batch_subscribe_to_a_missing_topic_fails_with_a_suggestion() -> None:
    p = _planner({"events": 2}, subscribe="events,event")
    with pytest.raises(GregorSparkError) as ei:
        _check(p, batch=True)
    msg = str(ei.value)
    assert msg.startswith(
        "option 'subscribe': topic 'event' does not exist — did you mean 'events'? (a batch"
    )
    assert "failOnDataLoss=false" in msg


def test_batch_subscribe_missing_with_fail_on_data_loss_false_reads_empty(
    caplog: pytest.LogCaptureFixture,
) -> None:
    p = _planner({"events": 2}, subscribe="events,nope", failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="client.spark.planner"):
        state = _check(p, batch=True)
    assert set(state) == {("events", 0), ("events", 1)}
    assert "'nope'" in caplog.text and "read as empty" in caplog.text


def test_streaming_subscribe_waits_for_a_topic_not_created_yet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    p = _planner({}, subscribe="later")
    with caplog.at_level(logging.WARNING, logger="client.spark.planner"):
        assert _check(p, batch=False) == {}
    assert "'later'" in caplog.text and "once it is created" in caplog.text


@pytest.mark.parametrize("batch", [True, False])
def test_assign_of_a_missing_topic_or_partition_fails(batch: bool) -> None:
    p = _planner({"events": 2}, assign='{"event":[0]}', failOnDataLoss="false")
    with pytest.raises(GregorSparkError, match="'assign': topic 'event' does not exist"):
        _check(p, batch)
    p = _planner({"events": 2}, assign='{"events":[0,2]}')
    with pytest.raises(
        GregorSparkError,
        match=r"'assign': partition events-2 does not exist \(topic 'events' has partitions 0..1\)",
    ):
        _check(p, batch)
    assert set(_check(_planner({"events": 2}, assign='{"events":[1]}'), batch)) == {("events", 1)}


def test_pattern_matching_nothing_is_not_an_error() -> None:
    assert _check(_planner({"a": 1}, subscribePattern="b.*"), batch=True) == {}


def _format_like_pyspark(exc: BaseException) -> str:
    """What PySpark's worker sends the JVM (pyspark.util.handle_worker_exception, with its
    default simplified traceback, which drops causes)."""
    exc.__cause__ = None
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    return "".join(te.format())


def test_surfaced_error_text_starts_with_the_reason() -> None:
    @surfaced
    def plan() -> None:
        raise ConfigError("option 'x': bad")

    with pytest.raises(GregorSparkError) as ei:
        plan()
    text = _format_like_pyspark(ei.value)
    assert text.splitlines()[0] == "client.spark.errors.GregorSparkError: option 'x': bad"
    assert "Traceback (most recent call last)" in text  # still there, after the reason
    assert reason_of(RuntimeError("[X] Failed: " + text)) == "GregorSparkError: option 'x': bad"

    def rows():  # noqa: ANN202
        yield 1
        raise UnknownTopicOrPartitionError("topic 't'")

    it = surfaced_iter(rows())
    assert next(it) == 1
    with pytest.raises(GregorSparkError) as ei:
        next(it)
    assert (
        _format_like_pyspark(ei.value)
        .splitlines()[0]
        .endswith("GregorSparkError: [UNKNOWN_TOPIC_OR_PARTITION] topic 't'")
    )


def test_surfaced_leaves_bugs_alone() -> None:
    @surfaced
    def plan() -> None:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        plan()
