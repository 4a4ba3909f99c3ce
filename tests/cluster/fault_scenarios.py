"""The scenarios of the fault harness (CHECKER.md S1-S10; S11: issue 22's stall after a
follower's controlled shutdown under CPU load; S12, S13: reassignment and quorum membership
changes under kills, fault_elastic.py) and the run that checks one.

    report = run_scenario("S4", workdir, seed=7, duration=0)   # 0: each fault the minimum times

A run starts the cluster (fault_cluster.py), the workload (fault_workload.py: producers and an
assign-mode reader; fault_group.py: a consumer group of 2 committing after each poll), waits for
steady writes and commits, applies the scenario's seeded fault schedule through the nemesis
(fault_nemesis.py; every fault reverted in `finally`), heals, requires recovery within 10 s (C7),
stops the workload, does the final read and hands the history, the final read and the nodes' events to the checker
(fault_checker.py). The report (checks, figures) is written to `workdir/<name>-report.json`; the
history, node logs and data dirs stay in `workdir`. `duration` > 0 repeats the scenario's fault
pattern until that many seconds of faults have passed (scripts/chaos.py runs them long).

Network scenarios run inside a network namespace of their own: called outside one, run_scenario
runs scripts/chaos.py in a fresh namespace and returns the report it wrote.
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fault_elastic
import fault_net
from fault_checker import check, check_transactions
from fault_cluster import MIN_ISR, PARTITIONS, TOPIC, Cluster, log_counts, raft_events
from fault_figures import timing
from fault_group import GroupMembers
from fault_history import History
from fault_nemesis import Nemesis, active_segment, missing_strace
from fault_producer import ProducerProcess
from fault_txn import TXN_TOPIC, TxnWorkload, missing_confluent, txn_final_read
from fault_workload import IsrMonitor, Workload, final_read, leader_events
from helpers import wait_until

from broker.txn.log_format import partition_for
from client import Admin

CHAOS = Path(__file__).resolve().parents[2] / "scripts" / "chaos.py"
RECOVERY_S = 10.0


@dataclass
class Run:
    cluster: Cluster
    nemesis: Nemesis
    rng: random.Random
    duration: float
    figures: dict[str, Any] = field(default_factory=dict)
    anomalies: list[dict[str, Any]] = field(default_factory=list)
    producers: list[ProducerProcess] = field(default_factory=list)  # in processes of their own
    storage: Any = None  # the LazyFS mount or the small disk, when the scenario has one
    txns: Any = None  # the transactional workload (fault_txn.py), when the scenario has one
    started: float = field(default_factory=time.monotonic)

    def rounds(self, minimum: int) -> Iterator[int]:
        """The scenario's fault pattern `minimum` times, then again until `duration` passed."""
        i = 0
        while i < minimum or time.monotonic() - self.started < self.duration:
            yield i
            i += 1

    def hold(self, low: float, high: float) -> None:
        self.nemesis.hold(self.rng.uniform(low, high))


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    faults: Callable[[Run], None]
    network: bool = False
    missing: Callable[[], str | None] = lambda: None  # why it cannot run here, or None
    broker_overrides: dict[str, Any] = field(default_factory=dict)
    # "lazyfs": every node's data on one LazyFS mount (power loss); "small-disk": the log dir
    # of broker SMALL_DISK_BROKER on a small loop-mounted ext4 (full disk)
    storage: str = "disk"
    partitions: int = PARTITIONS  # of the topic
    producers: int = 2  # workload producers (S11 has one, as in issue 22: another producer's
    # writes to the same partition moved its stuck high watermark along)
    spare_brokers: tuple[int, ...] = ()  # configured, started by the scenario (S12)
    controller_overrides: dict[str, Any] = field(default_factory=dict)
    txn: bool = False  # the transactional workload too (fault_txn.py, over KAFKA listeners)


# -- the scenarios -------------------------------------------------------------------------------


def _on_the_p0_leader(
    run: Run, times: int, fault: Callable[[int], AbstractContextManager[None]], hold: tuple
) -> None:
    """`fault` on the current leader of partition 0 for a seeded time in `hold` (low, high),
    `times` times, the ISR whole again after each."""
    c = run.cluster
    for _ in run.rounds(times):
        with fault(c.wait_leader_of(0)):
            run.hold(*hold)
        wait_until(lambda: c.healthy(3), 60, "ISR 3 again")


