"""`gregor perf produce|consume`: throughput and latency, printed as one JSON object.

    gregor perf produce --topic t --num-records 1000000 --record-size 100 [--acks all]
                        [--throughput R] [--mode send|bulk] [-X batch.size=1048576]
    gregor perf consume --topic t --num-records 1000000

produce: `send` (default) calls send() once per record with a done-callback on each future, the
loop a user writes (Kafka's ProducerPerformance), and measures each record's latency; `bulk`
queues --chunk records per send_many() call and measures each chunk's latency (queued ->
acknowledged), counted once per record. --throughput caps records/s (0 = unlimited). A progress
line (records so far, rate, and for produce the average and maximum latency of the last second)
is rewritten on stderr once a second, only when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any, TypedDict

from client.cli.common import (
    ACKS_HELP,
    Progress,
    add_bootstrap,
    client_config,
    on_terminal,
    reports_errors,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("perf", help="producer/consumer throughput and latency (JSON)")
    sub = p.add_subparsers(dest="perf_command", metavar="ROLE", required=True)
    pp = sub.add_parser("produce", help="producer throughput and latency")
    pp.add_argument("--topic", required=True, help="topic to write to")
    pp.add_argument("--num-records", type=int, required=True, help="records to send")
    pp.add_argument(
        "--record-size", type=int, default=100, help="value size in bytes (default 100)"
    )
    pp.add_argument("--acks", choices=["all", "-1", "0", "1"], default="all", help=ACKS_HELP)
    pp.add_argument("--throughput", type=float, default=0, help="records/s cap (0 = none)")
    pp.add_argument(
        "--mode",
        choices=["send", "bulk"],
        default="send",
        help=("send: one send() per record, the latency of every k-th (at most 100,000) timed "
              "by a callback (default); bulk: send_many() per --chunk"),
    )
    pp.add_argument("--chunk", type=int, default=2000, help="records per send_many (bulk)")
    pp.add_argument(
        "--partition", type=int, default=None, help="send every record to this partition"
    )
    add_bootstrap(pp)
    pp.set_defaults(func=_produce)
    pc = sub.add_parser("consume", help="consumer throughput")
    pc.add_argument("--topic", required=True, help="topic to read from the beginning")
    pc.add_argument("--num-records", type=int, required=True, help="stop after this many records")
    pc.add_argument("--timeout-ms", type=int, default=30_000, help="give up after this long idle")
    add_bootstrap(pc)
    pc.set_defaults(func=_consume)


class ProduceSummary(TypedDict):
    """`gregor perf produce`'s JSON line (scripts/bench reads it too)."""

    role: str
    mode: str
    records: int
    record_size: int
    errors: int
    seconds: float
    records_per_s: float
    mb_per_s: float
    latency: dict[str, float]  # percentiles()
    latency_samples: int  # the acknowledgements timed (send mode: every k-th record)


class ConsumeSummary(TypedDict):
    """`gregor perf consume`'s JSON line."""

    role: str
    records: int
    seconds: float
    records_per_s: float
    mb_per_s: float


def percentiles(samples: list[float], weights: list[int] | None = None) -> dict[str, float]:
    """p50/p99/p999 (ms) of `samples`, each counted `weights[i]` times."""
    if not samples:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "p999_ms": 0.0, "max_ms": 0.0}
    pairs = sorted(zip(samples, weights or [1] * len(samples), strict=True))
    total = sum(w for _, w in pairs)
    out: dict[str, float] = {}
    for name, q in (("p50_ms", 0.5), ("p99_ms", 0.99), ("p999_ms", 0.999)):
        target = q * total
        acc = 0
        for s, w in pairs:
            acc += w
            if acc >= target:
                out[name] = round(s * 1000, 3)
                break
    out["max_ms"] = round(pairs[-1][0] * 1000, 3)
    return out


LATENCY_SAMPLES = 100_000  # per-record mode: records whose latency is measured, at most


