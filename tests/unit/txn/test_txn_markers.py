"""NetworkMarkerChannel with fake leader connections: one WriteTxnMarkers per leader in the
shape the partition side serves, retries after NOT_LEADER with the leader read again from the
metadata, deleted partitions counted as done, a fenced job dropped, an invalid job dropped."""

from __future__ import annotations

import threading

from helpers import wait_until

from broker.txn.markers import MarkerJob, MarkerSettings, NetworkMarkerChannel, marker_body
from client.errors import ErrorCode


class FakeLeader:
    """Answers each marker's partitions with the code `codes` gives (default NONE)."""

    def __init__(self, node: int, log: list, codes: dict) -> None:
        self.node = node
        self.log = log
        self.codes = codes
        self.closed = False

    def request(self, api_key: int, body: dict) -> dict:
        assert api_key == 27
        self.log.append((self.node, body))
        return {"markers": [
            {"producer_id": m["producer_id"], "topics": [
                {"name": t["name"], "partitions": [
                    {"partition_index": p,
                     "error_code": int(self.codes.get((self.node, t["name"], p), 0))}
                    for p in t["partition_indexes"]]}
                for t in m["topics"]]}
            for m in body["markers"]]}  # fmt: skip

    def close(self) -> None:
        self.closed = True


def _channel(leaders: dict, codes: dict, sent: list) -> NetworkMarkerChannel:
    return NetworkMarkerChannel(
        1,
        lambda t, p: leaders.get((t, p)),
        lambda b: ("127.0.0.1", 9000 + b),
        MarkerSettings(),
        connect=lambda ep: FakeLeader(ep[1] - 9000, sent, codes),
    )


def _wait(done: list, n: int) -> None:
    wait_until(lambda: len(done) >= n, timeout=10, msg="markers not done")


def test_body_shape() -> None:
    job = MarkerJob("t", 7, 3, True, frozenset({("b", 0), ("a", 2), ("a", 1)}), 4)
    assert marker_body([(job, [("b", 0), ("a", 2), ("a", 1)])]) == {"markers": [{
        "producer_id": 7, "producer_epoch": 3, "transaction_result": True,
        "topics": [{"name": "a", "partition_indexes": [1, 2]},
                   {"name": "b", "partition_indexes": [0]}],
        "coordinator_epoch": 4}]}  # fmt: skip


