"""Benchmark the broker's request pipeline; prints one JSON object.

    python scripts/bench/server_bench.py [--duration 3] [--connections 1,16]
        [--network-threads 3] [--io-threads 8] [--starts 3] [--metrics]

Measures, against a real `gregor server --port 0` subprocess (so client and broker do not share
a GIL):
- time_to_ready_s: from spawn to the "listening on" line (median of --starts runs; target <= 1 s)
- idle_rss_mb: the broker's resident memory once ready, before any request (target <= 60 MB)
- api_versions_rps: ApiVersions round trips per second, one request outstanding per connection,
  for each connection count (an asyncio/uvloop client in this process)
- api_versions_per_request: the broker's CPU (us) and context switches (all its threads) per
  round trip, for each connection count: what the request path's hand-offs cost
- rss_after_load_mb
- purgatory: in-process DelayedOperation throughput: watch + complete by key (the acks=all
  path), and expirations through the timing wheel (ops/s)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from _proc import context_switches, cpu_seconds
from _server import start_server, stop_server


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


async def _one_connection(port: int, stop_at: float, counter: list[int]) -> None:
    from client.protocol.framing import FrameDecoder, encode_request

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    decoder = FrameDecoder()
    corr = 0
    n = 0
    try:
        while time.monotonic() < stop_at:
            corr += 1
            writer.write(encode_request(18, 0, corr, "bench", {}))
            frames: list[bytes] = []
            while not frames:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("broker closed the connection")
                frames = decoder.feed(data)
            n += 1
    finally:
        counter[0] += n
        writer.close()


async def _round_trips(port: int, connections: int, duration: float) -> float:
    counter = [0]
    t0 = time.monotonic()
    await asyncio.gather(
        *(_one_connection(port, t0 + duration, counter) for _ in range(connections))
    )
    return counter[0] / (time.monotonic() - t0)


def purgatory_bench(n: int = 50_000) -> dict:
    from broker.purgatory import DelayedOperation, Purgatory, SystemTimer

    class Op(DelayedOperation):
        ready = False

        def try_complete(self) -> bool:
            return self.force_complete() if self.ready else False

        def on_complete(self) -> None:
            pass

    timer = SystemTimer("bench")
    try:
        p = Purgatory("bench", timer)
        ops = [Op(30_000) for _ in range(n)]
        t0 = time.perf_counter()
        for i, op in enumerate(ops):
            p.try_complete_else_watch(op, [i % 100])
        watch_s = time.perf_counter() - t0
        for op in ops:
            op.ready = True
        t0 = time.perf_counter()
        for key in range(100):
            p.check_and_complete(key)
        complete_s = time.perf_counter() - t0
        assert all(op.is_completed for op in ops) and timer.size == 0

        expiring = [Op(i % 50) for i in range(n)]
        t0 = time.perf_counter()
        for op in expiring:
            timer.add(op)
        while timer.size:
            time.sleep(0.005)
        expire_s = time.perf_counter() - t0
    finally:
        timer.shutdown()
    return {
        "ops": n,
        "watch_ops_per_s": round(n / watch_s),
        "complete_ops_per_s": round(n / complete_s),
        "add_and_expire_ops_per_s": round(n / expire_s),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--connections", default="1,16")
    ap.add_argument("--network-threads", type=int, default=None)
    ap.add_argument("--io-threads", type=int, default=None)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument(
        "--metrics", action="store_true", help="serve metrics.listener (loopback, free port)"
    )
    args = ap.parse_args()
    extra: list[str] = []
    if args.network_threads:
        extra += ["--override", f"num.network.threads={args.network_threads}"]
    if args.io_threads:
        extra += ["--override", f"num.io.threads={args.io_threads}"]
    if args.metrics:
        extra += ["--override", "metrics.listener=http://127.0.0.1:0"]

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    with tempfile.TemporaryDirectory(prefix="gregor-bench-") as tmp:
        ready_times = []
        for i in range(max(0, args.starts - 1)):
            proc, _, _, ready_s = start_server(str(Path(tmp) / f"warm{i}"), extra)
            ready_times.append(ready_s)
            stop_server(proc)
        proc, _, port, ready_s = start_server(str(Path(tmp) / "data"), extra)
        ready_times.append(ready_s)
        try:
            idle = rss_mb(proc.pid)
            rps = {}
            per_request = {}
            for n in (int(x) for x in args.connections.split(",")):
                cpu0, sw0 = cpu_seconds(proc.pid), context_switches(proc.pid)
                t0 = time.monotonic()
                rate = asyncio.run(_round_trips(port, n, args.duration))
                requests = rate * (time.monotonic() - t0)
                cpu1, sw1 = cpu_seconds(proc.pid), context_switches(proc.pid)
                rps[str(n)] = round(rate)
                per_request[str(n)] = {
                    "broker_cpu_us": round((cpu1 - cpu0) * 1e6 / requests, 1),
                    "broker_context_switches": round((sw1 - sw0) / requests, 2),
                }
            after = rss_mb(proc.pid)
        finally:
            stop_server(proc)
    print(
        json.dumps(
            {
                "bench": "server",
                "time_to_ready_s": round(statistics.median(ready_times), 3),
                "time_to_ready_all_s": [round(t, 3) for t in ready_times],
                "idle_rss_mb": round(idle, 1),
                "api_versions_rps": rps,
                # the broker's CPU and context switches (all its threads) per round trip
                "api_versions_per_request": per_request,
                "rss_after_load_mb": round(after, 1),
                "purgatory": purgatory_bench(),
                "duration_s": args.duration,
                "network_threads": args.network_threads,
                "io_threads": args.io_threads,
                "cpus": os.cpu_count(),
                "load_avg_1m": os.getloadavg()[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
