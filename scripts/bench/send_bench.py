#!/usr/bin/env python
"""Per-record `Producer.send()` against bulk `send_many()`: records/s and client CPU per record.

Starts one `gregor server` (from the tree given by --root, default this one; fsync on ack,
the default), or with --brokers 3 a cluster of 3 controllers and 3 brokers (topics RF=3, min
ISR 2), or uses --bootstrap. The client keeps its defaults (batch.size 16 KiB, linger.ms 5)
unless --batch-size/--linger-ms say otherwise. Each run gets a new one-partition topic; --repeat
times each --modes entry, 100-byte records, acks=all, with the sync client `client.Producer`:

    send       `for v in values: producer.send(topic, v)` (no callback), then flush()
    callback   the same loop with `f.add_done_callback(cb)` per record (cb counts errors)
    bulk       send_many() per --chunk records, then flush()

For each run: records/s (first send to the end of flush; start-up and metadata left out) and
the client process's CPU per record (time.process_time: every thread of this process, i.e.
the caller's and the client's loop thread), and the caller's own CPU per record
(`caller_cpu_us_per_record`, time.thread_time of the calling thread over the loop, flush
left out: what send() itself costs). Both CPU figures move far less with the machine's load
than records/s. Compare two trees with --root (a `git worktree`
of an older commit, with the C extensions of client/records built there), alternating runs.

    .venv/bin/python scripts/bench/send_bench.py [--records 500000] [--repeat 3]
        [--modes send,callback,bulk] [--brokers 1|3] [--root DIR] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

VALUE = b"x" * 100
MODES = ("send", "callback", "bulk")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated: " + ",".join(MODES))
    ap.add_argument("--chunk", type=int, default=2000, help="records per send_many (bulk)")
    ap.add_argument("--linger-ms", type=float, default=None, help="default: the client's")
    ap.add_argument("--batch-size", type=int, default=None, help="default: the client's")
    ap.add_argument(
        "--brokers",
        type=int,
        choices=(1, 3),
        default=1,
        help="3: a cluster of 3 controllers and 3 brokers, topics RF=3, min.insync.replicas 2",
    )
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    ap.add_argument("--bootstrap", default=None, help="use this cluster, start no server")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s) {bad}; choose from {list(MODES)}")
    root = os.path.abspath(args.root)
    sys.path[:0] = [root, str(Path(root) / "scripts" / "bench")]
    os.environ["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])

    from _server import start_server, stop_server  # from `root`

    from client import Admin, Producer

    base = tempfile.mkdtemp(prefix="gregor-send-bench-")
    proc = None
    nodes: list = []
    if args.bootstrap:
        bootstrap = args.bootstrap
    elif args.brokers == 3:
        from _cluster import start_cluster

        controllers, brokers = start_cluster(Path(base), 3, 3)
        nodes = [list(brokers.values()), controllers]  # stopped brokers first
        bootstrap = ",".join(n.address for n in brokers.values())
    else:
        server = start_server(str(Path(base) / "data"))
        proc, bootstrap = server.proc, server.bootstrap
    cfg: dict = {"bootstrap.servers": bootstrap, "acks": "all"}
    if args.linger_ms is not None:
        cfg["linger.ms"] = args.linger_ms
    if args.batch_size is not None:
        cfg["batch.size"] = args.batch_size
        cfg["max.request.size"] = max(args.batch_size, 1 << 20) * 2
    n = args.records
    topic_no = [0]

    def new_topic(admin: Admin) -> str:
        topic_no[0] += 1
        name = f"send-bench-{os.getpid()}-{topic_no[0]}"
        if args.brokers == 3:
            admin.create_topic(name, 1, 3, {"min.insync.replicas": "2"})
        else:
            admin.create_topic(name, partitions=1)
        return name

    def run(mode: str, topic: str) -> dict:
        errors = [0]

        def cb(f: object) -> None:
            if f.exception() is not None:  # type: ignore[attr-defined]
                errors[0] += 1

        with Producer(cfg) as producer:
            producer.partitions_for(topic)
            producer.send(topic, VALUE).result(30)  # connections up, producer id known
            send = producer.send
            load = os.getloadavg()[0]
            c0, t0, th0 = time.process_time(), time.monotonic(), time.thread_time()
            if mode == "send":
                for _ in range(n):
                    send(topic, VALUE)
            elif mode == "callback":
                for _ in range(n):
                    send(topic, VALUE).add_done_callback(cb)
            else:
                futs = []
                chunk = [VALUE] * args.chunk
                sent = 0
                while sent < n:
                    k = min(args.chunk, n - sent)
                    futs.append(producer.send_many(topic, chunk if k == args.chunk else chunk[:k]))
                    sent += k
            caller = time.thread_time() - th0
            producer.flush()
            elapsed = time.monotonic() - t0
            cpu = time.process_time() - c0
            if mode == "bulk":
                errors[0] = sum(1 for f in futs if f.exception() is not None)
        return {
            "mode": mode,
            "records_per_s": round(n / elapsed, 1),
            "client_cpu_us_per_record": round(cpu / n * 1e6, 3),
            "caller_cpu_us_per_record": round(caller / n * 1e6, 3),
            "errors": errors[0],
            "load_1m": round(load, 2),
        }

    out: dict = {
        "root": root,
        "brokers": args.brokers,
        "records": n,
        "record_size": len(VALUE),
        "config": cfg,
        "runs": [],
    }
    try:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            for _ in range(args.repeat):
                for mode in modes:
                    res = run(mode, new_topic(admin))
                    out["runs"].append(res)
                    print(json.dumps(res), file=sys.stderr, flush=True)
        out["median"] = {
            m: {
                key: statistics.median(r[key] for r in out["runs"] if r["mode"] == m)
                for key in ("records_per_s", "client_cpu_us_per_record", "caller_cpu_us_per_record")
            }
            for m in modes
        }
        out["load_after"] = round(os.getloadavg()[0], 2)
        print(json.dumps(out, indent=2))
    finally:
        if proc is not None:
            stop_server(proc)
        if nodes:
            from broker.cluster_nodes import stop_nodes

            for group in nodes:
                stop_nodes(group)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
