"""The fault scenarios of an elastic cluster (fault_scenarios.py registers them):

- S12: partition reassignments (KIP-455) under leader kills. A fourth broker (SPARE_BROKER)
  joins; each round (one, or as many as --duration allows) moves one partition's replicas
  onto it, taking the leader's place, and at once SIGKILLs that leader (a replica being removed, mid-copy), then, restarted, the next
  leader (a replica of the target). The move must complete, the removed broker drop its
  replica, and the checker find nothing lost, duplicated or reordered.
- S13: quorum membership changes under controller kills. A fourth controller is added
  (`gregor quorum add-controller`) while the active controller is SIGKILLed, then the active
  controller is removed (`gregor quorum remove-controller`) while another voter is down, and
  stopped; then the leader of the new quorum is killed too, and a topic is created while it is
  down. Metadata must keep committing (the brokers keep their original voters list), with one
  Raft leader per term. The sequence runs once, whatever the duration (its changes are not a
  pattern to repeat: the quorum ends with other voters).

Both run the harness's usual workload and checks (fault_scenarios.run_scenario).
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from controller_quorum import HOST
from helpers import gregor_command, wait_until

from client import Admin, TopicPartition
from client.errors import GregorError

if TYPE_CHECKING:
    from fault_cluster import Cluster
    from fault_scenarios import Run

SPARE_BROKER = 7  # S12's fourth broker, configured but started by the scenario
NEW_CONTROLLER = 4  # S13's fourth controller


def _admin_call(c: Cluster, what: str, fn):  # type: ignore[no-untyped-def]
    """fn(admin) until it answers (a broker or controller may be failing over meanwhile)."""
    out: list = []

    def attempt() -> bool:
        try:
            with Admin(**c.client(request_timeout_ms=3000)) as admin:
                out.append(fn(admin))
        except GregorError:
            return False
        return True

    wait_until(attempt, 30, what)
    return out[-1]


def _moves(c: Cluster) -> dict | None:
    try:
        with Admin(**c.client(request_timeout_ms=3000)) as admin:
            return admin.list_partition_reassignments()
    except GregorError:
        return None


def s12(run: Run) -> None:
    c = run.cluster
    c.brokers.start(SPARE_BROKER)
    wait_until(
        lambda: (
            SPARE_BROKER
            in _admin_call(
                c, "describe cluster", lambda a: {b.node_id for b in a.describe_cluster().brokers}
            )
        ),
        30,
        f"broker {SPARE_BROKER} unfenced",
    )
    moved = []
    for i in run.rounds(1):  # each round two failovers; chaos.py --duration repeats it
        ps = wait_until(c.partitions, 30, "the partitions")
        p = i % c.partition_count
        leader = c.wait_leader_of(p)
        replicas = list(ps[p].replicas)
        spare = next(n for n in c.broker_ids if n not in replicas)  # one of 4 brokers is free
        target = [spare if r == leader else r for r in replicas]
        tp = TopicPartition(c.topic, p)
        res = _admin_call(
            c, f"reassign {tp}", lambda a, t=target, x=tp: a.alter_partition_reassignments({x: t})
        )
        assert res == {tp: None}, res
        with run.nemesis.kill_broker(leader):  # a replica being removed, mid-move
            run.hold(2.0, 3.0)
        nxt = c.wait_leader_of(p)
        with run.nemesis.kill_broker(nxt):  # a replica of the target
            run.hold(2.0, 3.0)
        wait_until(lambda: _moves(c) == {}, 60, f"the move of {c.topic}-{p} complete")
        wait_until(
            lambda p=p, t=target: (
                (ps := c.partitions())
                and sorted(ps[p].replicas) == sorted(t)
                and len(ps[p].isr) == 3
            ),
            60,
            f"{c.topic}-{p} on {target}, in sync",
        )
        wait_until(lambda: c.healthy(3), 60, "ISR 3 again")
        moved.append(f"{c.topic}-{p}: {replicas} -> {target}")
    run.figures["reassigned"] = moved


def _quorum_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), "quorum", *args], capture_output=True, text=True, timeout=60
    )


def _until_cli_ok(what: str, *args: str) -> str:
    """A `gregor quorum` command until it succeeds (the quorum may be electing), its stdout."""
    out: list[subprocess.CompletedProcess] = []

    def attempt() -> bool:
        out.append(_quorum_cli(*args))
        return out[-1].returncode == 0

    try:
        wait_until(attempt, 60, what)
    except AssertionError as e:
        raise AssertionError(f"{e}: {out[-1].stdout}{out[-1].stderr}") from None
    return out[-1].stdout


def s13(run: Run) -> None:
    c, q = run.cluster, run.cluster.quorum
    q.configure_new(NEW_CONTROLLER)
    q.start(NEW_CONTROLLER)
    lid = c.controller_leader()
    survivor = next(n for n in q.ids if n != lid)
    with run.nemesis.kill_controller(lid):  # the add runs through a failover
        out = _until_cli_ok(
            "add controller 4 during a failover",
            "add-controller",
            "--bootstrap-controller",
            f"{HOST}:{q.ports[survivor]}",
            "--controller-id",
            str(NEW_CONTROLLER),
            "--endpoint",
            f"{HOST}:{q.ports[NEW_CONTROLLER]}",
        )
        run.hold(1.0, 2.0)
    assert "voters [1, 2, 3, 4]" in out, out
    q.ids.append(NEW_CONTROLLER)
    created = [c.create_topic(f"{c.topic}-with-four")]
    victim = c.controller_leader()
    down = next(n for n in q.ids if n not in (victim, NEW_CONTROLLER))
    ask = next(n for n in q.ids if n not in (victim, down))
    with run.nemesis.kill_controller(down):  # 3 of 4 voters up: the removal still commits
        out = _until_cli_ok(
            f"remove the leader {victim} with {down} down",
            "remove-controller",
            "--bootstrap-controller",
            f"{HOST}:{q.ports[ask]}",
            "--controller-id",
            str(victim),
        )
        run.hold(1.0, 2.0)
    q.terminate(victim)
    q.ids.remove(victim)
    rest = sorted({1, 2, 3, NEW_CONTROLLER} - {victim})
    assert f"voters {rest}" in out, out
    lid = c.controller_leader()
    with run.nemesis.kill_controller(lid):  # the new quorum fails over too
        q.wait_leader(30, "a leader of the new quorum")
        created.append(c.create_topic(f"{c.topic}-after-removal"))
        run.hold(1.0, 2.0)
    c.controller_leader()
    for name in created:
        wait_until(lambda n=name: c.topic_ready(n), 30, f"{name} created with a leader")
    d = q.describe(c.controller_leader()) or {}
    voters = sorted(v["replica_id"] for v in d.get("voters", []))
    if voters != rest:
        run.anomalies.append({"check": "quorum_membership", "voters": voters, "expected": rest})
    run.figures["controllers"] = {"added": NEW_CONTROLLER, "removed": victim, "voters": voters}
