"""RequestChannel on its own: bounded queue, space notifications, in-flight accounting."""

from __future__ import annotations

import threading

import pytest
from helpers import wait_until

from broker.request_channel import RequestChannel


def test_bounded_try_send_and_space_callback() -> None:
    ch = RequestChannel(2)
    assert ch.try_send("a") and ch.try_send("b")
    assert not ch.try_send("c")
    woken: list[int] = []
    ch.notify_when_space(lambda: woken.append(1))
    assert woken == []
    assert ch.receive(1.0) == "a"
    assert woken == [1]
    assert ch.try_send("c") and ch.size == 2 and ch.high_water == 2
    ch.notify_when_space(lambda: woken.append(2))  # full again: deferred
    assert woken == [1]
    ch.receive(1.0)
    assert woken == [1, 2]


def test_space_callback_runs_at_once_when_room() -> None:
    ch = RequestChannel(1)
    woken: list[int] = []
    ch.notify_when_space(lambda: woken.append(1))
    assert woken == [1]


def test_in_flight_and_wait_idle() -> None:
    ch = RequestChannel(4)
    for item in "ab":
        ch.request_started()
        ch.try_send(item)
    assert ch.in_flight == 2
    assert ch.receive(1.0) == "a"
    assert ch.in_flight == 2  # taken is not finished
    assert not ch.wait_idle(0.01)
    done = threading.Event()

    def finisher() -> None:
        ch.receive(1.0)
        ch.request_done()
        ch.request_done()
        done.set()

    threading.Thread(target=finisher).start()
    assert ch.wait_idle(5.0)
    assert done.wait(5.0) and ch.in_flight == 0


def test_blocking_send_waits_for_room() -> None:
    ch = RequestChannel(1)
    ch.try_send("a")
    assert not ch.send("b", timeout=0.01)
    sent = threading.Event()
    t = threading.Thread(target=lambda: (ch.send("b", timeout=5.0), sent.set()))
    t.start()
    assert ch.receive(1.0) == "a"
    assert sent.wait(5.0)
    assert ch.receive(1.0) == "b"
    t.join(5)


def test_close_wakes_receivers_and_refuses_sends() -> None:
    ch = RequestChannel(1)
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(ch.receive()))
    t.start()
    wait_until(lambda: t.is_alive(), 1.0, "receiver waiting")
    ch.close()
    t.join(5)
    assert got == [None]
    with pytest.raises(RuntimeError):
        ch.try_send("x")


def test_rejects_zero_capacity() -> None:
    with pytest.raises(ValueError):
        RequestChannel(0)


def _receiver(ch: RequestChannel, got: list[object], timeout: float | None = None):
    t = threading.Thread(target=lambda: got.append(ch.receive(timeout)))
    t.start()
    return t


def test_a_request_wakes_one_idle_receiver_the_last_to_wait() -> None:
    """Two receivers wait; one request is handed to the one that started waiting last, and the
    other keeps waiting (it is not woken for nothing); closing wakes it with None."""
    ch = RequestChannel(4)
    first: list[object] = []
    second: list[object] = []
    t1 = _receiver(ch, first)
    wait_until(lambda: ch.idle_receivers == 1, 5, "first receiver waiting")
    t2 = _receiver(ch, second)
    wait_until(lambda: ch.idle_receivers == 2, 5, "second receiver waiting")
    assert ch.try_send("a")
    t2.join(5)
    assert second == ["a"] and ch.size == 0
    assert t1.is_alive() and ch.idle_receivers == 1 and first == []
    ch.close()
    t1.join(5)
    assert first == [None]


def test_a_receiver_that_timed_out_is_not_handed_requests() -> None:
    ch = RequestChannel(4)
    got: list[object] = []
    t = _receiver(ch, got, timeout=0.05)
    t.join(5)
    assert got == [None] and ch.idle_receivers == 0
    assert ch.try_send("a") and ch.size == 1  # queued: nobody is waiting
    assert ch.receive(1.0) == "a"


def test_requests_queue_while_every_receiver_is_busy() -> None:
    """With no receiver waiting, requests wait in the queue (bounded) and are taken in order
    without anyone sleeping."""
    ch = RequestChannel(2)
    assert ch.try_send("a") and ch.try_send("b") and not ch.try_send("c")
    assert ch.high_water == 2
    assert [ch.receive(1.0), ch.receive(1.0)] == ["a", "b"]