def s1(run: Run) -> None:
    _on_the_p0_leader(run, 4, run.nemesis.kill_broker, (2.0, 3.0))


def s2(run: Run) -> None:
    c, q = run.cluster, run.cluster.quorum
    created: list[str] = []
    elections: list[float] = []
    for i in run.rounds(3):
        lid = c.controller_leader()
        t0 = time.monotonic()
        with run.nemesis.kill_controller(lid):
            q.wait_leader(30, "a new controller leader")
            elections.append(round(time.monotonic() - t0, 3))
            created.append(c.create_topic(f"{TOPIC}-extra-{i}"))  # while the old one is down
            run.hold(1.0, 2.0)
        c.controller_leader()
    run.figures["controller_election_s"] = elections
    for name in created:
        wait_until(lambda n=name: c.topic_ready(n), 30, f"{name} created with a leader")


def s3(run: Run) -> None:
    _on_the_p0_leader(run, 2, run.nemesis.pause_broker, (6.0, 6.5))


def s4(run: Run) -> None:
    c = run.cluster
    for _ in run.rounds(1):
        leader = c.wait_leader_of(0)
        others = [e for e in c.endpoints() if e.name != f"broker-{leader}"]
        with run.nemesis.isolate(c.broker_endpoint(leader), others):
            run.hold(10.0, 11.0)
        wait_until(lambda: c.healthy(3), 60, "ISR 3 again")


def s5(run: Run) -> None:
    c, q = run.cluster, run.cluster.quorum
    terms: list[int] = []
    for _ in run.rounds(1):
        lid, term = q.wait_leader_term(30, "a controller leader")
        others = [e for e in c.endpoints() if e.name != f"controller-{lid}"]
        with run.nemesis.isolate(c.controller_endpoint(lid), others):
            q.wait_leader_term(30, "a leader of the majority")  # (the isolated one is asked too)
            run.hold(6.0, 8.0)
        after_heal = q.wait_leader_term(30, "one leader after heal")[1]
        terms += [term, after_heal]
        # a ring: the leader and one follower cannot talk; each still reaches a majority
        lid, ring_term = q.wait_leader_term(30, "a controller leader")
        follower = next(n for n in q.ids if n != lid)
        with run.nemesis.cut_links([(c.controller_endpoint(lid), c.controller_endpoint(follower))]):
            run.hold(6.0, 8.0)
        end_term = q.wait_leader_term(30, "one leader after the ring")[1]
        terms.append(end_term)
        if end_term - ring_term > 1:  # PreVote: the cut follower must not keep bumping the term
            run.anomalies.append({"check": "term_explosion", "ring_term": ring_term,
                                  "end_term": end_term})  # fmt: skip
        if after_heal - term > 2:
            run.anomalies.append({"check": "term_explosion", "before": term,
                                  "after_heal": after_heal})  # fmt: skip
    run.figures["raft_terms"] = terms


def s6(run: Run) -> None:
    c = run.cluster
    for _ in run.rounds(1):
        with run.nemesis.loss(c.broker_endpoint(c.wait_leader_of(0)), 0.3):
            run.hold(10.0, 11.0)
        with run.nemesis.cut_clients():
            run.hold(5.0, 6.0)
        wait_until(lambda: c.healthy(3), 60, "ISR 3 again")


def s7(run: Run) -> None:
    c = run.cluster
    for _ in run.rounds(1):
        leader = c.wait_leader_of(0)
        with run.nemesis.slow_fsync(leader, 300):
            run.hold(10.0, 11.0)
        wait_until(lambda: c.healthy(3), 60, "ISR 3 again")
        leader = c.wait_leader_of(0)
        follower = next(n for n in c.brokers.procs if n != leader)
        seg = active_segment(c.brokers.data_dirs[follower], TOPIC, 0)
        with run.nemesis.write_eio(follower, seg):
            wait_until(lambda f=follower: f not in _isr(c, 0), 30, "the failed follower out of ISR")
        with run.nemesis.kill_broker(follower):  # heal: restart it on its (healthy) disk
            pass
        wait_until(lambda: c.healthy(3), 60, "ISR 3 again")


