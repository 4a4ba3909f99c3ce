"""`kafka.*` options reach the clients the connector opens (fake clients record their
settings; no broker, no Spark session)."""

from __future__ import annotations

from typing import Any

import pytest

import client
from client.spark.options import parse_sink_options, parse_source_options
from client.spark.planner import Planner
from client.spark.sink import write_rows
from client.spark.task import RangePartition, iter_records


class Opened(Exception):
    """Raised by the fake client once it has recorded its settings."""


def _recorder(seen: list) -> Any:
    def make(config: dict | None = None, **kwargs: Any) -> Any:
        seen.append({**(config or {}), **kwargs})
        raise Opened

    return make


def test_source_kafka_keys_go_to_the_task_consumer(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict] = []
    monkeypatch.setattr(client, "Consumer", _recorder(seen))
    o = parse_source_options(
        {
            "bootstrap.servers": "h:1",
            "subscribe": "t",
            "kafka.max.poll.records": "7",
            "kafka.client.id": "job-1",
        },
        batch=True,
    )
    part = RangePartition(0, "h:1", "t", 0, 0, 10, False, True, True, 1000, o.consumer_config)
    with pytest.raises(Opened):
        list(iter_records(part))
    assert seen[0]["max.poll.records"] == "7"  # over the task's default (20000)
    assert seen[0]["client.id"] == "job-1"
    assert seen[0]["auto_offset_reset"] == "none" and seen[0]["enable_auto_commit"] is False
    # the driver's Admin gets the keys an Admin accepts, not the consumer-only ones
    assert Planner(o)._admin_settings() == {"client.id": "job-1"}


@pytest.mark.parametrize(("extra", "acks"), [({}, "all"), ({"kafka.acks": "1"}, "1")])
def test_sink_kafka_keys_go_to_the_task_producer(
    monkeypatch: pytest.MonkeyPatch, extra: dict, acks: str
) -> None:
    seen: list[dict] = []
    monkeypatch.setattr(client, "Producer", _recorder(seen))
    opts = parse_sink_options(
        {"bootstrap.servers": "h:1", "topic": "t", "kafka.linger.ms": "25", **extra}, ["value"]
    )
    with pytest.raises(Opened):
        write_rows(opts, iter([]))
    assert seen[0]["linger.ms"] == "25" and seen[0]["acks"] == acks
