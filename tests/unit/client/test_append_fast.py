"""client.records._append, the sync producer's per-record path in C: it does what the Python
path does in the common case, and does nothing (answers None/False) in every other case, so
that the Python path then runs as before. Checked against a real RecordAccumulator and a real
client.aio.Producer's state (no broker: its metadata snapshot is set by hand)."""

from __future__ import annotations

import concurrent.futures
import gc
import threading

import pytest

from client.aio.accumulator import RECORD_OVERHEAD
from client.aio.futures import FUTURE_PROTOTYPE, DeliveryFuture, ack_delivery_futures
from client.aio.producer import Producer
from client.aio.types import RecordMetadata, TopicPartition
from client.records.extensions import optional_extension

_append = optional_extension("client.records._append")
pytestmark = pytest.mark.skipif(_append is None, reason="client.records._append not built")

TP = TopicPartition("t", 0)


def _producer(batch_size: int = 1000) -> tuple[Producer, tuple]:
    """An unstarted producer whose view of topic "t" (one partition) is primed by one
    record through the Python path, as the first send() of a sync producer does."""
    p = Producer(bootstrap_servers="127.0.0.1:1", batch_size=batch_size)
    md = object()  # the snapshot the cached view was made from
    p._cluster.metadata = md  # type: ignore[assignment]
    p._plain_topics["t"] = (md, [TP], [0])
    p._sticky._current["t"] = 0
    assert p._acc.try_append(TP, 1, None, b"first", None, RECORD_OVERHEAD + 5, None)[0]
    return p, p_ctx(p)


def p_ctx(p: Producer) -> tuple:
    """client.sync.Producer's context for append_plain, for the same core."""
    acc = p._acc
    return (
        p,
        acc,
        p._cluster,
        p._sticky._current,
        FUTURE_PROTOTYPE,
        RECORD_OVERHEAD,
        acc.lock,
        acc.batches,
        p._plain_topics,
        p._max_record,
        acc.buffer_memory,
        acc.batch_size,
    )


def test_append_plain_appends_as_the_python_path_does() -> None:
    p, ctx = _producer()
    batch = p._acc.batches[TP][-1]
    before = p._acc.buffered
    f1 = _append.append_plain(ctx, "t", b"abc", None)
    f2 = _append.append_plain(ctx, "t", b"", None)
    assert type(f1) is DeliveryFuture and type(f2) is DeliveryFuture and f1 is not f2
    assert f1.running() and not f1.done() and not gc.is_tracked(f1)
    assert [e[:3] for e in batch.entries] == [
        (None, b"first", None),
        (None, b"abc", None),
        (None, b"", None),
    ]
    assert all(isinstance(e[3], int) and e[3] > 1_600_000_000_000 for e in batch.entries[1:])
    assert not any(gc.is_tracked(e) for e in batch.entries[1:])  # (atomic: no GC work)
    assert batch.futures == [1, f1, 2, f2]
    grown = 2 * RECORD_OVERHEAD + 3
    assert batch.size == RECORD_OVERHEAD + 5 + grown and p._acc.buffered == before + grown
    # its futures finish as any DeliveryFuture: offsets by position, callbacks in order
    seen: list = []
    f1.add_done_callback(lambda f: seen.append(f.result().offset))
    ack_delivery_futures(batch.futures, TP, 10, -1, batch.entries)
    assert f1.result(0) == RecordMetadata("t", 0, 11, batch.entries[1][3])
    assert f2.result(0).offset == 12 and seen == [11]
    assert not FUTURE_PROTOTYPE.done() and FUTURE_PROTOTYPE._done_callbacks is None