def _isr(c: Cluster, partition: int) -> list[int]:
    ps = c.partitions()
    return list(ps[partition].isr) if ps else []


def s8(run: Run) -> None:
    c = run.cluster
    for _ in run.rounds(1):
        leader = c.wait_leader_of(0)
        follower = next(n for n in c.brokers.procs if n != leader)
        with run.nemesis.kill_broker(follower):
            run.nemesis.torn_tail(follower, run.rng.randint(1, 60))
        wait_until(lambda: c.healthy(3), 60, "ISR 3 after the torn tail")
        first = c.wait_leader_of(0)  # F14: kill the leader, then the next one as soon as it shows
        with run.nemesis.kill_broker(first):
            second = c.wait_leader_of(0, not_=first)
            with run.nemesis.kill_broker(second):
                run.hold(1.0, 2.0)
        wait_until(lambda: c.healthy(3), 60, "ISR 3 again")


def s9(run: Run) -> None:
    c = run.cluster
    for i in run.rounds(2):
        # the plain loss, then a torn one: each file keeps a random prefix of its unsynced pages
        torn = run.rng.randrange(1 << 30) if i % 2 else None
        with run.nemesis.power_loss(run.storage, torn_seed=torn):
            pass
        wait_until(lambda: c.healthy(3), 60, "ISR 3 after the power loss")
        # the workload catches up before the next loss: with ISRs back within ~0.2 s, a loss
        # right after the last one caught the producer's backlog from the first in flight
        # again, and it expired (delivery.timeout.ms) while the cluster was down twice
        run.hold(1.0, 1.5)
    # (the .lock files' pids are never fsynced, so bytes_lost is never 0; the segment bytes say
    # whether records in flight were dropped too)
    run.figures["power_loss_bytes_lost"] = [b for b, _s in run.nemesis.lost_bytes]
    run.figures["power_loss_segment_bytes_unsynced"] = [s for _b, s in run.nemesis.lost_bytes]


SMALL_DISK_BROKER = 4
SMALL_DISK_MIB = 64


def s10(run: Run) -> None:
    c = run.cluster
    n = SMALL_DISK_BROKER
    for _ in run.rounds(1):
        with run.nemesis.fill_disk(run.storage, n, leave_bytes=256 << 10):
            wait_until(
                lambda: (ps := c.partitions()) is not None and all(n not in p.isr for p in ps),
                60,
                f"broker {n} out of every ISR (ENOSPC)",
            )
        wait_until(lambda: c.healthy(3), 60, "ISR 3 after the disk was freed")
    offline = [p for p in c.brokers.tmp.glob(f"broker-{n}.*.stderr")
               if "No space left on device" in p.read_text(errors="replace")]  # fmt: skip
    if not offline:
        run.anomalies.append({"check": "full_disk_not_seen", "broker": n})
    x = ProducerProcess(c.bootstrap, TOPIC, c.partition_count, "x1",
                        c.workdir / "x1-history.jsonl", c.security)  # fmt: skip
    run.producers.append(x)
    x.start()
    for _ in run.rounds(3):
        before = x.acked()
        wait_until(lambda b=before: x.acked() > b + 200, 30, "the producer process writing")
        with run.nemesis.crash_producer(x):
            pass
    before = x.acked()
    wait_until(lambda: x.acked() > before + 200, 30, "the restarted producer writing")


CPU_LOAD_PROCESSES = 4  # busy loops beside the cluster in S11: a run queue of ~7 on 2 cores


