"""Fencing and controlled shutdown of a broker in more partitions than the Raft log takes
uncommitted at once: a real three-voter Raft quorum (RaftMetadataLog, RaftStorage files)
in one process, messages handed between the voters on the controller's event loop, with the
uncommitted-entry cap lowered to 200 so a few hundred partitions exceed it."""

from __future__ import annotations

import asyncio
import logging
import random
import threading

import pytest
from helpers import wait_until

from controller.metadata import NO_LEADER
from controller.quorum import ControllerSettings, QuorumController
from controller.quorum.raft_log import RaftMetadataLog
from controller.quorum.runner import ControllerThread

CAP = 200  # uncommitted Raft entries (10,000 in production)
PARTITIONS = 2 * 150  # every partition has all three brokers (RF 3): > CAP changes per broker


class Quorum:
    """Voters 1-3; only voter 1 may campaign soon, and only it runs a controller."""

    def __init__(self, tmp_path, session_timeout_ms: int) -> None:
        settings = ControllerSettings(broker_session_timeout_ms=session_timeout_ms)
        self.logs: dict[int, RaftMetadataLog] = {}
        for n in (1, 2, 3):
            self.logs[n] = RaftMetadataLog(
                n,
                [1, 2, 3],
                str(tmp_path / f"voter-{n}"),
                send=self._send,
                tick_ms=10,
                election_timeout_ticks=5 if n == 1 else 10_000,
                rng=random.Random(n),
                max_uncommitted_entries=CAP,
            )
        self.controller = QuorumController(self.logs[1], settings, None, random.Random(1))
        self.runner = ControllerThread(self.controller, tick_interval_ms=20)
        self.logs[1].on_activate.append(self.controller.load)
        self.logs[1].on_deactivate.append(self.runner.fail_waiting)
        self.loop = self.runner.loop
        self.alive: set[int] = set()  # brokers the fixture keeps heartbeating

    def _send(self, to: int, message: dict) -> None:
        self.loop.call_soon(self.logs[to].receive, message)

    def on_loop(self, fn):
        async def run():
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def start(self) -> None:
        self.runner.start()
        for log in self.logs.values():
            self.on_loop(lambda log=log: log.start(self.loop))
        wait_until(lambda: self.on_loop(self.logs[1].is_leader), 10, "voter 1 active")

    def stop(self) -> None:
        self.runner.stop()
        for log in self.logs.values():
            log.close()

    def call(self, call):
        """`call(controller)` on the controller thread, its result once committed."""
        return self.runner.call(call, timeout=10)

    def committed_image_of(self, voter: int):
        """The image a fresh controller loads from `voter`'s committed log."""
        return self.on_loop(lambda: QuorumController(self.logs[voter]).image)