def run_produce(
    cfg: dict[str, Any],
    topic: str,
    num: int,
    size: int,
    mode: str = "send",
    chunk: int = 2000,
    throughput: float = 0,
    partition: int | None = None,
) -> ProduceSummary:
    """The producer benchmark; returns the JSON summary (also used by scripts/bench)."""
    from client import Producer

    value = b"x" * size
    lat: list[float] = []
    weights: list[int] = []
    lock = threading.Lock()
    progress = Progress("produce", num, enabled=on_terminal(sys.stderr))
    with Producer(cfg) as producer:
        producer.partitions_for(topic)
        start = time.monotonic()
        sent = 0
        if mode == "send":

            def done(t0: float) -> Any:
                def cb(f: Any) -> None:
                    if f.exception() is None:
                        took = time.monotonic() - t0
                        progress.observe(took)
                        with lock:
                            lat.append(took)

                return cb

            # The latency of every `stride`-th record (at most LATENCY_SAMPLES of them, as
            # Kafka's producer-perf-test samples at most 500,000): a callback per record would
            # measure the callbacks more than the producer.
            stride = max(1, num // LATENCY_SAMPLES)
            futs = []
            while sent < num:
                if sent % stride:
                    futs.append(producer.send(topic, value, partition=partition))
                else:
                    t0 = time.monotonic()
                    f = producer.send(topic, value, partition=partition)
                    f.add_done_callback(done(t0))
                    futs.append(f)
                sent += 1
                progress.count = sent
                if throughput:
                    _pace(start, sent, throughput)
            producer.flush()
            errors = sum(1 for f in futs if f.exception() is not None)
            weights = [1] * len(lat)
        else:
            many: list[Future[int]] = []
            while sent < num:
                n = min(chunk, num - sent)
                if throughput:
                    n = min(n, max(1, int(throughput / 200)))  # small steps keep the pace smooth
                t0 = time.monotonic()
                fm = producer.send_many(topic, [value] * n, partition=partition)

                def cb(f: Any, t0: float = t0, n: int = n) -> None:
                    if f.exception() is None:
                        took = time.monotonic() - t0
                        progress.observe(took)
                        with lock:
                            lat.append(took)
                            weights.append(n)

                fm.add_done_callback(cb)
                many.append(fm)
                sent += n
                progress.count = sent
                if throughput:
                    _pace(start, sent, throughput)
            producer.flush()
            errors = sum(1 for fm in many if fm.exception() is not None)
        elapsed = time.monotonic() - start
    progress.close()
    with lock:
        pct = percentiles(lat, weights)
    return {
        "role": "produce",
        "mode": mode,
        "records": num,
        "record_size": size,
        "errors": errors,
        "seconds": round(elapsed, 3),
        "records_per_s": round(num / elapsed, 1),
        "mb_per_s": round(num * size / elapsed / 1e6, 2),
        "latency": pct,
        "latency_samples": sum(weights),
    }


def _pace(start: float, sent: int, rate: float) -> None:
    ahead = sent / rate - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)


def run_consume(
    cfg: dict[str, Any], topic: str, num: int, timeout_ms: int = 30_000
) -> ConsumeSummary:
    from client import Consumer

    cfg = {"auto.offset.reset": "earliest", **cfg}
    progress = Progress("consume", num, enabled=on_terminal(sys.stderr))
    count = 0
    nbytes = 0
    with Consumer(cfg) as consumer:
        consumer.subscribe([topic])
        start = time.monotonic()
        last = start
        while count < num:
            records = consumer.poll(timeout_ms=200)
            now = time.monotonic()
            if not records:
                if (now - last) * 1000 > timeout_ms:
                    break
                continue
            last = now
            count += len(records)
            nbytes += sum(len(r.value or b"") for r in records)
            progress.count = count
        elapsed = time.monotonic() - start
    progress.close()
    return {
        "role": "consume",
        "records": count,
        "seconds": round(elapsed, 3),
        "records_per_s": round(count / elapsed, 1) if elapsed else 0.0,
        "mb_per_s": round(nbytes / elapsed / 1e6, 2) if elapsed else 0.0,
    }


@reports_errors
def _produce(args: argparse.Namespace) -> int:
    cfg = client_config(args, acks=args.acks)
    print(
        json.dumps(
            run_produce(
                cfg,
                args.topic,
                args.num_records,
                args.record_size,
                args.mode,
                args.chunk,
                args.throughput,
                args.partition,
            )
        )
    )
    return 0


@reports_errors
def _consume(args: argparse.Namespace) -> int:
    res = run_consume(client_config(args), args.topic, args.num_records, args.timeout_ms)
    print(json.dumps(res))
    return 0 if res["records"] >= args.num_records else 1
