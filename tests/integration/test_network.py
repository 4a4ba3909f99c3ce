"""The request pipeline on real sockets: round trips, muting, idle and connection limits,
late and absent responses, error translation, back-pressure, graceful shutdown."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from helpers import GatedDispatch, RawClient, api_versions_ok, wait_until

from broker.handlers import HANDLERS, dispatch
from client.errors import ErrorCode, NotLeaderOrFollowerError
from client.protocol.schema import API_SPECS, INT32, STRING, ApiSpec, Field, Struct

TEST_KEY = 9_999  # an API key no real API uses; schema and handler installed per test


@pytest.fixture
def test_api(monkeypatch: pytest.MonkeyPatch):
    """Install a test API (key 9999, body {n: int32, mode: string}) whose handler does what
    `mode` says. Removed again after the test."""
    spec = ApiSpec(
        key=TEST_KEY,
        name="TestEcho",
        min_version=0,
        max_version=1,
        request=Struct(Field("n", INT32), Field("mode", STRING, default="echo")),
        response=Struct(Field("error_code", INT32, default=0), Field("n", INT32, default=0)),
    )
    state: dict[str, Any] = {"calls": [], "later": []}

    def handle(ctx, body):
        state["calls"].append(body["n"])
        mode = body["mode"]
        if mode == "echo":
            return {"n": body["n"]}
        if mode == "none":
            ctx.no_response()
            return None
        if mode == "later":
            t = threading.Timer(0.02, lambda: ctx.respond({"n": body["n"]}))
            state["later"].append(t)
            t.start()
            return None
        if mode == "api_error":
            raise NotLeaderOrFollowerError("not the leader for that partition")
        if mode == "crash":
            raise ZeroDivisionError("handler bug")
        if mode == "bad_response":
            return {"n": "not an int"}
        if mode == "unencodable":
            ctx.respond_raw({"n": object()})
            return None
        raise AssertionError(mode)

    monkeypatch.setitem(API_SPECS, TEST_KEY, spec)
    monkeypatch.setitem(HANDLERS, TEST_KEY, handle)
    yield state
    for t in state["later"]:
        t.join(5)


def test_api_versions_round_trip(broker_server) -> None:
    body = api_versions_ok(broker_server.address)
    assert body["throttle_time_ms"] == 0
    assert broker_server.bootstrap == f"127.0.0.1:{broker_server.port}"
    assert broker_server.port != 0


def test_api_versions_unknown_version_still_lists_table(broker_server) -> None:
    with RawClient(broker_server.address) as c:
        body = c.request(18, 99, {}, correlation_id=7)
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert {"api_key": 18, "min_version": 0, "max_version": 0} in body["api_keys"]


def test_pipelined_requests_answered_in_order(broker_factory, test_api) -> None:
    b = broker_factory(num_network_threads=2, num_io_threads=4)
    with RawClient(b.address) as c:
        # Mixed fast and late answers on one connection: muting keeps the order.
        modes = ["echo", "later", "echo", "later", "echo"] * 10
        c.send_raw(
            b"".join(_frame(TEST_KEY, 0, i, {"n": i, "mode": m}) for i, m in enumerate(modes))
        )
        got = [c.recv() for _ in modes]
    assert [corr for corr, _ in got] == list(range(len(modes)))
    assert [body["n"] for _, body in got] == list(range(len(modes)))


@pytest.mark.parametrize("together", [True, False], ids=["one_write", "second_while_watching"])
def test_muted_connection_dispatches_one_request_at_a_time(broker_factory, together) -> None:
    """Two requests, written at once or the second while the first is in the broker (the
    connection reads it while watching, and stays muted): one dispatched at a time, answers
    in request order."""
    gated = GatedDispatch(timeout=10)
    gate, seen = gated.gate, gated.seen
    b = broker_factory(dispatch=gated, num_io_threads=4)
    with RawClient(b.address) as c:
        if together:
            c.send_raw(_frame(18, 0, 1, {}) + _frame(18, 0, 2, {}))
            wait_until(lambda: seen == [1], 5, "first request dispatched")
        else:
            c.send(18, 0, 1, {})
            wait_until(lambda: seen == [1], 5, "first request dispatched")
            c.send(18, 0, 2, {})
        # Four idle I/O threads, yet the second request waits: the connection is muted.
        with pytest.raises(AssertionError):
            wait_until(lambda: len(seen) > 1, 0.2, "second request dispatched")
        gate.set()
        assert c.recv()[0] == 1
        assert c.recv()[0] == 2
    assert seen == [1, 2]


def test_many_connections_many_threads(broker_factory) -> None:
    b = broker_factory(num_network_threads=3, num_io_threads=3)
    clients = [RawClient(b.address) for _ in range(12)]
    try:
        for round_ in range(5):
            for i, c in enumerate(clients):
                c.send(18, 0, round_ * 100 + i, {})
            for i, c in enumerate(clients):
                assert c.recv()[0] == round_ * 100 + i
    finally:
        for c in clients:
            c.close()
    wait_until(lambda: b.server.socket_server.connection_count == 0, 5, "connections released")


def test_no_response_unmutes(broker_server, test_api) -> None:
    with RawClient(broker_server.address) as c:
        c.send(TEST_KEY, 0, 1, {"n": 1, "mode": "none"})  # like acks=0: nothing comes back
        c.send(TEST_KEY, 0, 2, {"n": 2})
        assert c.recv() == (2, {"error_code": 0, "n": 2})
    assert test_api["calls"] == [1, 2]


def test_error_translation(broker_server, test_api, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="broker"):
        with RawClient(broker_server.address) as c:
            body = c.request(TEST_KEY, 0, {"n": 1, "mode": "api_error"}, correlation_id=11)
            assert body["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert "not the leader" in body["error_message"]
            body = c.request(TEST_KEY, 0, {"n": 2, "mode": "crash"}, correlation_id=12)
            assert body["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
            body = c.request(TEST_KEY, 0, {"n": 3, "mode": "bad_response"}, correlation_id=13)
            assert body["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
            body = c.request(TEST_KEY, 0, {"n": 4, "mode": "unencodable"}, correlation_id=15)
            assert body["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
            # Same connection still serves.
            assert c.request(TEST_KEY, 1, {"n": 4}, correlation_id=14) == {"error_code": 0, "n": 4}
    assert "ZeroDivisionError: handler bug" in caplog.text  # the traceback was logged
    assert "does not match its schema" in caplog.text
    assert "cannot encode the response" in caplog.text
    api_versions_ok(broker_server.address)


def test_idle_connection_closed(broker_factory, caplog: pytest.LogCaptureFixture) -> None:
    b = broker_factory(connections_max_idle_ms=150)
    with caplog.at_level(logging.INFO, logger="broker.network"):
        with RawClient(b.address) as c:
            assert c.request(18, 0, {})["error_code"] == 0
            t0 = time.monotonic()
            assert c.closed_by_peer(5.0)
            assert time.monotonic() - t0 >= 0.1
    assert "connections.max.idle.ms=150" in caplog.text
    api_versions_ok(b.address)


def test_max_connections_refused(broker_factory, caplog: pytest.LogCaptureFixture) -> None:
    b = broker_factory(max_connections=2)
    with caplog.at_level(logging.WARNING, logger="broker.network"):
        first, second = RawClient(b.address), RawClient(b.address)
        try:
            first.request(18, 0, {})
            second.request(18, 0, {})
            with RawClient(b.address) as third:
                assert third.closed_by_peer(5.0)
        finally:
            first.close()
        wait_until(lambda: b.server.socket_server.connection_count == 1, 5, "slot released")
        api_versions_ok(b.address)
        second.close()
    assert "max.connections=2 reached" in caplog.text


@pytest.mark.slow
def test_back_pressure_bounded_and_everyone_served(broker_factory) -> None:
    in_handler = []
    gate = threading.Event()

    def held(request, services):  # the one I/O thread is stuck until the gate opens
        in_handler.append(1)
        gate.wait(30)
        dispatch(request, services)

    b = broker_factory(
        dispatch=held, queued_max_requests=2, num_io_threads=1, num_network_threads=2
    )
    n_conns, per_conn = 16, 8
    clients = [RawClient(b.address, timeout=30) for _ in range(n_conns)]
    try:
        for c in clients:
            c.send_raw(b"".join(_frame(18, 0, i, {}) for i in range(per_conn)))
        channel = b.server.channel
        # With the worker held, the queue fills to its bound and the network threads stop
        # reading (back-pressure) instead of queueing more.
        # (the worker takes its request off the queue in its own time: the queue can be full
        # a moment before the worker is in the handler, and then refills to its bound)
        wait_until(
            lambda: channel.size == 2 and len(in_handler) == 1, 10, "the request queue to fill"
        )
        assert channel.high_water == 2
        gate.set()
        for c in clients:
            assert [c.recv()[0] for _ in range(per_conn)] == list(range(per_conn))
    finally:
        for c in clients:
            c.close()
    assert channel.high_water <= 2  # the queue never grew past queued.max.requests
    assert len(in_handler) == n_conns * per_conn


def test_graceful_shutdown_finishes_in_flight(broker_factory) -> None:
    gate = threading.Event()
    started = threading.Event()

    def gated(request, services):
        started.set()
        gate.wait(10)
        dispatch(request, services)

    b = broker_factory(dispatch=gated)
    c = RawClient(b.address)
    c.send(18, 0, 99, {})
    assert started.wait(5)
    stopper = threading.Thread(target=b.server.shutdown)
    stopper.start()
    # Shutdown stops accepting at once but waits for the request in flight.
    wait_until(lambda: _refused(b.address), 5, "listener closed")
    assert stopper.is_alive()
    gate.set()
    corr, body = c.recv()
    assert corr == 99 and body["error_code"] == 0
    stopper.join(10)
    assert not stopper.is_alive()
    c.close()


def _refused(address: tuple[str, int]) -> bool:
    import socket

    try:
        socket.create_connection(address, timeout=1).close()
    except OSError:
        return True
    return False


def _frame(api_key: int, version: int, corr: int, body: dict) -> bytes:
    from client.protocol.framing import encode_request

    return encode_request(api_key, version, corr, "t", body)


def test_parked_request_of_closed_connection_is_accounted(broker_factory) -> None:
    gate = threading.Event()

    def gated(request, services):
        gate.wait(10)
        dispatch(request, services)

    b = broker_factory(dispatch=gated, queued_max_requests=1, num_io_threads=1)
    channel = b.server.channel
    a, q, p = (RawClient(b.address) for _ in range(3))
    try:
        a.send(18, 0, 1, {})  # taken by the only I/O thread, held at the gate
        wait_until(lambda: channel.in_flight == 1 and channel.size == 0, 5, "a dispatched")
        q.send(18, 0, 2, {})  # fills the queue
        wait_until(lambda: channel.size == 1, 5, "q queued")
        p.send(18, 0, 3, {})  # no room: parked on its network thread
        wait_until(lambda: channel.in_flight == 3, 5, "p parked")
        # A muted connection does not read, so p's hang-up is seen only once its request moves
        # on (as in Kafka); the accounting must still come back to zero.
        p.close()
        gate.set()
        assert a.recv()[0] == 1 and q.recv()[0] == 2
        wait_until(lambda: channel.in_flight == 0, 5, "all done")
        wait_until(lambda: b.server.socket_server.connection_count == 2, 5, "p's slot released")
    finally:
        gate.set()
        a.close()
        q.close()


def test_api_versions_lists_internal_apis_only_on_controllers(monkeypatch) -> None:
    from types import SimpleNamespace

    from broker.handlers.api_versions import supported_apis

    spec = ApiSpec(
        key=9_997, name="TestInternal", request=Struct(), response=Struct(), internal=True
    )
    monkeypatch.setitem(API_SPECS, spec.key, spec)
    monkeypatch.setitem(HANDLERS, spec.key, lambda ctx, body: {})
    broker_only = {a["api_key"] for a in supported_apis(SimpleNamespace(controller=None))}
    combined = {a["api_key"] for a in supported_apis(SimpleNamespace(controller=object()))}
    assert 18 in broker_only and spec.key not in broker_only
    assert spec.key in combined


def test_small_responses_written_by_the_answering_thread(broker_server, test_api) -> None:
    """Responses to requests taken with an empty transport buffer go out from the I/O thread
    (or the thread completing a delayed answer), still in request order."""
    processors = broker_server.server.socket_server.processors
    before = sum(p.direct_writes for p in processors)
    with RawClient(broker_server.address) as c:
        modes = ["echo", "later"] * 5
        for i, m in enumerate(modes):
            c.send(TEST_KEY, 0, i, {"n": i, "mode": m})
        got = [c.recv() for _ in modes]
    assert [corr for corr, _ in got] == list(range(len(modes)))
    assert sum(p.direct_writes for p in processors) - before >= len(modes) // 2


def test_answered_request_unmutes_at_the_next_frame(broker_factory) -> None:
    """A request answered whole by its answering thread while the connection watches
    (nothing else received) is finished there: the channel's in-flight count drops with no
    further frame, and the next request unmutes the connection without a wake-up of the loop."""
    b = broker_factory(num_network_threads=1)
    processor = b.server.socket_server.processors[0]
    channel = b.server.channel
    before = processor.unmuted_on_read
    with RawClient(b.address) as c:
        assert c.request(18, 0, {}, correlation_id=1)["error_code"] == 0
        wait_until(lambda: channel.in_flight == 0, 5, "the answered request finished")
        for corr in range(2, 12):
            assert c.request(18, 0, {}, correlation_id=corr)["error_code"] == 0
    assert processor.unmuted_on_read - before >= 10


def test_half_close_after_an_answer_closes(broker_factory) -> None:
    """The client reads its answer and half-closes: the broker closes the connection (the
    request finished by its answering thread does not keep it open)."""
    import socket

    b = broker_factory()
    with RawClient(b.address) as c:
        assert c.request(18, 0, {})["error_code"] == 0
        c.sock.shutdown(socket.SHUT_WR)
        assert c.closed_by_peer(5.0)
    wait_until(lambda: b.server.socket_server.connection_count == 0, 5, "connection released")


def test_watched_answers_are_counted_in_the_metrics_when_the_client_goes(broker_factory) -> None:
    """With metrics on, a request answered by its answering thread while the connection
    watched is recorded once the connection sees its next frame or closes: three round trips
    on a connection that then closes (or is reset) count three."""
    b = broker_factory(num_network_threads=1, **{"metrics.listener": "http://127.0.0.1:0"})
    recorder = b.server.socket_server.processors[0].recorder
    assert recorder is not None

    def api_versions_counted() -> int:
        rows = recorder.apis.get(18)
        return 0 if rows is None else sum(rows.buckets[-1])

    import socket
    import struct

    for reset in (False, True):  # a half-close, then a reset (no EOF: connection_lost only)
        before = api_versions_counted()
        with RawClient(b.address) as c:
            for corr in range(1, 4):
                assert c.request(18, 0, {}, correlation_id=corr)["error_code"] == 0
            if reset:
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        wait_until(lambda b0=before: api_versions_counted() - b0 == 3, 5, "three recorded")
