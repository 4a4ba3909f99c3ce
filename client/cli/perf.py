"""`gregor perf produce|consume`: throughput and latency, printed as one JSON object.

    gregor perf produce --topic t --num-records 1000000 --record-size 100 [--acks all]
                        [--throughput R] [--mode bulk|send] [-X batch.size=1048576]
    gregor perf consume --topic t --num-records 1000000

produce: `bulk` (default) queues --chunk records per send_many() call and measures each
chunk's latency (queued -> acknowledged), counted once per record; `send` uses one future per
record (Kafka's ProducerPerformance). --throughput caps records/s (0 = unlimited). A progress
line goes to stderr once a second, only when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from client.cli.common import add_bootstrap, client_config, reports_errors


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("perf", help="producer/consumer throughput and latency (JSON)")
    sub = p.add_subparsers(dest="perf_command", metavar="ROLE", required=True)
    pp = sub.add_parser("produce", help="producer throughput and latency")
    pp.add_argument("--topic", required=True)
    pp.add_argument("--num-records", type=int, required=True)
    pp.add_argument("--record-size", type=int, default=100)
    pp.add_argument("--acks", choices=["all", "-1", "0", "1"], default="all")
    pp.add_argument("--throughput", type=float, default=0, help="records/s cap (0 = none)")
    pp.add_argument("--mode", choices=["bulk", "send"], default="bulk")
    pp.add_argument("--chunk", type=int, default=2000, help="records per send_many (bulk)")
    pp.add_argument("--partition", type=int, default=None)
    add_bootstrap(pp)
    pp.set_defaults(func=_produce)
    pc = sub.add_parser("consume", help="consumer throughput")
    pc.add_argument("--topic", required=True)
    pc.add_argument("--num-records", type=int, required=True)
    pc.add_argument("--timeout-ms", type=int, default=30_000, help="give up after this long idle")
    add_bootstrap(pc)
    pc.set_defaults(func=_consume)


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


class _Progress:
    """Prints `label: N records, R rec/s` once a second to a TTY stderr; silent otherwise."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.count = label, total, 0
        self._stop = threading.Event()
        self._tty = sys.stderr.isatty()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True, name="perf-progress")
        if self._tty:
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            el = time.monotonic() - self._start
            sys.stderr.write(
                f"\r{self.label}: {self.count}/{self.total} records, {self.count / el:,.0f} rec/s  "
            )
            sys.stderr.flush()

    def close(self) -> None:
        self._stop.set()
        if self._tty:
            self._thread.join()
            sys.stderr.write("\n")


def run_produce(
    cfg: dict[str, Any],
    topic: str,
    num: int,
    size: int,
    mode: str = "bulk",
    chunk: int = 2000,
    throughput: float = 0,
    partition: int | None = None,
) -> dict:
    """The producer benchmark; returns the JSON summary (also used by scripts/bench)."""
    from client import Producer

    value = b"x" * size
    lat: list[float] = []
    weights: list[int] = []
    lock = threading.Lock()
    progress = _Progress("produce", num)
    with Producer(cfg) as producer:
        producer.partitions_for(topic)
        start = time.monotonic()
        sent = 0
        if mode == "send":

            def done(t0: float) -> Any:
                def cb(f: Any) -> None:
                    if f.exception() is None:
                        with lock:
                            lat.append(time.monotonic() - t0)

                return cb

            futs = []
            while sent < num:
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
            futs = []
            while sent < num:
                n = min(chunk, num - sent)
                if throughput:
                    n = min(n, max(1, int(throughput / 200)))  # small steps keep the pace smooth
                t0 = time.monotonic()
                f = producer.send_many(topic, [value] * n, partition=partition)

                def cb(f: Any, t0: float = t0, n: int = n) -> None:
                    if f.exception() is None:
                        with lock:
                            lat.append(time.monotonic() - t0)
                            weights.append(n)

                f.add_done_callback(cb)
                futs.append(f)
                sent += n
                progress.count = sent
                if throughput:
                    _pace(start, sent, throughput)
            producer.flush()
            errors = sum(1 for f in futs if f.exception() is not None)
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
    }


def _pace(start: float, sent: int, rate: float) -> None:
    ahead = sent / rate - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)


def run_consume(cfg: dict[str, Any], topic: str, num: int, timeout_ms: int = 30_000) -> dict:
    from client import Consumer

    cfg = {"auto.offset.reset": "earliest", **cfg}
    progress = _Progress("consume", num)
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
