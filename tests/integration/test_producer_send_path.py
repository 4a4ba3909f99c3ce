"""The sync Producer's per-record send() fast path (a keyless bytes value, no partition,
headers or timestamp: appended from the caller's thread, futures completed per batch):
per-thread order across many threads, flush() waiting for every record, callbacks run once
with each record's own metadata, and errors reaching every record's future and callback."""

from __future__ import annotations

import threading
import time

import pytest

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import GregorTimeoutError
from tests.helpers import wait_until

THREADS = 8
PER_THREAD = 5000


def test_many_threads_calling_send_keep_each_threads_order(broker_server):
    bootstrap = broker_server.bootstrap
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic("sendpath", partitions=1)
    futs: list[list] = [[] for _ in range(THREADS)]
    called: list[int] = [0] * THREADS
    errors: list[BaseException] = []
    # small batches: many batches, each completed while other threads are appending
    with Producer(bootstrap_servers=bootstrap, acks="all", batch_size=2048) as p:
        p.partitions_for("sendpath")
        start = threading.Barrier(THREADS)

        def run(tid: int) -> None:
            try:
                start.wait(30)
                for seq in range(PER_THREAD):
                    f = p.send("sendpath", b"%d:%d" % (tid, seq))
                    if seq % 2:
                        f.add_done_callback(
                            lambda _f, tid=tid: called.__setitem__(tid, called[tid] + 1)
                        )
                    futs[tid].append(f)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        p.flush(60)
        # flush() returned: every record sent before it is acknowledged, none still pending
        assert all(f.done() for fs in futs for f in fs)
    assert called == [PER_THREAD // 2] * THREADS  # once each
    offsets: dict[int, tuple[int, int]] = {}
    for tid, fs in enumerate(futs):
        prev = -1
        for seq, f in enumerate(fs):
            md = f.result(0)
            assert (md.topic, md.partition) == ("sendpath", 0)
            assert md.offset > prev, f"thread {tid}: record {seq} at {md.offset} after {prev}"
            prev = md.offset
            offsets[md.offset] = (tid, seq)
    total = THREADS * PER_THREAD
    assert sorted(offsets) == list(range(total))  # every offset once: no record lost or doubled
    tp = TopicPartition("sendpath", 0)
    last = [-1] * THREADS
    count = 0
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        deadline = time.monotonic() + 60
        while count < total:
            assert time.monotonic() < deadline, f"consumed {count} of {total}"
            for r in c.poll(timeout_ms=500):
                tid, seq = (int(x) for x in r.value.split(b":"))
                assert offsets[r.offset] == (tid, seq)
                assert seq == last[tid] + 1, f"thread {tid}: {seq} after {last[tid]}"
                last[tid] = seq
                count += 1
    assert last == [PER_THREAD - 1] * THREADS


def test_a_failed_batch_fails_each_records_future_and_callback(broker_factory):
    broker = broker_factory()
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic("sendfail", partitions=1)
    cfg = {
        "bootstrap.servers": broker.bootstrap,
        "acks": "all",
        "request.timeout.ms": 300,
        "delivery.timeout.ms": 1000,
        "retry.backoff.ms": 50,
    }
    seen: list[BaseException | None] = []
    with Producer(cfg) as p:
        p.send("sendfail", b"first").result(30)  # metadata known: later sends take the fast path
        broker.server.shutdown(timeout=10.0)
        futs = [p.send("sendfail", b"%d" % i) for i in range(300)]
        for f in futs[::3]:
            f.add_done_callback(lambda f: seen.append(f.exception()))
        wait_until(lambda: all(f.done() for f in futs), timeout=60, msg="records expired")
        for f in futs:
            assert isinstance(f.exception(0), GregorTimeoutError)
        assert len(seen) == 100 and all(isinstance(e, GregorTimeoutError) for e in seen)
        p.close(0)


def test_explicit_partitions_keep_order_and_offsets(broker_server):
    """send(topic, value, partition=p): the C path's explicit-partition append (docs/client.md,
    "Per-record send()") keeps each partition's order; a partition past the count still fails
    through the general path."""
    bootstrap = broker_server.bootstrap
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic("sendexplicit", partitions=3)
    n = 3000
    with Producer(bootstrap_servers=bootstrap, acks="all", batch_size=4096) as p:
        p.partitions_for("sendexplicit")
        futs = [p.send("sendexplicit", b"%d" % i, partition=i % 3) for i in range(n)]
        p.flush(60)
        mds = [f.result(0) for f in futs]
    with Producer(bootstrap_servers=bootstrap, max_block_ms=300) as p2:
        p2.partitions_for("sendexplicit")
        with pytest.raises(GregorTimeoutError, match="partition 3"):
            p2.send("sendexplicit", b"x", partition=3)
    for part in range(3):
        mine = [md for i, md in enumerate(mds) if i % 3 == part]
        assert all(md.partition == part for md in mine)
        assert [md.offset for md in mine] == list(range(n // 3))
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition("sendexplicit", q) for q in range(3)])
        got: dict[int, list[int]] = {0: [], 1: [], 2: []}

        def consumed_all() -> bool:
            for r in c.poll(timeout_ms=200):
                got[r.partition].append(int(r.value))
            return sum(map(len, got.values())) >= n

        wait_until(consumed_all, timeout=60, msg="records consumed")
    assert got == {q: list(range(q, n, 3)) for q in range(3)}


def test_send_takes_every_argument_form(broker_server):
    """send() is a C method descriptor when the extension is built (client/records/_append.c,
    producer_send): positional and keyword arguments, a key, headers or a timestamp (the
    Python method's path) all land as they say; a wrong argument is the Python TypeError."""
    import inspect

    bootstrap = broker_server.bootstrap
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic("sendforms", partitions=2)
    assert list(inspect.signature(Producer.send).parameters)[1:] == [
        "topic", "value", "key", "partition", "headers", "timestamp_ms",
    ]  # fmt: skip
    with Producer(bootstrap_servers=bootstrap, acks="all") as p:
        p.partitions_for("sendforms")
        futs = [
            p.send("sendforms", b"a"),
            p.send("sendforms", value=b"b", partition=1),
            p.send(topic="sendforms", value=b"c", partition=0),
            p.send("sendforms", b"d", None, 1),
            p.send("sendforms", b"e", key=b"k", partition=0),
            p.send("sendforms", b"f", partition=1, headers=[("h", b"1")]),
            p.send("sendforms", b"g", partition=0, timestamp_ms=1_700_000_000_000),
            p.send("sendforms", "str-value", partition=1),  # (not bytes: the Python path)
        ]
        with pytest.raises(TypeError):
            p.send("sendforms", b"x", nope=1)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            p.send("sendforms", b"x", value=b"y")  # type: ignore[misc]
        with pytest.raises(TypeError):
            p.send()  # type: ignore[call-arg]
        p.flush(30)
        mds = [f.result(0) for f in futs]
    assert [md.partition for md in mds[1:]] == [1, 0, 1, 0, 1, 0, 1]
    assert mds[6].timestamp == 1_700_000_000_000
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition("sendforms", q) for q in range(2)])
        got: list = []

        def consumed_all() -> bool:
            got.extend(c.poll(timeout_ms=200))
            return len(got) >= len(futs)

        wait_until(consumed_all, timeout=30, msg="records consumed")
    by_value = {r.value: r for r in got}
    assert set(by_value) == {b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"str-value"}
    assert by_value[b"e"].key == b"k" and by_value[b"b"].partition == 1
    assert list(by_value[b"f"].headers) == [("h", b"1")]