@pytest.fixture
def quorum(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="controller")
    q = Quorum(tmp_path, session_timeout_ms=1500)
    q.start()
    epochs = {}
    for b in (1, 2, 3):
        r = q.call(
            lambda c, b=b: c.cluster.register_broker(b, "127.0.0.1", 9000 + b, None, f"inc-{b}")
        )
        assert r["error_code"] == 0, r
        epochs[b] = r["broker_epoch"]
    for b in (1, 2, 3):
        wait_until(
            lambda b=b: (
                not q.call(lambda c: c.cluster.broker_heartbeat(b, epochs[b], 1 << 40))["is_fenced"]
            ),
            10,
            f"broker {b} unfenced",
        )
    for name in ("a", "b"):
        topic = {"name": name, "num_partitions": PARTITIONS // 2, "replication_factor": 3}
        [res] = q.call(
            lambda c, topic=topic: c.replication.create_topics(
                [{**topic, "assignments": [], "configs": []}]
            )
        )
        assert res["error_code"] == 0, res
    # The brokers a test does not act on keep their sessions, however slow the machine: a
    # check that outlasts the 1.5 s session must not see them fenced too.
    q.alive = {1, 2, 3}
    stop = threading.Event()

    def heartbeats() -> None:
        while not stop.wait(0.2):
            for b in sorted(q.alive):
                q.call(lambda c, b=b: c.cluster.broker_heartbeat(b, epochs[b], 1 << 40))

    keeper = threading.Thread(target=heartbeats, name="heartbeats", daemon=True)
    keeper.start()
    yield q, epochs
    stop.set()
    keeper.join(15)
    q.stop()


def _partitions(image):
    return [reg for t in image.topics.values() for reg in t.partitions.values()]


def _check_removed(q: Quorum, broker: int) -> None:
    """`broker` is fenced and in no ISR or leadership, committed, and every voter's committed
    log says the same as the controller's image."""
    image = q.controller.image
    assert image.brokers[broker].fenced
    parts = _partitions(image)
    assert len(parts) == PARTITIONS
    for reg in parts:
        assert broker not in reg.isr and reg.leader != broker, reg
        assert reg.leader != NO_LEADER and reg.leader in reg.isr, reg
    for voter in (1, 2, 3):
        wait_until(
            lambda voter=voter: q.committed_image_of(voter).offset == image.offset,
            10,
            f"voter {voter} committed through {image.offset}",
        )
        committed = q.committed_image_of(voter)
        assert committed.brokers == image.brokers
        assert committed.topics == image.topics


def _no_cap_errors(caplog) -> None:
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not bad, [r.getMessage() for r in bad]


def test_session_expiry_fences_a_broker_in_more_partitions_than_the_cap(quorum, caplog):
    q, epochs = quorum
    q.alive.discard(1)
    assert sum(1 in reg.isr for reg in _partitions(q.controller.image)) > CAP

    def others_alive_and_1_fenced() -> bool:
        for b in (2, 3):
            assert (
                q.call(lambda c, b=b: c.cluster.broker_heartbeat(b, epochs[b], 1 << 40))[
                    "error_code"
                ]
                == 0
            )
        return q.on_loop(lambda: q.controller.image.brokers[1].fenced)

    wait_until(others_alive_and_1_fenced, 15, "broker 1 fenced by session expiry")
    _check_removed(q, 1)
    _no_cap_errors(caplog)
    assert any("fencing broker 1" in r.getMessage() for r in caplog.records)


def test_controlled_shutdown_of_a_broker_in_more_partitions_than_the_cap(quorum, caplog):
    q, epochs = quorum
    q.alive.discard(2)
    assert sum(2 in reg.isr for reg in _partitions(q.controller.image)) > CAP
    asked = []

    def shut_down() -> bool:
        hb = q.call(lambda c: c.cluster.broker_heartbeat(2, epochs[2], 1 << 40, want_shutdown=True))
        assert hb["error_code"] == 0, hb
        asked.append(hb)
        return hb["should_shut_down"]

    wait_until(shut_down, 10, "controlled shutdown of broker 2 confirmed")
    _check_removed(q, 2)
    _no_cap_errors(caplog)
    assert any("controlled shutdown of broker 2" in r.getMessage() for r in caplog.records)
    # a broker shutting down stays fenced even when it heartbeats normally afterwards
    assert q.call(lambda c: c.cluster.broker_heartbeat(2, epochs[2], 1 << 40))["is_fenced"]


def test_reregistration_of_a_broker_in_more_partitions_than_the_cap(quorum, caplog):
    q, epochs = quorum
    q.alive.discard(3)
    assert sum(3 in reg.isr for reg in _partitions(q.controller.image)) > CAP
    # the same incarnation registering again (a restart that kept its id): it leaves every
    # ISR and leadership first, more changes than the log takes uncommitted at once
    r = q.call(lambda c: c.cluster.register_broker(3, "127.0.0.1", 9003, None, "inc-3"))
    assert r["error_code"] == 0 and r["broker_epoch"] > epochs[3], r

    def unfenced() -> bool:
        hb = q.call(lambda c: c.cluster.broker_heartbeat(3, r["broker_epoch"], 1 << 40))
        assert hb["error_code"] == 0, hb
        if hb["is_fenced"]:
            return False
        # unfenced only once all of its old incarnation's removals were written
        image = q.controller.image
        assert all(3 not in reg.isr for reg in _partitions(image)), "unfenced before removals"
        return True

    wait_until(unfenced, 10, "broker 3 unfenced after re-registering")
    image = q.controller.image
    for reg in _partitions(image):
        assert reg.leader in (1, 2) and reg.leader in reg.isr, reg
    wait_until(
        lambda: q.committed_image_of(2).topics == image.topics, 10, "voter 2 has the same image"
    )
    _no_cap_errors(caplog)
