#!/usr/bin/env python
"""End-to-end latency: from a producer's send() to a consumer's poll() returning the record, on
a local 3-controller, 3-broker cluster (the processes of `gregor cluster up`); prints JSON.

One producer process sends 100-byte records at a steady --rate (default 5,000/s) for --seconds
to a one-partition topic (replication factor 3, min.insync.replicas 2, acks=all, fsync on every
replica); each value starts with its send time (time.time_ns()). A consumer (assign mode, from
the end, fetch.max.wait.ms 500 as Kafka's default) in this process stamps each record when
poll() returns it. Reported: p50 / p99 / p999 / max in ms over the records after a 1 s
warm-up, and how many records arrived later than one fetch.max.wait.ms (the wake-up that a
moved high watermark owes a long-polling consumer: issue 28's 500 ms tail).

    .venv/bin/python scripts/bench/e2e_latency_bench.py [--rate 5000] [--seconds 10]
        [--acks all|1] [--root DIR]

--root runs another checkout's brokers and client (e.g. a `git worktree` of an older commit),
to compare trees in turn on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TOPIC = "e2e"


def produce(bootstrap: str, rate: float, seconds: float, acks: str) -> None:
    """The producer process: paced sends, each value carrying its send time."""
    from client import Producer

    pad = b"x" * 80
    with Producer(bootstrap_servers=bootstrap, acks=acks, linger_ms=0) as p:
        start = time.monotonic()
        n = 0
        while True:
            now = time.monotonic()
            if now - start >= seconds:
                break
            due = start + n / rate
            if now < due:
                time.sleep(due - now)
            p.send(TOPIC, b"%019d" % time.time_ns() + pad, partition=0)
            n += 1
        p.flush(60)
    print(json.dumps({"sent": n}), flush=True)


def percentile(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=5000.0, help="records/s the producer sends")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long it sends")
    ap.add_argument("--acks", choices=["all", "1"], default="all", help="the producer's acks")
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2]),
                    help="the checkout whose brokers and client run (default: this one)")  # fmt: skip
    ap.add_argument("--produce", metavar="BOOTSTRAP", help=argparse.SUPPRESS)  # (child mode)
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    sys.path[:0] = [root, str(Path(root) / "scripts" / "bench")]
    os.environ["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    os.chdir(root)  # (the nodes run `python -m broker.cli`, which imports from the cwd first)
    if args.produce:
        produce(args.produce, args.rate, args.seconds, args.acks)
        return 0

    from _cluster import start_cluster, stop_nodes  # (the tree's own, whatever its layout)

    from client import Admin, Consumer, TopicPartition

    tmp = Path(tempfile.mkdtemp(prefix="gregor-e2e-"))
    ctrl, brokers = start_cluster(tmp, 3, 3)
    bootstrap = ",".join(n.address for n in brokers.values())
    try:
        with Admin(bootstrap_servers=bootstrap) as admin:
            admin.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        latencies: list[float] = []
        stop = threading.Event()

        def consume() -> None:
            with Consumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=500) as c:
                tp = TopicPartition(TOPIC, 0)
                c.assign([tp])
                c.seek_to_beginning(tp)
                while not stop.is_set():
                    for r in c.poll(timeout_ms=200):
                        now = time.time_ns()
                        latencies.append((now - int(r.value[:19])) / 1e6)

        reader = threading.Thread(target=consume)
        reader.start()
        t0 = time.time()
        child = subprocess.run(
            [sys.executable, __file__, "--produce", bootstrap, "--rate", str(args.rate),
             "--seconds", str(args.seconds), "--acks", args.acks, "--root", root],
            capture_output=True, text=True, timeout=args.seconds + 120,
        )  # fmt: skip
        if child.returncode != 0:
            raise RuntimeError(f"producer failed: {child.stderr[-2000:]}")
        sent = json.loads(child.stdout.strip().splitlines()[-1])["sent"]
        deadline = time.monotonic() + 30
        while len(latencies) < sent and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        reader.join(30)
        steady = sorted(latencies[int(args.rate) :])  # after ~1 s of warm-up
        out = {
            "root": root,
            "rate": args.rate,
            "seconds": args.seconds,
            "acks": args.acks,
            "sent": sent,
            "received": len(latencies),
            "p50_ms": round(percentile(steady, 0.50), 2),
            "p99_ms": round(percentile(steady, 0.99), 2),
            "p999_ms": round(percentile(steady, 0.999), 2),
            "max_ms": round(steady[-1], 2),
            "later_than_fetch_max_wait": sum(1 for x in steady if x >= 500.0),
            "load_avg": round(os.getloadavg()[0], 2),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
        }
        print(json.dumps(out))
    finally:
        stop_nodes(list(brokers.values()))
        stop_nodes(ctrl)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
