"""Fault scenarios of the cluster harness (CHECKER.md), on 3 `gregor controller` + 3 `gregor
broker` processes: the workload (fault_workload.py) runs through a seeded fault schedule, the
faults are healed, the cluster must recover, and the checker (fault_checker.py) judges the
history, the final read and the brokers' leader events. The seed is printed
(GREGOR_TEST_SEED replays the schedule); the history and a JSON report stay in the test's
tmp dir.

- S1: SIGKILL the leader of partition 0 four times, restarting it after 2-3 s each time.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time

import pytest
from fault_checker import check
from fault_history import History
from fault_workload import Workload, final_read, leader_events
from helpers import wait_until

from client import Admin, Producer
from client.errors import GregorError

TOPIC_PARTITIONS = 3


def _partitions(b, topic: str):
    try:
        with Admin(bootstrap_servers=b.bootstrap_all(), request_timeout_ms=2000) as admin:
            return admin.describe_topic(topic).partitions
    except GregorError:
        return None


def _healthy(b, topic: str, isr: int) -> bool:
    ps = _partitions(b, topic)
    return bool(ps) and all(p.leader >= 0 and len(p.isr) >= isr for p in ps)


def _recovered(b, topic: str) -> bool:
    """C7: every partition has a leader and an ISR >= min ISR, and takes an acks=all write."""
    if not _healthy(b, topic, 2):
        return False
    with Producer(
        bootstrap_servers=b.bootstrap_all(), acks="all", delivery_timeout_ms=5000
    ) as prod:
        try:
            for p in range(TOPIC_PARTITIONS):
                # unique and increasing, so the checker takes probes for one more producer
                prod.send(topic, b"probe-%d" % time.monotonic_ns(), partition=p).result(10)
        except GregorError:
            return False
    return True


@pytest.mark.slow
def test_s1_leader_of_p0_killed_four_times(broker_cluster, tmp_path) -> None:
    seed = int(os.environ.get("GREGOR_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    _q, b = broker_cluster(replica_lag_time_max_ms=2000, replica_fetch_backoff_ms=200)
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        admin.create_topic("s1", TOPIC_PARTITIONS, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: _healthy(b, "s1", 3), 30, "s1 with ISR 3")
    history = History(tmp_path / "s1-history.jsonl")
    w = Workload(b.bootstrap_all(), "s1", TOPIC_PARTITIONS, history)
    w.start()
    stopped: list[int] = []
    try:
        wait_until(lambda: w.acked() > 300, 30, "steady writes")
        for _ in range(4):
            leader = wait_until(
                lambda: (lambda ps: ps[0].leader if ps and ps[0].leader >= 0 else None)(
                    _partitions(b, "s1")
                ),
                30,
                "a leader of s1-0",
            )
            b.stop(leader, signal.SIGKILL)
            stopped.append(leader)
            time.sleep(rng.uniform(2.0, 3.0))  # the fault's duration, from the seeded schedule
            b.start(leader)
            stopped.remove(leader)
            wait_until(lambda: _healthy(b, "s1", 3), 60, "ISR 3 again")
    finally:
        for n in stopped:  # heal
            b.start(n)
    healed = time.monotonic()
    wait_until(lambda: _recovered(b, "s1"), 10, "recovery within 10 s of heal (C7)")
    recovery_s = time.monotonic() - healed
    w.stop()
    history.close()
    final = final_read(b.bootstrap_all(), "s1", TOPIC_PARTITIONS)
    events = leader_events({n: list(b.tmp.glob(f"broker-{n}.*.stderr")) for n in b.ports}, "s1")
    report = check(history.entries, final, events)
    report.update(
        scenario="S1", seed=seed, recovery_s=round(recovery_s, 3), leader_events=len(events)
    )
    (tmp_path / "s1-report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "anomalies"}))
    assert report["valid"], f"seed {seed}: {report['anomalies']}"
    assert report["writes"]["ok"] > 300 and report["reads"] > 0
    assert len(events) >= 5  # the first leaders and one per kill at least: C6 had input