def test_append_plain_leaves_every_other_case_to_the_python_path() -> None:
    p, ctx = _producer(batch_size=200)
    batch = p._acc.batches[TP][-1]

    def untouched() -> bool:
        return len(batch.entries) == 1 and batch.futures == []

    assert _append.append_plain(ctx, "other", b"v", None) is None  # topic not cached
    assert _append.append_plain(ctx, "t", bytearray(b"v"), None) is None  # not bytes
    assert _append.append_plain(ctx, "t", b"v" * 200, None) is None  # would fill the batch
    with p._acc.lock:  # held by another thread's critical section
        assert _append.append_plain(ctx, "t", b"v", None) is None
    p._cluster.metadata = object()  # type: ignore[assignment]  # a newer snapshot
    assert _append.append_plain(ctx, "t", b"v", None) is None
    p._cluster.metadata = p._plain_topics["t"][0]
    batch.full = True
    assert _append.append_plain(ctx, "t", b"v", None) is None
    batch.full = False
    p._acc.buffered = p._acc.buffer_memory  # buffer full
    assert _append.append_plain(ctx, "t", b"v", None) is None
    p._acc.buffered = RECORD_OVERHEAD + 5
    p._closed = True
    assert _append.append_plain(ctx, "t", b"v", None) is None  # the Python path raises
    p._closed = False
    assert untouched()
    assert _append.append_plain(ctx, "t", b"v", None) is not None and not untouched()


def test_append_plain_to_an_explicit_partition() -> None:
    p, ctx = _producer()
    tp1 = TopicPartition("t", 1)
    md = p._cluster.metadata
    p._plain_topics["t"] = (md, [TP, tp1], [0, 1])
    assert p._acc.try_append(tp1, 1, None, b"one", None, RECORD_OVERHEAD + 3, None)[0]
    f = _append.append_plain(ctx, "t", b"x", 1)
    assert f is not None and p._acc.batches[tp1][-1].futures == [1, f]
    assert len(p._acc.batches[TP][-1].entries) == 1  # the sticky partition's: untouched
    for bad in (2, -1, 2**80):  # not in the cached view: the Python path waits or raises
        assert _append.append_plain(ctx, "t", b"x", bad) is None
    assert len(p._acc.batches[tp1][-1].entries) == 2


def test_append_plain_asks_the_transaction_manager_first() -> None:
    p, ctx = _producer()

    class Txn:
        def check_send(self) -> None:
            raise RuntimeError("not in a transaction")

    p._txn = Txn()  # type: ignore[assignment]
    with pytest.raises(RuntimeError, match="not in a transaction"):
        _append.append_plain(ctx, "t", b"v", None)
    assert len(p._acc.batches[TP][-1].entries) == 1


def test_add_callback_takes_only_the_first_callback_of_a_running_future() -> None:
    from client.aio import futures

    f = DeliveryFuture()
    assert not gc.is_tracked(f)
    assert _append.add_callback(f, print, futures._LOCK, "RUNNING")
    assert f._done_callbacks is print and not gc.is_tracked(f)  # (running: futures.py)
    assert not _append.add_callback(f, repr, futures._LOCK, "RUNNING")  # a second one
    g = DeliveryFuture()
    with futures._LOCK:  # held: someone is finishing or changing a future
        assert not _append.add_callback(g, print, futures._LOCK, "RUNNING")
    g.set_result(None)
    assert not _append.add_callback(g, print, futures._LOCK, "RUNNING")  # finished
    assert g._done_callbacks is None


def test_ack_does_nothing_while_the_lock_is_held() -> None:
    from concurrent.futures._base import FINISHED

    from client.aio import futures

    fs = [DeliveryFuture() for _ in range(2)]
    flat = [0, fs[0], 1, fs[1]]
    entries = [(None, b"v", None, 5)] * 2
    with futures._LOCK:
        assert (
            _append.ack(flat, DeliveryFuture, FINISHED, TP, 0, -1, entries, futures._LOCK) is None
        )
    assert not any(f.done() for f in fs)
    # a bad index is not its case either
    bad = [7, fs[0]]
    assert _append.ack(bad, DeliveryFuture, FINISHED, TP, 0, -1, entries, futures._LOCK) is None
    notify = _append.ack(flat, DeliveryFuture, FINISHED, TP, 0, -1, entries, futures._LOCK)
    assert notify == [] and [f.result(0).offset for f in fs] == [0, 1]


