#!/usr/bin/env python
"""Replication benchmark on a local 3-controller, 3-broker cluster (the processes of `gregor
cluster up`, on loopback); prints one JSON object.

  1. throughput: one producer process, 100-byte values, acks=all, a topic with replication
     factor 3 and min.insync.replicas 2 (fsync on every replica: log.flush.on.ack)
     (goal >= 400,000 records/s on the 2-core machine); idempotent (the default) and not
     (idempotence must cost <= 10%)
  2. latency at a steady --steady-rate records/s (default 5,000): p50/p99 per record
  3. failover: --kills times (default 20), SIGKILL the partition's leader and time from the
     kill to the first acknowledged acks=all write on that partition (goal p99 <= 3 s with
     broker.session.timeout.ms 2000); the killed broker is restarted and the ISR waited back
     to 3 between kills.

    .venv/bin/python scripts/bench/replication_bench.py [--records 1000000] [--kills 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cluster import start, start_cluster, wait  # noqa: E402
from _idempotence import idempotence_ab  # noqa: E402

from broker.cluster_nodes import Node, stop_nodes  # noqa: E402
from client import Admin, Producer  # noqa: E402
from client.cli.perf import percentiles, run_produce  # noqa: E402


def describe(bootstrap: str, topic: str):
    with Admin(bootstrap_servers=bootstrap, request_timeout_ms=2000) as admin:
        return admin.describe_topic(topic).partitions[0]


def wait_isr(bootstrap: str, topic: str, timeout: float = 60.0):
    return wait(
        lambda: (lambda d: d if d.leader >= 0 and len(d.isr) == 3 else None)(
            describe(bootstrap, topic)
        ),
        timeout,
        f"{topic}: a leader and an ISR of 3",
    )


def failover(bootstrap: str, brokers: dict[int, Node], kills: int) -> dict:
    topic = "bench-failover"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
    wait_isr(bootstrap, topic)
    samples = []
    with Producer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=0,
        retry_backoff_ms=20,
        request_timeout_ms=1500,
        delivery_timeout_ms=60_000,
    ) as prod:
        prod.send(topic, b"warm-up", partition=0).result(30)
        for i in range(kills):
            leader = wait_isr(bootstrap, topic).leader
            node = brokers[leader]
            assert node.proc is not None
            t0 = time.monotonic()
            os.killpg(node.proc.pid, signal.SIGKILL)
            node.proc.wait(10)
            prod.send(topic, b"after-kill-%d" % i, partition=0).result(60)
            samples.append(time.monotonic() - t0)
            start(node)
    out = percentiles(samples)
    out["kills"] = kills
    out["max"] = round(max(samples), 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--steady-rate", type=float, default=5000)
    ap.add_argument("--steady-seconds", type=float, default=5)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--session-ms", type=int, default=2000)
    ap.add_argument("--data-dir", help="parent of the cluster's temp dir")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gregor-repl-bench-", dir=args.data_dir))

    def edit(n: Node, text: str) -> str:
        if n.role == "controller":
            return text.replace(
                "broker.session.timeout.ms: 6000", f"broker.session.timeout.ms: {args.session_ms}"
            )
        hb = max(100, args.session_ms // 4)
        return text.replace(
            "broker.heartbeat.interval.ms: 1000", f"broker.heartbeat.interval.ms: {hb}"
        )

    out: dict = {"load_before": os.getloadavg()[0], "cpus": os.cpu_count()}
    controllers, brokers = start_cluster(tmp, 3, 3, edit)
    bootstrap = ",".join(n.address for n in brokers.values())
    try:
        suffix = int(time.time())
        with Admin(bootstrap_servers=bootstrap) as admin:
            for name in ("small", "steady", "ab0", "ab1", "ab2", "ab3"):
                admin.create_topic(f"bench-{name}-{suffix}", 1, 3, {"min.insync.replicas": "2"})
        for name in ("small", "steady", "ab0", "ab1", "ab2", "ab3"):
            wait_isr(bootstrap, f"bench-{name}-{suffix}")
        tuned = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "batch.size": 1 << 20,
            "linger.ms": 5,
            "max.request.size": 8 << 20,
        }
        out["throughput_100b_rf3"] = run_produce(
            tuned, f"bench-small-{suffix}", args.records, 100, "bulk", 5000
        )
        out["idempotence_100b_rf3"] = idempotence_ab(
            tuned, [f"bench-ab{i}-{suffix}" for i in range(4)], args.records
        )
        steady_n = int(args.steady_rate * args.steady_seconds)
        out["steady_latency_rf3"] = run_produce(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0},
            f"bench-steady-{suffix}", steady_n, 100, "send", 1, args.steady_rate,
        )  # fmt: skip
        if args.kills:
            out["failover"] = failover(bootstrap, brokers, args.kills)
            out["failover"]["session_timeout_ms"] = args.session_ms
    finally:
        stop_nodes(list(brokers.values()))
        stop_nodes(controllers)
        out["load_after"] = os.getloadavg()[0]
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
