"""Automatic balancing (auto.balance.mode) across real processes: 3 `gregor controller` and 3
`gregor broker` processes, a topic of 3 partitions (RF 3) on brokers 4, 5, 6, under acks=all
load from an idempotent producer writing to every partition.

- node-add (the default): a 4th broker started against the running cluster receives its share
  (2 of the 9 replicas) with no command;
- continuous (unavailable timeout 3 s): a broker stopped for good has its replicas re-created
  on the others, the replication factor restored.

Each checks the history of every partition: every acknowledged record is at its acknowledged
offset (nothing lost), no value twice (idempotence), values in the order sent.
"""

from __future__ import annotations

import signal
import threading
from collections import Counter

import pytest
from broker_cluster import Brokers
from helpers import read_to_end, wait_until

from client import Admin, Producer

pytestmark = pytest.mark.slow

OVERRIDES = {"replica.lag.time.max.ms": 10_000, "replica.fetch.backoff.ms": 200}
TOPIC = "ab"
PARTITIONS = 3


class Load:
    """An idempotent acks=all producer sending "0", "1", ... round-robin over the partitions on
    its own thread; `acked` holds (partition, value, offset) of every acknowledged record."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            bootstrap_servers=bootstrap, acks="all", linger_ms=2, delivery_timeout_ms=120_000
        )
        self.acked: list[tuple[int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="auto-balance-load", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            pending = []
            for _ in range(30):
                p = i % PARTITIONS
                pending.append((p, i, self.producer.send(TOPIC, str(i).encode(), partition=p)))
                i += 1
            for p, value, fut in pending:
                try:
                    md = fut.result(150)
                except Exception:  # not acknowledged: may or may not be in the log
                    continue
                self.acked.append((p, value, md.offset))

    def wait_acked(self, more: int, timeout: float = 60.0) -> None:
        target = len(self.acked) + more
        wait_until(lambda: len(self.acked) >= target, timeout, f"{more} more acknowledged writes")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(200)
        assert not self._thread.is_alive(), "the producer thread did not stop"
        self.producer.close()


def check_history(bootstrap: str, load: Load) -> None:
    assert len(load.acked) > 300, f"too little load to mean anything: {len(load.acked)}"
    for p in range(PARTITIONS):
        records = read_to_end(bootstrap, TOPIC, p)
        values = [int(r.value) for r in records]
        by_offset = {r.offset: int(r.value) for r in records}
        lost = [(v, o) for q, v, o in load.acked if q == p and by_offset.get(o) != v]
        assert not lost, f"{TOPIC}-{p}: acknowledged records lost or moved: {lost[:10]}"
        assert len(set(values)) == len(values), f"{TOPIC}-{p}: a value written twice"
        assert values == sorted(values), f"{TOPIC}-{p}: values out of the order sent"


def _placement(admin: Admin) -> dict[int, tuple[list[int], list[int]]]:
    return {
        p.partition: (list(p.replicas), list(p.isr)) for p in admin.describe_topic(TOPIC).partitions
    }


def _start(controller_quorum, tmp_path, **controller) -> tuple:
    q = controller_quorum(**{"broker.session.timeout.ms": 3000, **controller})
    q.start_all()
    q.wait_leader(10, "a controller leader")
    d = tmp_path / "brokers"
    d.mkdir()
    b = Brokers(d, q.voters, [4, 5, 6, 7], OVERRIDES)
    for n in (4, 5, 6):
        b.start(n)
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        wait_until(
            lambda: {x.node_id for x in admin.describe_cluster().brokers} == {4, 5, 6},
            30,
            "brokers 4, 5, 6 unfenced",
        )
        admin.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        wait_until(
            lambda: (pl := _placement(admin)) and all(len(i) == 3 for _, i in pl.values()),
            30,
            "every partition in sync",
        )
    return q, b


def _settled(admin: Admin, brokers: set[int]):
    """The placement once no move is in flight, every replica on `brokers` and in sync."""
    if admin.list_partition_reassignments():
        return None
    pl = _placement(admin)
    for rs, isr in pl.values():
        if not set(rs) <= brokers or sorted(isr) != sorted(rs) or len(rs) != 3:
            return None
    return pl


def test_a_fourth_broker_receives_its_share_with_no_command(controller_quorum, tmp_path) -> None:
    q, b = _start(controller_quorum, tmp_path)
    load = Load(b.bootstrap_all())
    try:
        load.wait_acked(300)
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            b.start(7)
            pl = wait_until(
                lambda: (
                    (pl := _settled(admin, {4, 5, 6, 7}))
                    and sum(7 in rs for rs, _ in pl.values()) == 2
                    and pl
                ),
                90,
                "broker 7 holding 2 replicas, in sync, no move in flight",
            )
            counts = Counter(r for rs, _ in pl.values() for r in rs)
            assert counts[7] == 2 and max(counts.values()) - min(counts.values()) <= 1, counts
        load.wait_acked(300)
    finally:
        load.stop()
    check_history(b.bootstrap_all(), load)


@pytest.mark.long  # (the planner and controller loop: tests/unit/quorum/test_auto_balance_*)
def test_continuous_recreates_a_stopped_brokers_replicas(controller_quorum, tmp_path) -> None:
    q, b = _start(
        controller_quorum,
        tmp_path,
        **{"auto.balance.mode": "continuous", "auto.balance.unavailable.timeout.ms": 3000},
    )
    load = Load(b.bootstrap_all())
    try:
        load.wait_acked(300)
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            b.start(7)
            wait_until(
                lambda: (
                    (pl := _settled(admin, {4, 5, 6, 7}))
                    and sum(7 in rs for rs, _ in pl.values()) == 2
                ),
                90,
                "broker 7 filled",
            )  # (the placement before broker 7 got anything is "settled" too)
            b.stop(5, signal.SIGKILL)  # gone for good
            pl = wait_until(
                lambda: _settled(admin, {4, 6, 7}), 120, "broker 5's replicas re-created"
            )
            assert all(5 not in rs for rs, _ in pl.values())
        load.wait_acked(300)
    finally:
        load.stop()
    check_history(b.bootstrap_all(), load)
