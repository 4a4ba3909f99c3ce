"""BrokerLifecycle against a fake ControllerChannel: the states, a new incarnation per start,
heartbeats carrying the broker's own published offset, the controlled shutdown (that both real
channels satisfy the ControllerChannel interface: tests/unit/quorum/test_channel_conformance.py)."""

from __future__ import annotations

import concurrent.futures
import threading
from types import SimpleNamespace

import pytest

from broker.lifecycle import (
    REGISTERED,
    RUNNING,
    STOPPED,
    BrokerLifecycle,
    BrokerLifecycleError,
)
from client.errors import ErrorCode, NotControllerError
from controller.channel import ControllerChannel
from controller.quorum.remote import RemoteController


def _done(value: dict) -> concurrent.futures.Future:
    f: concurrent.futures.Future = concurrent.futures.Future()
    f.set_result(value)
    return f


class FakeChannel:
    """Unfences once the broker reports offset >= `caught_up_at`; confirms a controlled
    shutdown on the second want_shutdown heartbeat."""

    def __init__(
        self, caught_up_at: int = 5, register_error: int = 0, refusals: int = 10**9
    ) -> None:
        self.caught_up_at = caught_up_at
        self.failed_reports: list[list] = []
        self.cannot_create_reports: list[str | None] = []
        self.register_error = register_error
        self.refusals = refusals  # the first `refusals` registrations get register_error
        self.registrations: list[tuple] = []
        self.heartbeats: list[tuple[int, bool]] = []

    def register_broker(self, broker_id, host, port, rack=None, incarnation_id="", endpoints=()):
        self.registrations.append((broker_id, host, port, rack, incarnation_id))
        refused = len(self.registrations) <= self.refusals
        return _done({"error_code": self.register_error if refused else 0, "broker_epoch": 42})

    def broker_heartbeat(
        self,
        broker_id,
        broker_epoch,
        offset,
        want_fence=False,
        want_shutdown=False,
        failed_replicas=(),
        cannot_create_replicas=None,
        timeout_ms=None,
    ):
        assert broker_epoch == 42
        self.failed_reports.append(list(failed_replicas))
        self.cannot_create_reports.append(cannot_create_replicas)
        self.heartbeats.append((offset, want_shutdown))
        shutdowns = sum(1 for _, w in self.heartbeats if w)
        return _done(
            {
                "error_code": 0,
                "is_caught_up": offset >= self.caught_up_at,
                "is_fenced": offset < self.caught_up_at,
                "should_shut_down": shutdowns >= 2,
            }
        )

    def alter_partition(self, broker_id, broker_epoch, topics):
        raise NotImplementedError

    def create_topics(self, requests, validate_only=False):
        raise NotImplementedError

    def delete_topics(self, names):
        raise NotImplementedError

    def create_partitions(self, topics, validate_only=False):
        raise NotImplementedError

    def elect_leaders(self, election_type, partitions=None):
        raise NotImplementedError

    def allocate_producer_ids(self, broker_id, broker_epoch):
        raise NotImplementedError

    def incremental_alter_configs(self, resources, validate_only=False):
        raise NotImplementedError

    def alter_configs(self, resources, validate_only=False):
        raise NotImplementedError

    def alter_user_scram_credentials(self, deletions, upsertions):
        raise AssertionError("not used by the lifecycle")

    def create_acls(self, creations):
        raise AssertionError("not used by the lifecycle")

    def delete_acls(self, filters):
        raise AssertionError("not used by the lifecycle")

    def alter_client_quotas(self, entries, validate_only=False):
        raise AssertionError("not used by the lifecycle")

    def alter_partition_reassignments(self, topics):
        raise AssertionError("not used by the lifecycle")

    def list_partition_reassignments(self, partitions=None):
        raise AssertionError("not used by the lifecycle")

    def describe_quorum(self, endpoint=None):
        raise NotImplementedError


class FakePublisher:
    """Publishes offsets 0, 1, 2, ... one per wait (the broker catching up)."""

    def __init__(self) -> None:
        self.image = SimpleNamespace(offset=0)
        self._lock = threading.Lock()

    def wait_for(self, predicate, timeout):
        with self._lock:
            self.image = SimpleNamespace(offset=self.image.offset + 1)
        return predicate(self.image)


def test_register_catch_up_unfence_run_and_controlled_shutdown() -> None:
    ch, pub = FakeChannel(caught_up_at=5), FakePublisher()
    lc = BrokerLifecycle(4, ch, pub)
    assert isinstance(ch, ControllerChannel)
    assert lc.start("127.0.0.1", 9192, "rack-a", timeout=5) == 42
    assert lc.state == RUNNING
    assert ch.registrations == [(4, "127.0.0.1", 9192, "rack-a", lc.incarnation_id)]
    # heartbeats carried the broker's own published offset while it caught up
    assert [o for o, _ in ch.heartbeats] == [0, 1, 2, 3, 4, 5]
    hb = lc.heartbeat()
    assert hb is not None and hb["is_fenced"] is False
    assert lc.controlled_shutdown(timeout=5) is True
    assert lc.state == STOPPED and [w for _, w in ch.heartbeats[-2:]] == [True, True]
    assert lc.heartbeat() is None  # no heartbeats once stopped


