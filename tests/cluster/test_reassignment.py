"""Partition reassignment (KIP-455) across real processes: 3 `gregor controller` and 3 `gregor
broker` processes, then a 4th broker started against the running cluster. Under acks=all load
from an idempotent producer:

- the 4th broker receives a partition: it catches up, joins the ISR, the leadership moves off
  the removed broker (the leader), and the removed broker deletes its log;
- a reassignment cancelled halfway (the new broker paused, so it cannot catch up) returns to
  the original replicas and the new broker deletes what it had copied;
- the active controller is SIGKILLed while a reassignment is in flight: the next one finds it
  in the metadata log and completes it.

Each checks the history: every acknowledged record is at its acknowledged offset (nothing
lost), no value twice (idempotence), values in the order sent.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from broker_cluster import Brokers
from cluster_history import Load, check_history
from helpers import gregor_command, known_partitions, read_to_end, wait_until

from client import Admin, Producer, TopicPartition

pytestmark = pytest.mark.slow

OVERRIDES = {"replica.lag.time.max.ms": 10_000, "replica.fetch.backoff.ms": 200}
TOPIC = "mv"
TP = TopicPartition(TOPIC, 0)


def _partition(b: Brokers):
    ps = known_partitions(b.bootstrap_all(), TOPIC)
    return ps[0] if ps else None


def _start(controller_quorum, brokers, tmp_path: Path, session_ms: int = 3000) -> tuple:
    """A 3-voter quorum, brokers 4, 5, 6 started and 7 configured (not started); topic mv
    with one partition on [4, 5, 6] (4 leads), min.insync.replicas 2, in sync. Automatic
    balancing is off: these tests move replicas themselves (its default, node-add, would
    fill broker 7 on its own: tests/cluster/test_auto_balance.py)."""
    q = controller_quorum(**{"broker.session.timeout.ms": session_ms, "auto.balance.mode": "off"})
    q.start_all()
    q.wait_leader(10, "a controller leader")
    d = tmp_path / "brokers"
    d.mkdir()
    b = brokers(d, q.voters, [4, 5, 6, 7], OVERRIDES)
    b.start_all((4, 5, 6))
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        wait_until(
            lambda: {x.node_id for x in admin.describe_cluster().brokers} == {4, 5, 6},
            30,
            "brokers 4, 5, 6 unfenced",
        )
        admin.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    # placement is the controller's: pin the replicas to [4, 5, 6] with a reorder
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        wait_until(lambda: (p := _partition(b)) and len(p.isr) == 3, 30, "mv-0 in sync")
        assert admin.alter_partition_reassignments({TP: [4, 5, 6]}) == {TP: None}
        admin.elect_leaders([TP])
        wait_until(
            lambda: (p := _partition(b)) and (p.replicas, p.leader) == ([4, 5, 6], 4),
            30,
            "mv-0 on [4, 5, 6] led by 4",
        )
    return q, b


def _start_broker_7(b: Brokers, admin: Admin) -> None:
    b.start(7)
    wait_until(
        lambda: 7 in {x.node_id for x in admin.describe_cluster().brokers}, 30, "broker 7 unfenced"
    )


def _log_dir(b: Brokers, n: int) -> Path:
    return b.data_dirs[n] / f"{TOPIC}-0"


def test_a_fourth_broker_takes_a_partition_under_load(controller_quorum, brokers, tmp_path) -> None:
    _q, b = _start(controller_quorum, brokers, tmp_path)
    load = Load(b.bootstrap_all(), TOPIC)
    try:
        load.wait_acked(200)
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            _start_broker_7(b, admin)
            # 4 leads and is removed: the leadership must move
            assert admin.alter_partition_reassignments({TP: [7, 5, 6]}) == {TP: None}
            wait_until(
                lambda: not admin.list_partition_reassignments(),
                60,
                "the reassignment to complete",
            )
            p = wait_until(
                lambda: (
                    (p := _partition(b)) and p.replicas == [7, 5, 6] and p.leader in (5, 6, 7) and p
                ),
                30,
                "mv-0 on [7, 5, 6]",
            )
            assert sorted(p.isr) == [5, 6, 7]
        wait_until(lambda: not _log_dir(b, 4).exists(), 30, "broker 4 deleting its mv-0 log")
        assert _log_dir(b, 7).exists()
        load.wait_acked(200)
    finally:
        load.stop()
    check_history(b.bootstrap_all(), load)
    # the new replica holds everything: it alone can answer the whole log
    for n in (5, 6):
        b.stop(n, signal.SIGKILL)
    with Admin(bootstrap_servers=b.bootstrap(7)) as admin:
        wait_until(
            lambda: admin.describe_topic(TOPIC).partitions[0].leader == 7, 60, "7 leading mv-0"
        )
    acked_end = max(o for _, _, o in load.acked)
    records = read_to_end(b.bootstrap(7), TOPIC, 0)
    assert records[-1].offset >= acked_end


def test_a_reassignment_cancelled_halfway(controller_quorum, brokers, tmp_path) -> None:
    # a long session: broker 7 is paused before the move starts and must not be fenced by
    # then (a fenced broker cannot be a target)
    _q, b = _start(controller_quorum, brokers, tmp_path, session_ms=60_000)
    load = Load(b.bootstrap_all(), TOPIC)
    try:
        load.wait_acked(200)
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            _start_broker_7(b, admin)
            b.pause(7)  # it cannot catch up: the move stays in flight
            assert admin.alter_partition_reassignments({TP: [7, 5, 6]}) == {TP: None}
            moving = admin.list_partition_reassignments()
            assert moving[TP].replicas == [7, 5, 6, 4]
            assert (moving[TP].adding_replicas, moving[TP].removing_replicas) == ([7], [4])
            load.wait_acked(200)  # acks=all writes go on meanwhile (7 is not in the ISR)
            assert admin.list_partition_reassignments() == moving
            assert admin.alter_partition_reassignments({TP: None}) == {TP: None}
            assert admin.list_partition_reassignments() == {}
            p = wait_until(
                lambda: (p := _partition(b)) and sorted(p.replicas) == [4, 5, 6] and p,
                30,
                "reverted",
            )
            # Kafka's revert: the union less the added replicas, in the union's order
            assert p.replicas == [5, 6, 4]
            assert p.leader == 4 and 7 not in p.isr
            errors = admin.alter_partition_reassignments({TP: None})
            assert type(errors[TP]).__name__ == "NoReassignmentInProgressError"
            b.resume(7)
            wait_until(lambda: not _log_dir(b, 7).exists(), 30, "broker 7 deleting its copy")
        load.wait_acked(200)
    finally:
        load.stop()
    check_history(b.bootstrap_all(), load)


def test_the_active_controller_killed_during_a_reassignment(
    controller_quorum, brokers, tmp_path
) -> None:
    q, b = _start(controller_quorum, brokers, tmp_path, session_ms=60_000)  # (as the cancel's test)
    load = Load(b.bootstrap_all(), TOPIC)
    try:
        load.wait_acked(200)
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            _start_broker_7(b, admin)
            b.pause(7)
            assert admin.alter_partition_reassignments({TP: [7, 5, 6]}) == {TP: None}
            old = q.wait_leader(10, "the active controller")
            q.kill(old)
            wait_until(
                lambda: (lt := q.leader()) is not None and lt[0] != old, 30, "a new controller"
            )
            # the state is in the metadata log: the new active controller lists it
            moving = wait_until(
                lambda: _list_or_none(admin), 30, "the reassignment listed by the new controller"
            )
            assert moving[TP].adding_replicas == [7]
            b.resume(7)
            wait_until(lambda: not admin.list_partition_reassignments(), 60, "the move to complete")
            wait_until(
                lambda: (
                    (p := _partition(b)) and p.replicas == [7, 5, 6] and sorted(p.isr) == [5, 6, 7]
                ),
                30,
                "mv-0 on [7, 5, 6]",
            )
            q.start(old)  # the killed voter rejoins as a follower
        wait_until(lambda: not _log_dir(b, 4).exists(), 30, "broker 4 deleting its mv-0 log")
        load.wait_acked(200)
    finally:
        load.stop()
    check_history(b.bootstrap_all(), load)


def _list_or_none(admin: Admin):
    try:
        return admin.list_partition_reassignments() or None
    except Exception:  # NOT_CONTROLLER while the quorum elects: ask again
        return None


def _gregor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*gregor_command(), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.long  # (plans: tests/unit/cli/test_reassign_plan.py; APIs: test_reassignments.py)
def test_the_cli_generates_executes_verifies_and_cancels(
    controller_quorum, brokers, tmp_path
) -> None:
    """`gregor partitions reassign` end to end, and `cluster status` listing the moves in
    flight while broker 7 is paused."""
    _q, b = _start(
        controller_quorum, brokers, tmp_path, session_ms=60_000
    )  # (7 paused, not fenced)
    bs = ["--bootstrap-server", b.bootstrap_all()]
    r = _gregor("topics", "create", "wide", "--replica-assignment", "4:5,5:6,6:4,4:5,5:6,6:4", *bs)
    assert r.returncode == 0, r.stderr
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        _start_broker_7(b, admin)
    plan = tmp_path / "plan.json"
    r = _gregor("partitions", "reassign", "--generate", "--brokers", "4,5,6,7",
                "--topics", "wide", "--plan", str(plan), *bs)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Current partition replica assignment" in r.stdout
    proposed = json.loads(plan.read_text())["partitions"]
    # 12 replicas over 4 brokers: 7 takes 3, one per partition moved
    assert len(proposed) == 3 and all(7 in e["replicas"] for e in proposed), proposed
    b.pause(7)
    r = _gregor("partitions", "reassign", "--execute", "--plan", str(plan), *bs)
    assert r.returncode == 0 and "Started the reassignment of 3 partitions" in r.stdout, r.stderr
    r = _gregor("cluster", "status", "--json", *bs)
    assert r.returncode == 0, r.stderr
    moves = json.loads(r.stdout)["reassignments"]
    assert sorted(m["partition"] for m in moves) == sorted(
        f"wide-{e['partition']}" for e in proposed
    )
    assert all(m["adding"] == [7] for m in moves)
    r = _gregor("cluster", "status", *bs)
    assert "reassignments in flight: 3" in r.stdout, r.stdout
    r = _gregor("partitions", "reassign", "--verify", "--plan", str(plan), *bs)
    assert r.returncode == 1 and r.stdout.count("in progress") == 3, r.stdout
    r = _gregor("partitions", "reassign", "--cancel", "--plan", str(plan), *bs)
    assert r.returncode == 0 and "Cancelled 3 moves" in r.stdout, r.stdout + r.stderr
    r = _gregor("partitions", "reassign", "--verify", "--plan", str(plan), *bs)
    assert r.returncode == 1 and r.stdout.count("not as planned") == 3, r.stdout
    b.resume(7)
    r = _gregor("partitions", "reassign", "--execute", "--plan", str(plan), *bs)
    assert r.returncode == 0, r.stderr
    r = _gregor("partitions", "reassign", "--verify", "--plan", str(plan), "--wait",
                "--timeout", "60", *bs)  # fmt: skip
    assert r.returncode == 0 and "3 of 3 partitions complete" in r.stdout, r.stdout + r.stderr
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        parts = admin.describe_topic("wide").partitions
    counts = {n: sum(n in p.replicas for p in parts) for n in (4, 5, 6, 7)}
    assert counts == {4: 3, 5: 3, 6: 3, 7: 3}
    # bad input: a clear message, exit 1
    r = _gregor("partitions", "reassign", "--execute", *bs)
    assert r.returncode == 1 and "--plan FILE is needed" in r.stderr
    plan.write_text('{"partitions": [{"topic": "wide", "partition": 0, "replicas": [9]}]}')
    r = _gregor("partitions", "reassign", "--execute", "--plan", str(plan), *bs)
    assert r.returncode == 1 and "InvalidReplicaAssignmentError" in r.stderr, r.stderr


@pytest.mark.long  # (the moves it makes: the three tests above)
def test_a_broker_decommissioned_under_load_then_stopped(
    controller_quorum, brokers, tmp_path
) -> None:
    """`gregor broker decommission 4` moves mv-0 (4 leads it) to the only broker left that
    does not hold it, ends once nothing is under-replicated; broker 4 is then stopped without
    a write lost. `recommission` cancels a decommission whose moves cannot complete."""
    # a long session: broker 7, paused while the decommission starts, must stay unfenced (a
    # fenced broker cannot be a target)
    _q, b = _start(controller_quorum, brokers, tmp_path, session_ms=60_000)
    bs = ["--bootstrap-server", b.bootstrap_all()]
    load = Load(b.bootstrap_all(), TOPIC)
    try:
        load.wait_acked(200)
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            _start_broker_7(b, admin)
            # first a decommission cancelled by recommission: 7 paused, the move stalls
            b.pause(7)
            # (not bootstrapping from the paused broker: a client would wait out its request
            # timeout on it before trying the next)
            live_bs = ["--bootstrap-server", f"{b.bootstrap(5)},{b.bootstrap(6)}"]
            proc = subprocess.Popen(
                [*gregor_command(), "broker", "decommission", "4", *live_bs],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                try:
                    wait_until(
                        lambda: proc.poll() is not None or admin.list_partition_reassignments(),
                        60,
                        "the move off broker 4",
                    )
                except AssertionError:
                    proc.kill()
                    out, err = proc.communicate(timeout=30)
                    raise AssertionError(f"no move started: {out}\n{err}") from None
                assert proc.poll() is None, proc.communicate(timeout=30)
                r = _gregor("broker", "recommission", "4", *live_bs)
                assert r.returncode == 0 and "Cancelled 1 moves" in r.stdout, r.stdout + r.stderr
                out, err = proc.communicate(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
            assert proc.returncode == 1 and "cancelled (recommission?)" in err, out + err
            # its progress (a line per 10 s when not on a terminal): 7, paused, copied nothing
            assert re.search(r"decommission 4: 1 of 1 partitions left, [\d.,]+ kB left", out), out
            assert sorted(_partition(b).replicas) == [4, 5, 6]
            b.resume(7)
            r = _gregor("broker", "decommission", "4", *bs)
            assert r.returncode == 0, r.stdout + r.stderr
            assert "Broker 4 holds no replica" in r.stdout and "it can be stopped" in r.stdout
            p = _partition(b)
            assert sorted(p.replicas) == [5, 6, 7] and sorted(p.isr) == [5, 6, 7]
        wait_until(lambda: not _log_dir(b, 4).exists(), 30, "broker 4 deleting its mv-0 log")
        assert b.stop(4, signal.SIGTERM) == 0
        load.wait_acked(200)
    finally:
        load.stop()
    check_history(b.bootstrap(5), load)


@pytest.mark.long  # (the bucket: tests/unit/replica/test_replication_throttle.py)
def test_a_throttled_move_copies_within_the_rate(controller_quorum, brokers, tmp_path) -> None:
    """`--execute --throttle 500000`: broker 7 copies mv-0 (3 MB of values) within 500 kB/s,
    so the move cannot complete before (3 MB - the bucket's 0.1 s burst) / rate (asserted with a
    second's margin, and one fetch's overshoot); `--verify` removes
    the throttle from the metadata once nothing is in flight."""
    q, b = _start(controller_quorum, brokers, tmp_path)
    bs = ["--bootstrap-server", b.bootstrap_all()]
    size, rate = 3_000_000, 500_000
    with Producer(bootstrap_servers=b.bootstrap_all(), acks="all", linger_ms=5) as p:
        futs = [p.send(TOPIC, b"x" * 1000, partition=0) for _ in range(size // 1000)]
        p.flush(60)
        assert all(f.result(60).offset >= 0 for f in futs)
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        _start_broker_7(b, admin)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"partitions": [{"topic": TOPIC, "partition": 0,
                                                "replicas": [7, 5, 6]}]}))  # fmt: skip
    key = "follower.replication.throttled.rate"
    started = time.monotonic()
    r = _gregor(
        "partitions", "reassign", "--execute", "--plan", str(plan), "--throttle", str(rate), *bs
    )
    assert r.returncode == 0 and "Throttle: 500,000 bytes/s" in r.stdout, r.stdout + r.stderr
    leader = q.wait_leader(10, "the active controller")
    assert dict(q.image(leader).config_for(4, "")) == {key: str(rate)}
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        wait_until(lambda: not admin.list_partition_reassignments(), 120, "the throttled move")
    elapsed = time.monotonic() - started
    print(f"throttled move: {size} bytes of values in {elapsed:.2f}s, rate {rate} B/s")
    assert elapsed >= 0.9 * (size - rate) / rate, f"{size} bytes copied in {elapsed:.1f}s"
    r = _gregor("partitions", "reassign", "--verify", "--plan", str(plan), *bs)
    assert r.returncode == 0 and "is removed" in r.stdout, r.stdout + r.stderr
    wait_until(
        lambda: key not in q.image(q.wait_leader(10, "leader")).config_for(4, ""),
        30,
        "the throttle removed",
    )
    assert len(read_to_end(b.bootstrap(7), TOPIC, 0)) == size // 1000


@pytest.mark.long  # (a leader moved off: test_a_fourth_broker_takes_a_partition...)
def test_the_removed_leader_killed_mid_move_and_restarted(
    controller_quorum, brokers, tmp_path
) -> None:
    """Broker 4 leads mv-0 and is being removed; it is SIGKILLed while the move waits for
    broker 7 (paused): 5 or 6 leads, acks=all writes go on, the move completes once 7 catches
    up; restarted, broker 4 finds mv-0 no longer its own and deletes the log."""
    _q, b = _start(controller_quorum, brokers, tmp_path)
    load = Load(b.bootstrap_all(), TOPIC)
    try:
        load.wait_acked(200)
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            _start_broker_7(b, admin)
            b.pause(7)
            assert admin.alter_partition_reassignments({TP: [7, 5, 6]}) == {TP: None}
            b.stop(4, signal.SIGKILL)
            wait_until(
                lambda: (p := _partition(b)) and p.leader in (5, 6), 30, "5 or 6 leading mv-0"
            )
            load.wait_acked(200)
            assert admin.list_partition_reassignments()[TP].removing_replicas == [4]
            b.resume(7)
            wait_until(lambda: not admin.list_partition_reassignments(), 60, "the move")
            p = _partition(b)
            assert p.replicas == [7, 5, 6] and sorted(p.isr) == [5, 6, 7]
        assert _log_dir(b, 4).exists()  # it was down when it stopped being a replica
        b.start(4)
        wait_until(lambda: not _log_dir(b, 4).exists(), 60, "restarted 4 deleting its stray")
        load.wait_acked(200)
    finally:
        load.stop()
    check_history(b.bootstrap_all(), load)
