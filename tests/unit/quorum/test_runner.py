"""ControllerThread: calls from other threads, results after commit, errors, back-pressure, ticks."""

from __future__ import annotations

import random
import threading

import pytest
from helpers import wait_until

from client.errors import BrokerResponseError, ErrorCode, NotControllerError
from controller.quorum import (
    ControllerSettings,
    ControllerThread,
    LocalMetadataLog,
    QuorumController,
)


@pytest.fixture
def runner(tmp_path):
    log = LocalMetadataLog(str(tmp_path))
    c = QuorumController(
        log, ControllerSettings(broker_session_timeout_ms=200), None, random.Random(1)
    )
    t = ControllerThread(c, tick_interval_ms=20)
    t.start()
    yield t
    t.stop()
    log.close()


def test_calls_from_many_threads(runner):
    r = runner.call(lambda c: c.cluster.register_broker(1, "h", 1, None, "i"))
    assert r["error_code"] == 0
    offset = runner.controller.log.committed_offset()
    hb = runner.submit(lambda c: c.cluster.broker_heartbeat(1, r["broker_epoch"], offset)).result(5)
    assert not hb["is_fenced"]
    results: list = []

    def worker(i: int) -> None:
        results.append(
            runner.submit(
                lambda c: c.replication.create_topics(
                    [{"name": f"t{i}", "num_partitions": 1, "replication_factor": 1}]
                )
            ).result(5)
        )

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(res[0]["name"] for res in results) == [f"t{i}" for i in range(8)]
    assert all(res[0]["error_code"] == 0 for res in results)
    assert runner.controller.log.committed_offset() == runner.controller.last_written_offset


def test_exception_reaches_caller(runner):
    fut = runner.submit(lambda c: c.no_such_method())
    with pytest.raises(AttributeError):
        fut.result(5)


def test_session_expiry_by_tick(runner):
    r = runner.call(lambda c: c.cluster.register_broker(1, "h", 1, None, "i"))
    offset = runner.controller.log.committed_offset()
    runner.call(lambda c: c.cluster.broker_heartbeat(1, r["broker_epoch"], offset))
    assert not runner.controller.image.brokers[1].fenced
    # no more heartbeats: the tick fences it after broker.session.timeout.ms (200 ms)
    wait_until(lambda: runner.controller.image.brokers[1].fenced, 5, "broker fenced by the tick")


def test_submit_takes_a_callable_not_a_name(runner):
    with pytest.raises(TypeError, match="takes a callable"):
        runner.submit("create_topics")  # type: ignore[arg-type]


def test_back_pressure_and_stop(tmp_path):
    log = LocalMetadataLog(str(tmp_path))
    c = QuorumController(log, None, None, random.Random(1))
    t = ControllerThread(c, max_pending=2)
    gate = threading.Event()
    t.start()
    blocked = [t.submit(lambda c: gate.wait(5)), t.submit(lambda c: 1)]
    with pytest.raises(BrokerResponseError) as ei:
        t.submit(lambda c: 2)
    assert ei.value.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    gate.set()
    assert [f.result(5) for f in blocked] == [True, 1]
    t.stop()
    with pytest.raises(NotControllerError):
        t.submit(lambda c: 3)
    log.close()


def test_waiting_calls_fail_on_stop(tmp_path):
    class SlowCommitLog(LocalMetadataLog):
        """Appends never commit (as a Raft log without a quorum)."""

        def committed_offset(self) -> int:
            return -1

    log = SlowCommitLog(str(tmp_path))
    c = QuorumController(log, None, None, random.Random(1))
    t = ControllerThread(c)
    t.start()
    fut = t.submit(lambda c: c.cluster.register_broker(1, "h", 1))
    wait_until(lambda: c.last_written_offset >= 0, 5, "registration written")
    assert not fut.done(), "result must wait for the commit"
    t.stop()
    with pytest.raises(NotControllerError):
        fut.result(1)
    log.close()
