#!/usr/bin/env python
"""Consumer benchmark against a real `gregor server` subprocess; prints one JSON object.

Fills one partition with --records 100-byte values (bulk producer), then times one consumer
reading them all from the beginning (target >= 2,000,000 records/s), --repeat times (a fresh
consumer each time; the machine is shared, so look at the spread). Each pass also reports the
consumer process's CPU seconds, and the load average is printed at the start.

    .venv/bin/python scripts/bench/consume_bench.py [--records 2000000] [--repeat 1] [--bootstrap H:P]
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import start_server, stop_server  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--max-poll-records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=1, help="consume passes over the same data")
    ap.add_argument(
        "--brokers",
        type=int,
        choices=[1, 3],
        default=1,
        help="3: a cluster of 3 controllers and 3 brokers, RF=3, min ISR 2, acks=all",
    )
    ap.add_argument("--bootstrap", help="use a running broker instead of starting one")
    ap.add_argument("--hold", type=float, default=0.0, help=argparse.SUPPRESS)  # (profiling)
    args = ap.parse_args()

    from client import Admin
    from client.cli.perf import run_consume, run_produce

    load = [round(x, 2) for x in os.getloadavg()]
    tmp = tempfile.mkdtemp(prefix="gregor-consume-bench-")
    proc = None
    nodes: list = []
    started: dict = {}  # the brokers this process started, by node id
    cluster: dict = {}
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        elif args.brokers == 3:
            from _cluster import start_cluster

            controllers, started = start_cluster(Path(tmp), 3, 3)
            nodes = [list(started.values()), controllers]  # stopped brokers first
            bootstrap = ",".join(n.address for n in started.values())
        else:
            proc, bootstrap, _, _ = start_server(str(Path(tmp) / "data"))
        topic = f"bench-consume-{int(time.time())}"
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            if args.brokers == 3:
                admin.create_topic(topic, 1, 3, {"min.insync.replicas": "2"})
            else:
                admin.create_topic(topic, partitions=1)
        fill = run_produce(
            {"bootstrap.servers": bootstrap, "acks": "all" if args.brokers == 3 else "1",
             "batch.size": 1 << 20, "max.request.size": 8 << 20, "buffer.memory": 256 << 20},
            topic, args.records, args.record_size, "bulk", 5000,
        )  # fmt: skip
        if args.brokers == 3:
            with Admin({"bootstrap.servers": bootstrap}) as admin:
                part = admin.describe_topic(topic).partitions[0]
            leader = started.get(part.leader)  # (None with --bootstrap: not ours)
            cluster = {"leader": part.leader, "isr_after_fill": len(part.isr),
                       "leader_pid": leader.proc.pid if leader and leader.proc else None}  # fmt: skip
            print(json.dumps(cluster), file=sys.stderr, flush=True)
            time.sleep(args.hold)  # (--hold: time to attach py-spy to the leader)
        passes = []
        for _ in range(max(1, args.repeat)):
            cpu = time.process_time()
            consume = run_consume(
                {"bootstrap.servers": bootstrap, "max.poll.records": args.max_poll_records,
                 "max.partition.fetch.bytes": 1 << 20, "fetch.max.bytes": 64 << 20},
                topic, args.records,
            )  # fmt: skip
            consume["client_cpu_s"] = round(time.process_time() - cpu, 3)
            passes.append(consume)
        out = {"bootstrap": bootstrap, "brokers": args.brokers, **cluster, "load_average": load,
               "fill": fill, "consume": passes[0]}  # fmt: skip
        if len(passes) > 1:
            out["consume_passes"] = [p["records_per_s"] for p in passes]
        print(json.dumps(out, indent=2))
    finally:
        if proc is not None:
            stop_server(proc)
        if nodes:
            from broker.cluster_nodes import stop_nodes

            for group in nodes:
                stop_nodes(group)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
