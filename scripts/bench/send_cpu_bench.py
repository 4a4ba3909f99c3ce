#!/usr/bin/env python
"""Client CPU per record of `Producer.send()`: the caller's thread and the whole client process.

Load-insensitive (CPU time, not wall time) so that it can be read on a shared machine. Starts
one `gregor server` (or uses --bootstrap), a one-partition topic per run, 100-byte records,
acks=all, the sync client `client.Producer` with its defaults. Modes:

    send       `for v in values: producer.send(topic, v)`, then flush()
    callback   the same with `.add_done_callback(cb)` per record
    bulk       send_many() per 2,000 records, then flush()

Per run: `caller_us` (time.thread_time of the calling thread over the loop, flush excluded:
what send() itself costs), `process_us` (time.process_time from the first send to the end of
flush: the caller plus the client's loop thread, i.e. everything the client spends per record)
and records/s for reference (load-sensitive).

    .venv/bin/python scripts/bench/send_cpu_bench.py [--records 300000] [--repeat 3]
        [--modes send,callback,bulk] [--bootstrap HOST:PORT] [--root DIR]

--root runs another tree's client and server (e.g. a `git worktree` of an older commit with
its client/records/*.c built): compare the CPU per record of two trees on the same machine.
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
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--bootstrap", default=None, help="use this cluster, start no server")
    ap.add_argument(
        "--root",
        default=str(Path(__file__).resolve().parents[2]),
        help="the tree whose client (and server) to run: a checkout with its C extensions built",
    )
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s) {bad}; choose from {list(MODES)}")
    root = os.path.abspath(args.root)
    here = str(Path(__file__).resolve().parent)
    sys.path[:0] = [root, here]  # (_server.py from this tree: it starts the root's `gregor`)
    os.environ["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])

    from _server import start_server, stop_server

    from client import Admin, Producer

    base = tempfile.mkdtemp(prefix="gregor-send-cpu-")
    proc = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        server = start_server(str(Path(base) / "data"))
        proc, bootstrap = server.proc, server.bootstrap
    cfg = {"bootstrap.servers": bootstrap, "acks": "all"}
    n = args.records
    runs: list[dict] = []

    def run(mode: str, topic: str) -> dict:
        errors = [0]

        def cb(f: object) -> None:
            if f.exception() is not None:  # type: ignore[attr-defined]
                errors[0] += 1

        with Producer(cfg) as producer:
            producer.partitions_for(topic)
            producer.send(topic, VALUE).result(30)
            send = producer.send
            p0, c0, t0 = time.process_time(), time.thread_time(), time.monotonic()
            if mode == "send":
                for _ in range(n):
                    send(topic, VALUE)
            elif mode == "callback":
                for _ in range(n):
                    send(topic, VALUE).add_done_callback(cb)
            else:
                chunk = [VALUE] * 2000
                futs = [producer.send_many(topic, chunk) for _ in range(n // 2000)]
            caller = time.thread_time() - c0
            producer.flush()
            elapsed = time.monotonic() - t0
            process = time.process_time() - p0
            if mode == "bulk":
                errors[0] = sum(1 for f in futs if f.exception() is not None)
        count = n if mode != "bulk" else (n // 2000) * 2000
        return {
            "mode": mode,
            "caller_us": round(caller / count * 1e6, 3),
            "process_us": round(process / count * 1e6, 3),
            "records_per_s": round(count / elapsed),
            "errors": errors[0],
            "load_1m": round(os.getloadavg()[0], 2),
        }

    try:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            for i in range(args.repeat):
                for mode in modes:
                    topic = f"send-cpu-{os.getpid()}-{mode}-{i}"
                    admin.create_topic(topic, partitions=1)
                    res = run(mode, topic)
                    runs.append(res)
                    print(json.dumps(res), file=sys.stderr, flush=True)
        import client

        out = {
            "root": root,
            "imports_from": str(Path(client.__file__).resolve().parents[1]),
            "records": n,
            "record_size": len(VALUE),
            "runs": runs,
            "median": {
                m: {
                    k: statistics.median(r[k] for r in runs if r["mode"] == m)
                    for k in ("caller_us", "process_us", "records_per_s")
                }
                for m in modes
            },
        }
        print(json.dumps(out, indent=2))
    finally:
        if proc is not None:
            stop_server(proc)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