def s11(run: Run) -> None:
    """Issue 22's stall: a broker holding only follower replicas stopped with SIGTERM on a
    loaded machine. Its controlled shutdown takes it out of the ISRs while it still fetches;
    the leader proposed it back, the controller refused, and the HW stayed where the departed
    follower held it (the other follower idle in its session), so the partition's writes
    timed out for as long as the broker stayed down. The stall check flags any partition
    without a write for 10 s while its ISR satisfies min ISR; the broker stays down longer
    than that, and replica.lag.time.max.ms is Kafka's 30 s, so a follower wrongly left in the
    ISR would stall it too."""
    c = run.cluster
    with run.nemesis.cpu_load(CPU_LOAD_PROCESSES):
        for _ in run.rounds(3):
            ps = c.partitions() or []
            leaders = {p.leader for p in ps}
            idle = [n for n in c.brokers.procs if n not in leaders]
            # (the first round usually finds none: its broker leads nothing once restarted)
            n = idle[0] if idle else c.wait_leader_of(0)
            with run.nemesis.terminate_broker(n):
                run.hold(12.0, 14.0)
            wait_until(lambda: c.healthy(3), 60, "ISR 3 again")
            run.hold(1.0, 2.0)


TXN_STATE_PARTITIONS = 5  # transaction.state.log.num.partitions in S14: loads fast


def s14(run: Run) -> None:
    """The transactional workload under kills: the coordinator of producer t1's id (the
    leader of its __transaction_state partition) and the leader of the transactional topic's
    partition 0, in turn, 4 times; each restarted after 2-3 s. Each round t2 also leaves a
    transaction to a zombie, fenced by its successor (TxnWorkload.fence)."""
    c = run.cluster
    coordinator = partition_for("t1", TXN_STATE_PARTITIONS)
    for i in run.rounds(4):
        run.txns.fence("t2")  # a zombie of t2, fenced by its successor
        topic, part = ("__transaction_state", coordinator) if i % 2 == 0 else (TXN_TOPIC, 0)
        victim = wait_until(
            lambda t=topic, p=part: c.leader_of(p, t), 30, f"a leader of {topic}-{part}"
        )
        with run.nemesis.kill_broker(victim):
            run.hold(2.0, 3.0)
        wait_until(lambda: c.healthy(3), 60, "ISR 3 again")


def _lazyfs_missing() -> str | None:
    from lazyfs import unavailable_reason

    return unavailable_reason()


def _disk_missing() -> str | None:
    from fault_disks import unavailable_reason

    return unavailable_reason()


SCENARIOS = {
    s.name: s
    for s in [
        Scenario("S1", "SIGKILL the p0 leader x4, restart after 2-3 s", s1),
        Scenario("S2", "SIGKILL the active controller x3 while producing and creating topics", s2),
        Scenario("S3", "SIGSTOP the p0 leader 6 s past its session, x2", s3),
        Scenario(
            "S4",
            "isolate the p0 leader from brokers and controllers 10 s",
            s4,
            network=True,
            missing=fault_net.missing_tools,
        ),
        Scenario(
            "S5",
            "isolate the controller leader, then a ring (leader-follower link cut)",
            s5,
            network=True,
            missing=fault_net.missing_tools,
        ),
        Scenario(
            "S6",
            "30 % packet loss on the p0 leader 10 s, then clients cut 5 s",
            s6,
            network=True,
            missing=fault_net.missing_tools,
        ),
        Scenario(
            "S7",
            "fsync delayed 300 ms on the p0 leader 10 s, then EIO on a follower's segment writes",
            s7,
            missing=missing_strace,
        ),
        Scenario("S8", "torn tail on a follower, then a double failover", s8),
        Scenario(
            "S9",
            "power loss of every node at once (LazyFS drops what was not fsynced)",
            s9,
            missing=_lazyfs_missing,
            storage="lazyfs",
        ),
        Scenario(
            "S10",
            "broker 4's disk full until it leaves the ISR; then a producer process "
            "SIGKILLed mid-batch x3, restarted with its name",
            s10,
            missing=_disk_missing,
            storage="small-disk",
        ),
        Scenario(
            "S11",
            "SIGTERM a broker that leads nothing (a controlled shutdown), down 12-14 s, x3, "
            "with 4 busy loops beside the cluster; one producer over 12 partitions",
            s11,
            broker_overrides={"replica.lag.time.max.ms": 30_000},
            partitions=12,
            producers=1,
        ),
        Scenario(
            "S12",
            "reassign a partition onto a 4th broker, SIGKILL its leader (being removed) mid-move,"
            " then the next leader",
            fault_elastic.s12,
            spare_brokers=(fault_elastic.SPARE_BROKER,),
            # the scenario moves replicas itself (node-add would fill the 4th broker on its own)
            controller_overrides={"auto.balance.mode": "off"},
        ),
        Scenario(
            "S14",
            "transactions (confluent-kafka, KAFKA listener) committed or aborted at random;"
            " SIGKILL the coordinator of t1's id and the txn topic's p0 leader in turn, x4",
            s14,
            missing=missing_confluent,
            txn=True,
            broker_overrides={
                "transaction.state.log.num.partitions": TXN_STATE_PARTITIONS,
                "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
            },
        ),
        Scenario(
            "S13",
            "add a 4th controller while the active one is SIGKILLed, remove the active one while"
            " another voter is down, then kill the new quorum's leader",
            fault_elastic.s13,
        ),
    ]
}