def test_callbacks_added_from_threads_while_batches_are_acked_run_once() -> None:
    """add_done_callback (C, GIL as the lock) racing ack_delivery_futures (C) on another
    thread: every callback runs exactly once, either at the ack or at once when added late."""
    rounds, per = 200, 50
    counts = [0] * (rounds * per)
    stop = threading.Event()
    batches: list[list] = []
    for _ in range(rounds):
        batches.append([x for i in range(per) for x in (i, DeliveryFuture())])
    entries = [(None, b"v", None, 1)] * per

    def acker() -> None:
        for r, flat in enumerate(batches):
            ack_delivery_futures(flat, TopicPartition("t", 0), r * per, -1, entries)
        stop.set()

    t = threading.Thread(target=acker)
    t.start()
    for flat in batches:
        for f in flat[1::2]:
            f.add_done_callback(
                lambda f: counts.__setitem__(f.result().offset, 1 + counts[f.result().offset])
            )
    t.join(60)
    assert stop.is_set()
    assert counts == [1] * (rounds * per)
    assert concurrent.futures.wait([batches[-1][1]], timeout=0).done


def test_future_methods_are_c_descriptors_that_behave_as_the_python_methods() -> None:
    """bind_future: add_done_callback, exception and result run C for the common case and the
    Python methods (the fallbacks) for every other, with the same answers."""
    from client.aio import futures

    for name in ("add_done_callback", "exception", "result"):
        assert type(vars(DeliveryFuture)[name]).__name__ == "method_descriptor", name
    # running: a first callback is stored; a second goes to the Python method (a list)
    f = DeliveryFuture()
    seen: list = []
    f.add_done_callback(seen.append)
    assert f._done_callbacks == seen.append
    f.add_done_callback(lambda fut: seen.append("second"))
    assert type(f._done_callbacks) is list and len(f._done_callbacks) == 2
    with pytest.raises(TimeoutError):
        f.exception(0)  # (running: the Python method waits)
    with pytest.raises(TimeoutError):
        f.result(timeout=0)
    ack_delivery_futures([3, f], TP, 10, 77, [None] * 4)
    assert seen == [f, "second"] and f._done_callbacks is None
    assert f.exception() is None and f.exception(timeout=1) is None
    md = f.result()
    assert md == RecordMetadata("t", 0, 13, 77) and f.result(5) is md  # made once, kept
    f.add_done_callback(seen.append)  # finished: called at once
    assert seen[-1] is f
    # failed: exception() hands it over, result() raises it
    g = DeliveryFuture()
    boom = ValueError("boom")
    g.set_exception(boom)
    assert g.exception() is boom
    with pytest.raises(ValueError, match="boom"):
        g.result()
    # a finished future made by set_result keeps its result
    h = DeliveryFuture()
    h.set_result("r")
    assert h.result() == "r" and h.exception() is None
    # wrong arguments: the Python method's own TypeError
    with pytest.raises(TypeError):
        f.add_done_callback()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        f.exception(nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        DeliveryFuture.result(object())  # type: ignore[arg-type]
    assert futures._LOCK.acquire(blocking=False)
    futures._LOCK.release()


def test_notify_all_runs_callbacks_in_order_logs_exceptions_and_lets_base_exceptions_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from client.aio import futures

    fs = [DeliveryFuture() for _ in range(3)]
    seen: list = []

    def boom(fut: DeliveryFuture) -> None:
        raise RuntimeError("callback failed")

    fs[0].add_done_callback(lambda fut: seen.append(0))
    fs[1].add_done_callback(boom)
    fs[1].add_done_callback(lambda fut: seen.append(1))
    fs[2].add_done_callback(lambda fut: seen.append(2))
    with caplog.at_level("ERROR", logger="client.aio.futures"):
        ack_delivery_futures([0, fs[0], 1, fs[1], 2, fs[2]], TP, 0, 1, [None] * 3)
    assert seen == [0, 1, 2]
    (rec,) = [r for r in caplog.records if "exception calling callback" in r.getMessage()]
    assert rec.exc_info is not None and str(rec.exc_info[1]) == "callback failed"

    class Stop(BaseException):
        pass

    def stop(fut: DeliveryFuture) -> None:
        raise Stop

    g1, g2 = DeliveryFuture(), DeliveryFuture()
    g1.add_done_callback(stop)
    g2.add_done_callback(lambda fut: seen.append("after"))
    notify = _append.ack([0, g1, 1, g2], DeliveryFuture, "FINISHED", TP, 0, 1, [None] * 2,
                         futures._LOCK)  # fmt: skip
    with pytest.raises(Stop):
        _append.notify_all(notify)  # as the Python loop: a BaseException is not caught
    assert seen[-1] == 2
    with pytest.raises(TypeError):
        _append.notify_all([1, 2, 3])  # not groups of four