def test_every_start_is_a_new_incarnation() -> None:
    a = BrokerLifecycle(4, FakeChannel(), FakePublisher())
    b = BrokerLifecycle(4, FakeChannel(), FakePublisher())
    assert a.incarnation_id != b.incarnation_id


def test_refused_registration_and_never_unfenced_are_errors() -> None:
    with pytest.raises(BrokerLifecycleError, match="registration failed"):
        BrokerLifecycle(4, FakeChannel(register_error=101), FakePublisher()).start(
            "h", 1, None, timeout=0.3
        )
    lc = BrokerLifecycle(4, FakeChannel(caught_up_at=10**9), FakePublisher())
    with pytest.raises(BrokerLifecycleError, match="not unfenced"):
        lc.start("h", 1, None, timeout=0.05)
    assert lc.state == REGISTERED
    assert lc.controlled_shutdown() is False and lc.state == STOPPED  # nothing to hand over


def test_a_restart_within_the_old_session_retries_the_registration() -> None:
    """Found by fault scenario S1: a broker SIGKILLed and restarted at once got
    DUPLICATE_BROKER_REGISTRATION (its previous incarnation's session was still open) and
    exited. It now retries until the controller fences the old incarnation, as Kafka's."""
    ch = FakeChannel(register_error=int(ErrorCode.DUPLICATE_BROKER_REGISTRATION), refusals=3)
    lc = BrokerLifecycle(4, ch, FakePublisher())
    assert lc.start("h", 1, None, timeout=10) == 42
    assert len(ch.registrations) == 4 and lc.state == RUNNING


def test_heartbeats_report_the_replicas_that_failed() -> None:
    failed: list[tuple[str, int]] = []
    ch = FakeChannel(caught_up_at=0)
    lc = BrokerLifecycle(4, ch, FakePublisher(), lambda: list(failed))
    lc.start("127.0.0.1", 9192, None, timeout=5)
    failed.append(("t", 3))
    lc.heartbeat()
    failed.clear()
    lc.heartbeat()
    assert ch.failed_reports[-2:] == [[("t", 3)], []]


def test_heartbeats_report_whether_new_replicas_can_be_created() -> None:
    reason: list[str | None] = [None]
    ch = FakeChannel(caught_up_at=0)
    lc = BrokerLifecycle(4, ch, FakePublisher(), list, lambda: reason[0])
    lc.start("127.0.0.1", 9192, None, timeout=5)
    reason[0] = "out of file descriptors"
    lc.heartbeat()
    reason[0] = None
    lc.heartbeat()
    assert ch.cannot_create_reports[-2:] == ["out of file descriptors", None]
    # without a source the broker reports that it can
    ch2 = FakeChannel(caught_up_at=0)
    BrokerLifecycle(4, ch2, FakePublisher()).start("127.0.0.1", 9192, None, timeout=5)
    assert ch2.cannot_create_reports == [None]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_controlled_shutdown_with_every_controller_gone_gives_up_in_time_and_says_why(
    caplog,
) -> None:
    """Issue 22 item 3: brokers whose controllers were gone took 30 s to stop and logged
    `controlled shutdown failed: ` with an empty reason. With no controller listening the
    controlled shutdown now ends by its deadline with one line naming the controllers tried
    and the error, and closing the link ends a heartbeat still in flight."""
    voters = {n: ("127.0.0.1", _free_port()) for n in (1, 2, 3)}  # nothing listens there
    remote = RemoteController(voters, request_timeout_ms=30_000)
    lc = BrokerLifecycle(4, remote, FakePublisher())
    lc.broker_epoch, lc.state = 42, RUNNING  # (as after a start against the live quorum)
    with caplog.at_level("WARNING", logger="broker.lifecycle"):
        assert lc.controlled_shutdown(timeout=0.5) is False  # (not after the 30 s)
    assert lc.state == STOPPED
    [line] = [r.getMessage() for r in caplog.records if "controlled shutdown" in r.getMessage()]
    assert "gave up after" in line and "last error: controller" in line, line
    for n, (host, port) in voters.items():
        assert f"{n}@{host}:{port}" in line, line
    assert not any(r.exc_info for r in caplog.records)  # one line, no traceback
    # a heartbeat in flight (its own timeout 30 s) ends once the link closes
    fut = remote.broker_heartbeat(4, 42, 0)
    remote.close()
    with pytest.raises((NotControllerError, concurrent.futures.CancelledError)):
        fut.result(10)  # (cancelled when it had not started yet)


def test_a_bare_timeout_still_gives_a_reason(caplog) -> None:
    class SilentChannel(FakeChannel):
        def broker_heartbeat(self, *a, **k):  # never answers
            return concurrent.futures.Future()

    lc = BrokerLifecycle(4, SilentChannel(), FakePublisher())
    lc.broker_epoch, lc.state = 42, RUNNING
    with caplog.at_level("WARNING", logger="broker.lifecycle"):
        assert lc.controlled_shutdown(timeout=0.05) is False
    [line] = [r.getMessage() for r in caplog.records]
    assert line.rstrip().endswith("broker.session.timeout.ms)") and ": no answer from" in line
