"""DeliveryFuture behaves as a concurrent.futures.Future across threads."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from client.aio.futures import DeliveryFuture


def test_result_from_another_thread_and_callbacks() -> None:
    f = DeliveryFuture()
    seen: list = []
    f.add_done_callback(lambda fut: seen.append(fut.result()))
    assert isinstance(f, concurrent.futures.Future) and f.running() and not f.done()
    assert not f.cancel()
    threading.Timer(0.01, f.set_result, args=(42,)).start()
    assert f.result(5) == 42
    assert seen == [42]
    f.add_done_callback(lambda fut: seen.append("late"))  # runs at once when done
    assert seen == [42, "late"]
    with pytest.raises(concurrent.futures.InvalidStateError):
        f.set_result(1)


def test_exception_and_timeout() -> None:
    f = DeliveryFuture()
    with pytest.raises(TimeoutError):
        f.result(0.01)
    f.set_exception(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        f.result(0)
    assert isinstance(f.exception(0), ValueError)


def test_works_with_wait_and_as_completed() -> None:
    futs = [DeliveryFuture() for _ in range(3)]
    for i, f in enumerate(futs):
        threading.Timer(0.005 * (i + 1), f.set_result, args=(i,)).start()
    assert sorted(f.result() for f in concurrent.futures.as_completed(futs, timeout=5)) == [0, 1, 2]
    done, not_done = concurrent.futures.wait(futs, timeout=5)
    assert len(done) == 3 and not not_done


def test_a_failing_callback_is_logged_not_raised(caplog) -> None:
    f = DeliveryFuture()
    f.add_done_callback(lambda fut: 1 / 0)
    f.set_result(None)
    assert "exception calling callback" in caplog.text


def test_several_callbacks_run_once_in_order() -> None:
    f = DeliveryFuture()
    seen: list = []
    for i in range(3):
        f.add_done_callback(lambda fut, i=i: seen.append(i))
    f.set_result(None)
    assert seen == [0, 1, 2]
    f.add_done_callback(lambda fut: seen.append("late"))
    assert seen == [0, 1, 2, "late"]


def test_a_pending_future_holds_no_containers() -> None:
    # Tens of thousands of pending futures are walked by every full GC: each must be one
    # tracked object (slots, no lists until a waiter or a second callback needs one).
    import gc

    f = DeliveryFuture()
    f.add_done_callback(lambda fut: None)
    assert not [o for o in gc.get_referents(f) if isinstance(o, (list, dict))]
    f.set_result(1)
    assert not [o for o in gc.get_referents(f) if isinstance(o, (list, dict))]
    assert concurrent.futures.wait([f], timeout=1).done == {f}


def test_set_acked_makes_its_record_metadata_when_asked() -> None:
    """The producer resolves a record's future with its partition, offset and timestamp; the
    RecordMetadata is made on the first result() and kept (callbacks and wait() see it)."""
    from client.aio.types import RecordMetadata, TopicPartition

    f = DeliveryFuture()
    seen: list = []
    f.add_done_callback(lambda fut: seen.append(fut.result()))
    waiter = threading.Thread(target=lambda: seen.append(concurrent.futures.wait([f], 5)))
    waiter.start()
    f.set_acked(TopicPartition("t", 3), 17, 1_700_000_000_000)
    waiter.join(5)
    md = f.result(0)
    assert md == RecordMetadata("t", 3, 17, 1_700_000_000_000) and isinstance(md, RecordMetadata)
    assert f.result(0) is md and seen[0] is md and f.exception(0) is None
    assert f in seen[1].done
    with pytest.raises(concurrent.futures.InvalidStateError):
        f.set_acked(TopicPartition("t", 3), 18, 0)


def test_bulk_ack_resolves_each_record_once_and_runs_callbacks_in_order() -> None:
    from client.aio.futures import ack_delivery_futures
    from client.aio.types import RecordMetadata, TopicPartition

    tp = TopicPartition("t", 3)
    futs = [DeliveryFuture() for _ in range(5)]
    seen: list = []
    futs[1].add_done_callback(lambda f: seen.append(("a", f.result().offset)))
    futs[1].add_done_callback(lambda f: seen.append(("b", f.result().offset)))
    futs[3].add_done_callback(lambda f: seen.append(("c", f.result().offset)))
    futs[4].set_exception(ValueError("failed before"))  # finished already: left alone
    other = concurrent.futures.Future()  # not a DeliveryFuture: handed back
    waited: list = []
    waiter = threading.Thread(target=lambda: waited.append(futs[2].result(10)))
    waiter.start()
    entries = [(None, b"v", None, 1000 + i) for i in range(6)]
    flat = [0, futs[0], 1, futs[1], 2, futs[2], 3, futs[3], 4, futs[4], 5, other]
    rest = ack_delivery_futures(flat, tp, 100, -1, entries)
    assert rest == [5, other]
    waiter.join(10)
    assert waited == [RecordMetadata("t", 3, 102, 1002)]
    assert [f.result(0) for f in futs[:4]] == [
        RecordMetadata("t", 3, 100 + i, 1000 + i) for i in range(4)
    ]
    assert isinstance(futs[4].exception(0), ValueError)
    assert seen == [("a", 101), ("b", 101), ("c", 103)]
    # the broker's LogAppendTime wins; an unknown base offset gives -1
    g = DeliveryFuture()
    assert ack_delivery_futures([0, g], tp, -1, 7777, entries) == []
    assert g.result(0) == RecordMetadata("t", 3, -1, 7777)


def test_bulk_ack_wakes_concurrent_futures_wait() -> None:
    from client.aio.futures import ack_delivery_futures
    from client.aio.types import TopicPartition

    futs = [DeliveryFuture() for _ in range(3)]
    entries = [(None, b"v", None, 1)] * 3
    flat = [x for i, f in enumerate(futs) for x in (i, f)]
    threading.Timer(
        0.01, ack_delivery_futures, (flat, TopicPartition("t", 0), 0, -1, entries)
    ).start()
    got = sorted(f.result().offset for f in concurrent.futures.as_completed(futs, timeout=10))
    assert got == [0, 1, 2]


def _untracking_built() -> bool:
    from client.aio import futures

    return futures._gc_untrack is not None


@pytest.mark.skipif(
    not _untracking_built(), reason="C extension client.records._speedups not built"
)
def test_untracked_until_it_may_be_in_a_cycle_and_such_cycles_are_collected() -> None:
    import gc
    import weakref

    from client.aio.futures import ack_delivery_futures
    from client.aio.types import TopicPartition

    f = DeliveryFuture()
    assert not gc.is_tracked(f)  # a plain send()'s future: no work for the cyclic GC
    ack_delivery_futures([0, f], TopicPartition("t", 0), 5, -1, [(None, b"v", None, 1)])
    assert not gc.is_tracked(f) and f.result(0).offset == 5

    class Callback:  # refers back to its future: a cycle the GC must be able to collect
        def __call__(self, fut: DeliveryFuture) -> None:
            pass

    # Running, it stays untracked with its callback: its producer holds it until it finishes
    # (a producer stopped fails what is left: tests/integration/test_producer_send_path.py),
    # and finishing lets go of the callback, so the cycle goes with the last reference.
    g = DeliveryFuture()
    cb = Callback()
    cb.future = g  # type: ignore[attr-defined]
    g.add_done_callback(cb)
    assert not gc.is_tracked(g)
    seen = weakref.ref(cb)
    ack_delivery_futures([0, g], TopicPartition("t", 0), 6, -1, [(None, b"v", None, 1)])
    assert g._done_callbacks is None and not gc.is_tracked(g)
    del g, cb
    gc.collect()
    assert seen() is None
    g = DeliveryFuture()  # the same through the Python path (a second callback: a list)
    cb = Callback()
    cb.future = g  # type: ignore[attr-defined]
    g.add_done_callback(cb)
    g.add_done_callback(cb)
    assert not gc.is_tracked(g)
    seen = weakref.ref(cb)
    g.set_result(None)
    del g, cb
    gc.collect()
    assert seen() is None

    class Boom(Exception):  # (a subclass: built-in exceptions take no weak references)
        pass

    h = DeliveryFuture()
    exc = Boom("failed")
    exc.future = h  # type: ignore[attr-defined]  # (as a traceback's frame may hold it)
    h.set_exception(exc)
    assert gc.is_tracked(h)
    seen_exc = weakref.ref(exc)
    del h, exc
    gc.collect()
    assert seen_exc() is None

    w = DeliveryFuture()
    concurrent.futures.wait([w], timeout=0)  # leaves a waiter list on it
    assert gc.is_tracked(w)
