"""partitions_bench.py --brokers 3: the same figures on a local cluster of 3 controllers and 3
brokers (the processes of `gregor cluster up`, on loopback), topics of replication factor 3 and
min.insync.replicas 2 (not a benchmark itself; run_count_cluster is its one entry).

For one partition count, on a fresh cluster:
  - create time per topic (Admin.create_topic with replication factor 3) and the time until
    every partition has a leader and an ISR of 3;
  - each node's RSS, open descriptors and idle CPU, all over the same --idle-seconds;
  - list_topics time; produce rates (acks=all, one producer) to one partition and round-robin
    over every partition (first and second pass), as in the single-node mode;
  - one broker (the first) restarted: stopped with SIGTERM (a controlled shutdown), started
    again, timed to its ready line and until every partition's ISR holds 3 replicas again;
    then SIGKILLed, the time until the controller took it out of every ISR (it is fenced once
    broker.session.timeout.ms passed without a heartbeat), started again and timed the same.
A step that fails or times out ends the run with "error" in its JSON; what was measured before
it is kept.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path

from _cluster import start, start_cluster
from _partitions_common import (
    create_stats,
    idle_cpu_percent,
    list_and_produce,
    proc_stats,
)

from broker.cluster_nodes import Node, stop_nodes
from client import Admin

MIN_ISR = 2


def _metadata(bootstrap: str):
    """Metadata of every topic (one Metadata request, as list_topics sends) with each
    partition's leader, replicas and ISR."""
    from client.aio.cluster import ClusterClient
    from client.aio.config import resolve_config

    async def fetch():
        cc = ClusterClient(resolve_config("admin", {"bootstrap.servers": bootstrap}, {}))
        try:
            return await cc.refresh(all_topics=True)
        finally:
            await cc.close()

    return asyncio.run(fetch())


def _short(bootstrap: str, topics: list[str], per_topic: int, rf: int, without: int | None) -> int:
    """How many partitions of `topics` lack a leader or a full ISR (with `without`: how many
    still hold broker `without` in their ISR); missing ones count."""
    md = _metadata(bootstrap)
    short = 0
    for t in topics:
        parts = md.topics.get(t, ())
        short += per_topic - len(parts)
        for p in parts:
            if without is None:
                short += p.leader < 0 or len(p.isr) < rf
            else:
                short += without in p.isr
    return short


def _wait_until(what: str, timeout: float, short) -> float:
    """Seconds until short() is 0 (RuntimeError naming `what` and the last count after
    `timeout`); polled every 0.2 s, each poll one Metadata request for every topic."""
    t0 = time.monotonic()
    left, last = -1, None
    while time.monotonic() - t0 < timeout:
        try:
            left = short()
        except Exception as exc:  # a broker going or coming back: ask again
            left = -1
            last = exc
        else:
            if left == 0:
                return time.monotonic() - t0
        time.sleep(0.2)
    detail = f"{left} partitions short" if left >= 0 else f"last error {last!r}"
    raise RuntimeError(f"{what}: not within {timeout} s ({detail})")


def _node_stats(nodes: list[Node], idle_seconds: float | None = None) -> dict:
    pids = [n.proc.pid for n in nodes if n.proc is not None]
    assert len(pids) == len(nodes), "every node is running"
    out = {n.name: proc_stats(pid) for n, pid in zip(nodes, pids, strict=True)}
    if idle_seconds:
        cpu = idle_cpu_percent(pids, idle_seconds)
        for n, c in zip(nodes, cpu, strict=True):
            out[n.name]["cpu_percent"] = c
    return out


def _restart(victim: Node, sig: int, ctx: dict, rec: dict) -> None:
    """Stop `victim` with `sig` and start it again, filling `rec` as each step is timed:
    out_of_isr_s (from the signal until no ISR holds it: at once after a controlled shutdown,
    after broker.session.timeout.ms when killed), ready_s (from the start to its ready line)
    and full_isr_s (from the start until every partition has an ISR of 3 again)."""
    timeout = ctx["timeout"]
    rec.update(broker=victim.node_id, signal=signal.Signals(sig).name)
    assert victim.proc is not None
    t0 = time.monotonic()
    if sig == signal.SIGTERM:
        stop_nodes([victim], timeout=timeout)
        rec["stop_s"] = round(time.monotonic() - t0, 2)
    else:
        os.killpg(victim.proc.pid, sig)
        victim.proc.wait(30)
    rec["exit_code"] = victim.proc.returncode
    _wait_until(f"broker {victim.node_id} out of every ISR", timeout, ctx["holding"])
    rec["out_of_isr_s"] = round(time.monotonic() - t0, 2)
    t1 = time.monotonic()
    start(victim, timeout)
    rec["ready_s"] = round(time.monotonic() - t1, 2)
    _wait_until(f"ISR of 3 after starting broker {victim.node_id}", timeout, ctx["short"])
    rec["full_isr_s"] = round(time.monotonic() - t1, 2)


def run_count_cluster(count: int, args, base: str) -> dict:
    per_topic, rf = args.per_topic, args.brokers
    topics = [f"p{i:05d}" for i in range(max(1, count // per_topic))]
    out: dict = {
        "partitions": len(topics) * per_topic,
        "topics": len(topics),
        "brokers": args.brokers,
        "controllers": 3,
        "replication_factor": rf,
        "min_insync_replicas": MIN_ISR,
        "load_before": os.getloadavg()[0],
    }
    tmp = Path(base) / f"cluster-{count}"
    try:
        controllers, brokers = start_cluster(tmp, 3, args.brokers)
    except Exception as exc:  # reported; the next count gets a cluster of its own
        out["error"] = f"cluster start-up: {type(exc).__name__}: {exc}"
        out["log_tails"] = {p.stem: _tail(p) for p in sorted(tmp.glob("*.log"))}
        shutil.rmtree(tmp, ignore_errors=True)
        return out
    nodes = [*controllers, *brokers.values()]
    bootstrap = ",".join(n.address for n in brokers.values())
    victim = brokers[min(brokers)]
    ctx = {
        "timeout": args.restart_timeout,
        "short": lambda: _short(bootstrap, topics, per_topic, rf, None),
        "holding": lambda: _short(bootstrap, topics, per_topic, rf, victim.node_id),
    }
    try:
        times = []
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            for name in topics:
                t0 = time.monotonic()
                admin.create_topic(name, per_topic, rf, {"min.insync.replicas": str(MIN_ISR)})
                times.append(time.monotonic() - t0)
        out["create_s"] = create_stats(times)
        out["full_isr_after_create_s"] = round(
            _wait_until("ISR of 3 after create", args.restart_timeout, ctx["short"]), 2
        )
        out["idle"] = _node_stats(nodes, args.idle_seconds)
        out.update(
            list_and_produce(
                bootstrap,
                topics,
                per_topic,
                args.records,
                args.one_records,
                args.round_robin_passes,
            )
        )
        out["after_produce"] = _node_stats(nodes)
        for key, sig in (("restart_clean", signal.SIGTERM), ("restart_unclean", signal.SIGKILL)):
            out[key] = {}
            _restart(victim, sig, ctx, out[key])
        out["after_restarts"] = _node_stats(nodes)
    except Exception as exc:  # reported with what was measured before it
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["log_tails"] = {n.name: _tail(n.log) for n in nodes}
    finally:
        stop_nodes(list(brokers.values()), timeout=args.restart_timeout)
        stop_nodes(controllers)
        out["load_after"] = os.getloadavg()[0]
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _tail(path: Path, lines: int = 15) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError as exc:
        return [repr(exc)]
