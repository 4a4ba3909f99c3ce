"""Helpers for the Spark tests: topic setup through the client library and query waits."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from client import Admin

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic(name, partitions=partitions)


def produce(bootstrap: str, topic: str, by_partition: dict[int, list[tuple[Any, Any]]]) -> None:
    """Send (key, value) pairs to explicit partitions (offsets follow list order) and wait."""
    from client import Producer

    with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
        futs = [p.send_many(topic, pairs, partition=part) for part, pairs in by_partition.items()]
        p.flush(60)
        for f in futs:
            f.result(60)


def send_records(bootstrap: str, topic: str, records: Iterable[dict[str, Any]]) -> None:
    """Send records given as keyword dicts for Producer.send (headers, timestamp_ms ...)."""
    from client import Producer

    with Producer(bootstrap_servers=bootstrap, acks="all") as p:
        futs = [p.send(topic, **r) for r in records]
        p.flush(60)
        for f in futs:
            f.result(60)


def consume_all(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> list:
    """Every record of `topic` up to its current end, via the client library."""
    from client import Consumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        for tp in tps:
            c.seek(tp, 0)
        out: list = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out consuming {topic}")
            out.extend(c.poll(timeout_ms=200))
        return out


def wait_query(query: Any, cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `cond` until true; fail early if the streaming query died."""
    deadline = time.monotonic() + timeout
    while True:
        exc = query.exception()
        if exc is not None:
            raise AssertionError(f"query failed while waiting for {what}: {exc}")
        if cond():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        query.awaitTermination(0.2)  # bounded wait on the query itself, not a fixed sleep


def read_committed(bs: str, topic: str, partitions: int) -> list[bytes]:
    """Every committed value of `topic` up to its last stable offset, via the client."""
    import time

    from client import Consumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(
        bootstrap_servers=bs, auto_offset_reset="earliest", isolation_level="read_committed"
    ) as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"timed out reading {topic}"
            out.extend(r.value for r in c.poll(timeout_ms=200))
        return out
