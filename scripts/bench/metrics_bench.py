#!/usr/bin/env python
"""The cost of the broker's metrics (issue 26: <= 3 % throughput, no change in p99): produce and
consume against a real `gregor server` with `metrics.listener` off and on, in one run; prints
one JSON object.

Each round starts a fresh server per setting, in the order off, on, on, off, off, on, ... (so a
drift of the shared machine's load hits both alike), and in it:
  1. produce --records 100-byte records with per-record send() (acks=1), records/s;
  2. consume them from the beginning, records/s;
  3. --round-trips produces with acks=all awaited one at a time, p50/p99 ms.
With metrics on, a scraper thread GETs /metrics every second throughout, as Prometheus would.
The summary gives each figure's median over the rounds per setting and on/off - 1 in percent.

    .venv/bin/python scripts/bench/metrics_bench.py [--records 200000] [--rounds 3]
        [--round-trips 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import start_server, stop_server  # noqa: E402
from produce_bench import round_trips  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_round(metrics_on: bool, args: argparse.Namespace, tmp: str) -> dict:
    from client import Admin
    from client.cli.perf import run_consume, run_produce

    port = free_port()
    overrides = {"metrics.listener": f"http://127.0.0.1:{port}"} if metrics_on else {}
    data = os.path.join(tmp, "data")
    proc, bootstrap, _, _ = start_server(data, overrides=overrides)
    stop = threading.Event()
    scrapes = [0]
    scraper = None
    try:
        if metrics_on:

            def scrape() -> None:
                while not stop.wait(1.0):
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                        r.read()
                    scrapes[0] += 1

            scraper = threading.Thread(target=scrape, daemon=True)
            scraper.start()
        topic = f"metrics-bench-{int(time.time() * 1000)}"
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topic(topic, partitions=1)
            admin.create_topic(topic + "-rt", partitions=1)
        produce = run_produce(
            {"bootstrap.servers": bootstrap, "acks": "1"}, topic, args.records, 100, "send"
        )
        consume = run_consume(
            {"bootstrap.servers": bootstrap, "max.poll.records": 100_000}, topic, args.records
        )
        rt = round_trips(bootstrap, topic + "-rt", args.round_trips)
        return {
            "metrics": metrics_on,
            "produce_records_per_s": produce["records_per_s"],
            "consume_records_per_s": consume["records_per_s"],
            "acks_all_p50_ms": rt["p50_ms"],
            "acks_all_p99_ms": rt["p99_ms"],
            "scrapes": scrapes[0],
        }
    finally:
        stop.set()
        if scraper is not None:
            scraper.join(10)
        stop_server(proc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each setting")
    ap.add_argument("--round-trips", type=int, default=2000)
    args = ap.parse_args()
    order: list[bool] = []
    for i in range(args.rounds):
        order += [False, True] if i % 2 == 0 else [True, False]
    out: dict = {"load_before": round(os.getloadavg()[0], 2), "rounds": []}
    for metrics_on in order:
        tmp = tempfile.mkdtemp(prefix="gregor-metrics-bench-")
        try:
            out["rounds"].append(one_round(metrics_on, args, tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    out["load_after"] = round(os.getloadavg()[0], 2)
    summary: dict = {}
    for key in ("produce_records_per_s", "consume_records_per_s", "acks_all_p50_ms",
                "acks_all_p99_ms"):  # fmt: skip
        off = statistics.median(r[key] for r in out["rounds"] if not r["metrics"])
        on = statistics.median(r[key] for r in out["rounds"] if r["metrics"])
        summary[key] = {"off": off, "on": on, "on_vs_off_pct": round((on / off - 1) * 100, 2)}
    out["summary"] = summary
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