# -- the run -------------------------------------------------------------------------------------


def run_scenario(
    name: str, workdir: Path, seed: int, duration: float = 0.0, secure: bool = False
) -> dict[str, Any]:
    """`secure`: SASL_SSL on every client and broker link, mTLS on the controllers' (Cluster)."""
    sc = SCENARIOS[name]
    if secure and sc.txn:  # refused, and said so in the report (chaos.py --scenario all)
        why = "the transactional workload's KAFKA listener is plaintext only (no --secure)"
        return {"scenario": name, "seed": seed, "skipped": why}
    why = sc.missing()
    if why:
        return {"scenario": name, "seed": seed, "skipped": why}
    workdir.mkdir(parents=True, exist_ok=True)
    if sc.network and not fault_net.inside_netns():
        argv = [sys.executable, str(CHAOS), "--scenario", name, "--seed", str(seed),
                "--duration", str(duration), "--out", str(workdir)]  # fmt: skip
        argv += ["--secure"] if secure else []
        fault_net.in_netns(argv, timeout=300 + duration * 2)
        path = workdir / f"{name}-report.json"
        assert path.exists(), f"{name} in its namespace wrote no report (see {workdir})"
        return json.loads(path.read_text())
    report = _run_here(sc, workdir, seed, duration, secure)
    (workdir / f"{name}-report.json").write_text(json.dumps(report, indent=2))
    return report


def _run_here(
    sc: Scenario, workdir: Path, seed: int, duration: float, secure: bool
) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        storage, data_root, broker_data = _storage(sc, workdir, stack)
        cluster = Cluster(
            workdir, sc.broker_overrides, data_root, broker_data, sc.network, sc.partitions,
            secure, sc.spare_brokers, sc.controller_overrides, sc.txn,
        )  # fmt: skip
        return _run_cluster(sc, cluster, storage, workdir, seed, duration)


def _storage(sc: Scenario, workdir: Path, stack: contextlib.ExitStack) -> tuple[Any, Any, Any]:
    """The scenario's special storage (unmounted by `stack` after the cluster is gone)."""
    if sc.storage == "lazyfs":
        from lazyfs import LazyFS

        fs = stack.enter_context(LazyFS(workdir / "lazyfs-disk", workdir / "lazyfs-mnt"))
        return fs, workdir / "lazyfs-mnt", None
    if sc.storage == "small-disk":
        from fault_disks import LoopExt4

        disk = stack.enter_context(
            LoopExt4(workdir / "small.img", workdir / "small-mnt", size_mib=SMALL_DISK_MIB)
        )
        return disk, None, {SMALL_DISK_BROKER: disk.mountpoint / "log"}
    return None, None, None


