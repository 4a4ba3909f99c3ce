"""What a light load costs the brokers of a cluster holding many partitions. Prints JSON.

    .venv/bin/python scripts/bench/light_load_bench.py [--counts 1000,6000] [--rate 200]
        [--seconds 10]

For each count: a cluster of 3 controllers and 3 brokers (scripts/bench/_cluster.py), that
many partitions in topics of 100 (replication factor 3, min.insync.replicas 2), each written
once; then one producer sends one 100-byte record at a time (acks=all, linger.ms 0, each
waited for) at `--rate` records/s, round-robin over the first topic's 100 partitions, for
`--seconds`. It reports the three brokers' CPU over that time: in all, per record and as a
share of one CPU. Every record moves one partition among thousands on each broker (its
append, the followers' fetch rounds, their flushes), so what grows with the idle partitions
shows here: a follower's fetch round that looked at every partition of its leader cost ~1.1
us a partition, a round per record.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def run_count(partitions: int, rate: float, seconds: float, base: Path) -> dict:
    from _cluster import start_cluster
    from _proc import cpu_seconds

    from broker.cluster_nodes import stop_nodes
    from client import Admin, Producer

    controllers, brokers = start_cluster(base / f"cluster-{partitions}", 3, 3)
    try:
        bootstrap = ",".join(n.address for n in brokers.values())
        pids = [n.proc.pid for n in brokers.values() if n.proc is not None]
        topics = [f"light{i:04d}" for i in range(max(1, partitions // 100))]
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            for t in topics:
                admin.create_topic(t, 100, 3, {"min.insync.replicas": "2"})
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        try:
            for t in topics:  # every partition once: leaders known, logs open, ISRs full
                for p in range(100):
                    producer.send(t, b"x" * 100, partition=p)
            producer.flush()
            cpu0 = sum(cpu_seconds(pid) for pid in pids)
            t0 = time.monotonic()
            sent = 0
            due = t0
            while time.monotonic() - t0 < seconds:
                producer.send(topics[0], b"y" * 100, partition=sent % 100).result(timeout=30)
                sent += 1
                due += 1.0 / rate
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            elapsed = time.monotonic() - t0
            cpu = sum(cpu_seconds(pid) for pid in pids) - cpu0
        finally:
            producer.close()
    finally:
        stop_nodes(list(brokers.values()))
        stop_nodes(controllers)
    return {
        "partitions": len(topics) * 100,
        "records": sent,
        "records_per_s": round(sent / elapsed, 1),
        "brokers_cpu_s": round(cpu, 3),
        "brokers_cpu_us_per_record": round(cpu / sent * 1e6, 1),
        "brokers_cpu_share": round(cpu / elapsed, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--counts", default="1000,6000", help="partition counts, one cluster each")
    ap.add_argument("--rate", type=float, default=200.0, help="records/s, one at a time")
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    os.chdir(ROOT)  # the nodes run `python -m broker.cli` from the working directory
    base = Path(tempfile.mkdtemp(prefix="gregor-light-bench-"))
    try:
        runs = [
            run_count(int(c), args.rate, args.seconds, base) for c in args.counts.split(",") if c
        ]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps({"rate": args.rate, "seconds": args.seconds, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