def test_a_producer_dropped_without_close_fails_its_records_and_frees_their_callbacks(
    broker_server,
):
    """A running DeliveryFuture stays out of the cyclic GC with its callbacks
    (client/aio/futures.py), so none may be left running: a producer garbage-collected
    without close() fails every record it holds once its loop stops, runs their callbacks,
    and a callback that refers back to its future (a cycle) is then freed."""
    import gc
    import weakref

    from client.errors import ClientClosedError

    bootstrap = broker_server.bootstrap
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic("senddropped", partitions=1)

    errors: list[BaseException | None] = []

    class Callback:
        def __init__(self) -> None:
            self.future = None

        def __call__(self, fut) -> None:
            errors.append(fut.exception())

    # linger.ms and batch.size large enough that every record stays queued
    p = Producer(bootstrap_servers=bootstrap, linger_ms=600_000, batch_size=1 << 20)
    p.partitions_for("senddropped")
    futs, seen = [], []
    for i in range(200):
        f = p.send("senddropped", b"%d" % i)
        cb = Callback()
        cb.future = f  # the callback leads back to its future
        f.add_done_callback(cb)
        futs.append(f)
        seen.append(weakref.ref(cb))
    del f, cb
    assert not any(f.done() for f in futs)
    thread = p._lt.thread
    del p
    gc.collect()  # the producer's finalizer stops its loop
    wait_until(lambda: not thread.is_alive(), timeout=30, msg="the producer's loop stopped")
    assert all(isinstance(f.exception(0), ClientClosedError) for f in futs)
    assert len(errors) == 200 and all(isinstance(e, ClientClosedError) for e in errors)
    gc.collect()
    assert all(ref() is None for ref in seen)  # each future let go of its callback
