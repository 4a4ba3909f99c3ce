#!/usr/bin/env python
"""The cost of the broker's metrics (issue 26: <= 3 % throughput, no change in p99): produce and
consume against a real `gregor server` with `metrics.listener` off and on, in one run; prints
one JSON object.

Each round starts a fresh server per setting, in the order off, on, on, off, off, on, ... (so a
drift of the shared machine's load hits both alike), and in it:
  1. produce --records 100-byte records with per-record send() (acks=1), records/s;
  2. consume them from the beginning, records/s;
  3. --round-trips produces with acks=all awaited one at a time, p50/p99 ms.
Beside each throughput, the server process's CPU time per record over that phase (user +
system, from /proc: less sensitive to the machine's load than records/s). With metrics on, a scraper thread GETs /metrics every second throughout, as Prometheus would.
The summary gives each figure's median over the rounds per setting and on/off - 1 in percent.

Throughput on a shared, loaded machine swings far more than 3 %, so the run also measures the
recording path itself (`micro`): the CPU time (thread_time, so not the time other processes
take) per produce and per fetch request of one partition of what the broker records with
metrics on and not off: the request's stage histograms, the error-code walk of its answer, the
topic counters; and per flusher round and per metadata commit. Best of --micro-repeats tight
loops of --micro-ops each. `--micro-only` skips the servers.

    .venv/bin/python scripts/bench/metrics_bench.py [--records 200000] [--rounds 3]
        [--round-trips 2000] [--micro-ops 200000] [--micro-repeats 5] [--micro-only]
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

from _proc import cpu_seconds  # noqa: E402
from _server import start_server, stop_server  # noqa: E402
from produce_bench import round_trips  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def produce_requests(port: int) -> tuple[float, int]:
    """(PRODUCE requests answered so far, the scrape's size in bytes), from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    for f in text_string_to_metric_families(text):
        for smp in f.samples:
            if smp.name == "gregor_requests_total" and smp.labels.get("api") == "PRODUCE":
                return smp.value, len(text)
    return 0.0, len(text)


def scrape_costs(pid: int, port: int, records: int, produces: float, produce_cpu_s: float) -> dict:
    """With metrics on: records per produce request, the server's CPU per produce request
    over the produce phase, and the server's CPU per scrape (20 back to back)."""
    url = f"http://127.0.0.1:{port}/metrics"
    _, size = produce_requests(port)
    n = 20
    c0 = cpu_seconds(pid)
    for _ in range(n):
        with urllib.request.urlopen(url, timeout=10) as r:
            r.read()
    per_scrape_ms = (cpu_seconds(pid) - c0) * 1000 / n
    return {
        "produce_requests": int(produces),
        "records_per_produce_request": round(records / produces, 1) if produces else None,
        "server_cpu_us_per_produce_request": (
            round(produce_cpu_s * 1e6 / produces, 1) if produces else None
        ),
        "server_cpu_ms_per_scrape": round(per_scrape_ms, 2),
        "scrape_bytes": size,
    }


def one_round(metrics_on: bool, args: argparse.Namespace, tmp: str) -> dict:
    from client import Admin
    from client.cli.perf import run_consume, run_produce

    port = free_port()
    overrides = {"metrics.listener": f"http://127.0.0.1:{port}"} if metrics_on else {}
    data = str(Path(tmp) / "data")
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
        cpu0 = cpu_seconds(proc.pid)
        produce = run_produce(
            {"bootstrap.servers": bootstrap, "acks": "1"}, topic, args.records, 100, "send"
        )
        cpu1 = cpu_seconds(proc.pid)
        produces = produce_requests(port)[0] if metrics_on else 0.0
        consume = run_consume(
            {"bootstrap.servers": bootstrap, "max.poll.records": 100_000}, topic, args.records
        )
        cpu2 = cpu_seconds(proc.pid)
        rt = round_trips(bootstrap, topic + "-rt", args.round_trips)
        extra: dict = {}
        if metrics_on:
            stop.set()
            if scraper is not None:
                scraper.join(10)
            extra = scrape_costs(proc.pid, port, args.records, produces, cpu1 - cpu0)
        return {
            "metrics": metrics_on,
            "produce_records_per_s": produce["records_per_s"],
            "consume_records_per_s": consume["records_per_s"],
            "produce_server_cpu_us_per_record": round((cpu1 - cpu0) * 1e6 / args.records, 3),
            "consume_server_cpu_us_per_record": round((cpu2 - cpu1) * 1e6 / args.records, 3),
            "acks_all_p50_ms": rt["p50_ms"],
            "acks_all_p99_ms": rt["p99_ms"],
            "scrapes": scrapes[0],
            **extra,
        }
    finally:
        stop.set()
        if scraper is not None:
            scraper.join(10)
        stop_server(proc)


def _cpu_ns_per_op(fn, ops: int, repeats: int) -> float:
    """The least thread CPU time per call of `fn` over `repeats` loops of `ops` calls."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time_ns()
        for _ in range(ops):
            fn()
        best = min(best, (time.thread_time_ns() - t0) / ops)
    return best


def _micro_one(labels: bool, ops: int, repeats: int) -> dict:
    from types import SimpleNamespace

    from broker.metrics import BrokerMetrics
    from broker.request_metrics import StageRecorder
    from client.protocol import ApiKey
    from controller.metrics import QuorumMetrics

    m = BrokerMetrics(("127.0.0.1", 0), partition_labels=labels)
    recorder = StageRecorder()
    t = time.monotonic_ns()
    produce = SimpleNamespace(
        api_key=int(ApiKey.PRODUCE), received_ns=t, dequeued_ns=t + 20_000,
        local_done_ns=t + 80_000, responded_ns=t + 900_000, sent_ns=0,
    )  # fmt: skip
    fetch = SimpleNamespace(
        api_key=int(ApiKey.FETCH), received_ns=t, dequeued_ns=t + 20_000,
        local_done_ns=t + 60_000, responded_ns=t + 60_000, sent_ns=t + 70_000,
    )  # fmt: skip
    produce_answer = {
        "responses": [
            {"name": "bench", "partitions": [
                {"index": 3, "error_code": 0, "base_offset": 1000, "log_start_offset": 0}
            ]}
        ]
    }  # fmt: skip
    fetch_answer = {
        "error_code": 0,
        "responses": [
            {"topic": "bench", "partitions": [
                {"partition": 3, "error_code": 0, "high_watermark": 1000,
                 "log_start_offset": 0, "records": b"x" * 1000}
            ]}
        ],
    }  # fmt: skip
    topics, errors = m.topics, m.errors
    p_key, f_key = int(ApiKey.PRODUCE), int(ApiKey.FETCH)

    def on_produce() -> None:
        topics.appended("bench", 3, 1000, 10)
        errors.count(p_key, produce_answer)
        recorder.sent(produce, t + 910_000, t + 930_000)

    def on_fetch() -> None:
        topics.fetched("bench", 3, 1000, 10)
        errors.count(f_key, fetch_answer)
        recorder.sent(fetch, 0, 0)

    def us(fn) -> float:
        return round(_cpu_ns_per_op(fn, ops, repeats) / 1000, 3)

    out = {
        "produce_request_us": us(on_produce),
        "fetch_request_us": us(on_fetch),
        "topic_counters_per_partition_us": us(lambda: topics.appended("bench", 3, 1000, 10)),
        "stage_record_us": us(lambda: recorder.sent(produce, t + 910_000, t + 930_000)),
        "error_walk_us": us(lambda: errors.count(p_key, produce_answer)),
    }
    if not labels:
        out["flush_round_us"] = us(lambda: m.flush_round(0.001, 4096))
        raft = SimpleNamespace(on_commit_latency=None)
        QuorumMetrics(m.registry, raft)
        observe = raft.on_commit_latency
        out["raft_commit_observe_us"] = us(lambda: observe(0.002))
    return out


def micro(ops: int, repeats: int) -> dict:
    """CPU time of the recording path per request and per event, in microseconds."""
    from types import SimpleNamespace

    hooks = SimpleNamespace(on_appended=None, recorder=None)

    def off() -> None:  # what the request path does with metrics off: the hooks are None
        if hooks.on_appended is not None or hooks.recorder is not None:
            raise AssertionError

    return {
        "topic_labels": _micro_one(False, ops, repeats),
        "partition_labels": _micro_one(True, ops, repeats),
        "off_request_us": round(_cpu_ns_per_op(off, ops, repeats) / 1000, 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each setting")
    ap.add_argument("--round-trips", type=int, default=2000)
    ap.add_argument("--micro-ops", type=int, default=200_000)
    ap.add_argument("--micro-repeats", type=int, default=5)
    ap.add_argument("--micro-only", action="store_true", help="only the recording path's CPU")
    args = ap.parse_args()
    load = os.getloadavg()
    out_micro = {
        "load_before": round(load[0], 2),
        "micro_cpu": micro(args.micro_ops, args.micro_repeats),
        "load_after": round(os.getloadavg()[0], 2),
    }
    if args.micro_only:
        print(json.dumps(out_micro, indent=2))
        return 0
    order: list[bool] = []
    for i in range(args.rounds):
        order += [False, True] if i % 2 == 0 else [True, False]
    out: dict = {"micro": out_micro, "load_before": round(os.getloadavg()[0], 2), "rounds": []}
    for metrics_on in order:
        tmp = tempfile.mkdtemp(prefix="gregor-metrics-bench-")
        try:
            out["rounds"].append(one_round(metrics_on, args, tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    out["load_after"] = round(os.getloadavg()[0], 2)
    summary: dict = {}
    for key in ("produce_records_per_s", "consume_records_per_s", "acks_all_p50_ms",
                "acks_all_p99_ms", "produce_server_cpu_us_per_record",
                "consume_server_cpu_us_per_record"):  # fmt: skip
        off = statistics.median(r[key] for r in out["rounds"] if not r["metrics"])
        on = statistics.median(r[key] for r in out["rounds"] if r["metrics"])
        summary[key] = {"off": off, "on": on, "on_vs_off_pct": round((on / off - 1) * 100, 2)}
    out["summary"] = summary
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