def test_one_request_per_leader_and_retry_after_leader_change() -> None:
    leaders = {("a", 0): 1, ("a", 1): 2, ("b", 0): 2}
    codes = {(2, "a", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER}
    sent: list = []
    ch = _channel(leaders, codes, sent)
    ch.start()
    done: list = []
    try:
        job = MarkerJob("t", 7, 0, False, frozenset(leaders), 0)
        ch.send(job, done.append, lambda: True)
        wait_until(lambda: len(sent) >= 3, timeout=10, msg="no retry")
        assert not done  # a-1 is refused by broker 2 and retried
        assert {n for n, _ in sent[:2]} == {1, 2}
        leaders[("a", 1)] = 3  # the metadata moved a-1 to broker 3
        _wait(done, 1)
        assert done == [True]
        last = sent[-1]
        assert last[0] == 3 and last[1]["markers"][0]["topics"] == [
            {"name": "a", "partition_indexes": [1]}
        ]
    finally:
        ch.shutdown()


def test_deleted_partitions_done_fenced_and_invalid_jobs_dropped() -> None:
    leaders = {("a", 0): 1, ("f", 0): 2}
    codes = {(2, "f", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    sent: list = []
    ch = _channel(leaders, codes, sent)
    ch.start()
    gone: list = []
    fenced: list = []
    invalid: list = []
    valid = threading.Event()
    try:
        ch.send(MarkerJob("g", 1, 0, True, frozenset({("a", 0), ("deleted", 0)}), 0),
                gone.append, lambda: True)  # fmt: skip
        ch.send(MarkerJob("f", 2, 0, True, frozenset({("f", 0)}), 0), fenced.append,
                lambda: True)  # fmt: skip
        ch.send(MarkerJob("i", 3, 0, True, frozenset({("a", 0)}), 0), invalid.append,
                valid.is_set)  # fmt: skip
        _wait(gone, 1)
        _wait(fenced, 1)
        _wait(invalid, 1)
        assert (gone, fenced, invalid) == ([True], [False], [False])
        assert not any(m["producer_id"] == 3 for _, b in sent for m in b["markers"])
    finally:
        ch.shutdown()


def test_unreachable_leader_is_retried_and_shutdown_gives_the_job_back() -> None:
    attempts: list = []

    def refuse(endpoint):
        attempts.append(endpoint)
        raise ConnectionRefusedError("no broker there")

    ch = NetworkMarkerChannel(1, lambda t, p: 2, lambda b: ("127.0.0.1", 9002), MarkerSettings(),
                              connect=refuse)  # fmt: skip
    ch.start()
    done: list = []
    ch.send(MarkerJob("u", 1, 0, True, frozenset({("a", 0)}), 0), done.append, lambda: True)
    wait_until(lambda: len(attempts) >= 3, 10, "retries")
    assert done == []
    ch.shutdown()
    assert done == [False]
    ch.send(MarkerJob("v", 2, 0, True, frozenset({("a", 0)}), 0), done.append, lambda: True)
    assert done == [False, False]  # a send after shutdown is given back at once


class FakeLocal:
    """LocalMarkers answering from `codes` ((topic, partition) -> code, default NONE), at once
    or, with `held`, when the test releases them."""

    def __init__(self, codes: dict, held: bool = False) -> None:
        self.codes = codes
        self.held = held
        self.calls: list = []
        self.waiting: list = []

    def append(self, specs, answer) -> None:
        self.calls.append((threading.current_thread().name, list(specs)))
        got = [{tp: int(self.codes.get(tp, 0)) for tp in s.partitions} for s in specs]
        if self.held:
            self.waiting.append((answer, got))
        else:
            answer(got)


def test_partitions_led_here_take_no_request() -> None:
    """A job whose partitions all have this broker (1) as leader is appended by send() itself,
    with no request and no hop to the channel's thread; a mixed job's local part is appended
    by the thread without a request to itself."""
    leaders = {("a", 0): 1, ("a", 1): 1, ("b", 0): 2}
    sent: list = []
    local = FakeLocal({}, held=True)
    ch = NetworkMarkerChannel(1, lambda t, p: leaders.get((t, p)), lambda b: ("127.0.0.1", 9000 + b),
                              MarkerSettings(), connect=lambda ep: FakeLeader(ep[1] - 9000, sent, {}),
                              local=local)  # fmt: skip
    ch.start()
    done: list = []
    try:
        ch.send(MarkerJob("l", 5, 1, True, frozenset({("a", 0), ("a", 1)}), 2), done.append,
                lambda: True)  # fmt: skip
        assert len(local.calls) == 1 and local.calls[0][0] == threading.current_thread().name
        (spec,) = local.calls[0][1]
        assert (spec.producer_id, spec.producer_epoch, spec.commit, spec.coordinator_epoch) == (
            5, 1, True, 2)
        assert list(spec.partitions) == [("a", 0), ("a", 1)]
        assert done == []  # not durable yet
        answer, got = local.waiting.pop()
        answer(got)
        assert done == [True]
        # a mixed job: broker 2's part by request, ours by the thread, without a request
        local.held = False
        ch.send(MarkerJob("m", 6, 0, False, frozenset({("a", 0), ("b", 0)}), 0), done.append,
                lambda: True)  # fmt: skip
        _wait(done, 2)
        assert done == [True, True]
        assert {n for n, _ in sent} == {2}
        assert local.calls[-1][0] == "txn-markers" and list(local.calls[-1][1][0].partitions) == [
            ("a", 0)]
    finally:
        ch.shutdown()


def test_a_local_job_whose_leader_moved_goes_to_the_thread() -> None:
    """What a job appended here could not place (NOT_LEADER_OR_FOLLOWER: the leader moved
    meanwhile) is retried by the channel's thread against the leader the metadata names."""
    leaders = {("a", 0): 1}
    sent: list = []
    local = FakeLocal({("a", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER})
    ch = NetworkMarkerChannel(1, lambda t, p: leaders.get((t, p)), lambda b: ("127.0.0.1", 9000 + b),
                              MarkerSettings(), connect=lambda ep: FakeLeader(ep[1] - 9000, sent, {}),
                              local=local)  # fmt: skip
    leaders[("a", 0)] = 1
    ch.start()
    done: list = []
    try:
        ch.send(MarkerJob("r", 7, 0, True, frozenset({("a", 0)}), 0), done.append, lambda: True)
        assert local.calls and done == []
        leaders[("a", 0)] = 3
        _wait(done, 1)
        assert done == [True] and [n for n, _ in sent] == [3]
    finally:
        ch.shutdown()


def test_a_new_job_is_not_held_behind_another_jobs_retry_back_off(monkeypatch) -> None:
    """A job sent while a round is in flight for another job that then fails goes out at once
    after that round, not after the retry back-off: with the back-off set to an hour, it is
    still sent."""
    import broker.txn.markers as markers

    monkeypatch.setattr(markers, "MARKER_RETRY_BACKOFF_MS", 3_600_000)
    leaders = {("a", 0): 2, ("b", 0): 3}
    codes = {(2, "a", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
    sent: list = []
    in_round = threading.Event()
    release = threading.Event()

    class SlowLeader(FakeLeader):
        def request(self, api_key: int, body: dict) -> dict:
            if self.node == 2:
                in_round.set()
                release.wait(10)
            return super().request(api_key, body)

    ch = NetworkMarkerChannel(1, lambda t, p: leaders.get((t, p)), lambda b: ("127.0.0.1", 9000 + b),
                              MarkerSettings(), connect=lambda ep: SlowLeader(ep[1] - 9000, sent, codes))  # fmt: skip
    ch.start()
    first: list = []
    second: list = []
    try:
        ch.send(MarkerJob("x", 1, 0, True, frozenset({("a", 0)}), 0), first.append, lambda: True)
        assert in_round.wait(10)
        ch.send(MarkerJob("y", 2, 0, True, frozenset({("b", 0)}), 0), second.append, lambda: True)
        release.set()  # x's round ends refused (retry due in an hour); y must not wait for it
        _wait(second, 1)
        assert second == [True] and first == []
    finally:
        ch.shutdown()