def _run_cluster(
    sc: Scenario, cluster: Cluster, storage: Any, workdir: Path, seed: int, duration: float
) -> dict[str, Any]:
    history = History(workdir / f"{sc.name}-history.jsonl")
    net = fault_net.Net() if sc.network else None
    nemesis = Nemesis(cluster, history, net)
    run = Run(cluster, nemesis, random.Random(seed), duration, storage=storage)
    try:
        cluster.start()
        sec = cluster.security
        workload = Workload(cluster.bootstrap, TOPIC, sc.partitions, history, sc.producers, sec)
        workload.start()
        group = GroupMembers(cluster.bootstrap, TOPIC, history, security=sec)
        group.start()
        monitor = IsrMonitor(cluster.bootstrap, TOPIC, history, sec)
        monitor.start()
        txns: TxnWorkload | None = None
        if sc.txn:
            with Admin(**cluster.client()) as admin:
                admin.create_topic(TXN_TOPIC, PARTITIONS, 3, {"min.insync.replicas": str(MIN_ISR)})
            txns = TxnWorkload(cluster.kafka_bootstrap, PARTITIONS, history, seed)
            txns.start()
            run.txns = txns
        try:
            wait_until(lambda: workload.acked() > 300, 30, "steady writes")
            wait_until(group.committed, 30, "the group committing")
            if txns is not None:
                wait_until(lambda: txns.committed() > 10, 60, "transactions committing")
            run.started = time.monotonic()
            try:
                sc.faults(run)
            finally:
                nemesis.heal_all()
                if net is not None:
                    net.heal()
            healed = time.monotonic()
            try:
                wait_until(cluster.recovered, RECOVERY_S, "recovery within 10 s of heal (C7)")
                probe_s: float | None = round(time.monotonic() - healed, 3)
            except AssertionError:
                probe_s = None
                run.anomalies.append({"check": "recovery", "within_s": RECOVERY_S})
            # the workload's own first write after heal (its recovery time), before it stops
            _wait_quietly(lambda: workload.acked_since(healed), 20)
        finally:
            for x in run.producers:
                x.stop()
                history.merge(x.entries())
            group.stop()
            monitor.stop()
            workload.stop()
            if txns is not None:
                txns.stop()
            history.close()
        final = final_read(cluster.bootstrap, TOPIC, sc.partitions, security=sec)
        txn_report = (
            check_transactions(
                history.entries,
                txn_final_read(cluster.kafka_bootstrap, PARTITIONS),
                txn_final_read(cluster.kafka_bootstrap, PARTITIONS, "read_uncommitted"),
            )
            if txns is not None
            else None
        )
        events = leader_events(cluster.broker_logs(), TOPIC) + raft_events(
            cluster.controller_logs()
        )
        report = check(history.entries, final, events, MIN_ISR)
        report.update(timing(history.entries))
        report.update(log_counts(cluster.broker_logs()))
        if txn_report is not None:
            txn_valid = txn_report.pop("valid")  # (popped first: update() must not undo it)
            report["valid"] = report["valid"] and txn_valid
            report["anomalies"].update(txn_report.pop("anomalies"))
            report.update(txn_report)
            report["transactions"]["zombies_fenced"] = run.txns.fenced
    finally:
        cluster.close()
    if run.anomalies:
        report["valid"] = False
        report["anomalies"]["scenario"] = run.anomalies
    report.update(
        scenario=sc.name,
        summary=sc.summary,
        seed=seed,
        duration=duration,
        recovery_probe_s=probe_s,
        security="SASL_SSL" if cluster.security else "PLAINTEXT",
        raft_elections=sum(1 for e in events if e["type"] == "raft_leader"),
        **run.figures,
    )
    return report


def _wait_quietly(cond: Callable[[], object], timeout: float) -> None:
    try:
        wait_until(cond, timeout, "")
    except AssertionError:
        pass  # (the figure then says None)


COLUMNS = ("scenario", "valid", "ok", "fail", "info", "commits", "lost", "duplicated", "reordered",
           "inconsistent", "stalls", "longest_write_unavailable_s", "longest_failover_s",
           "recovery_s")  # fmt: skip


def summary_table(reports: list[dict[str, Any]]) -> str:
    """One line per scenario, the figures CHECKER.md asks for."""
    rows = [COLUMNS]
    for r in reports:
        if "skipped" in r:
            rows.append((r["scenario"], "skipped: " + r["skipped"]))
            continue
        w = r["writes"]
        rows.append(tuple(str(x) for x in (
            r["scenario"], r["valid"], w["ok"], w["fail"], w["info"], r["commits"], r["lost"],
            r["duplicated"], r["reordered"], r["inconsistent"], r.get("stalls", 0),
            r["longest_write_unavailable_s"], r["longest_failover_s"], r["recovery_s"],
        )))  # fmt: skip
    widths = [max(len(str(row[i])) for row in rows if i < len(row)) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip()
        for row in rows
    )
