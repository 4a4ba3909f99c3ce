#!/usr/bin/env python
"""Many partitions on one broker (or on 3 brokers at replication factor 3, --brokers 3): a real
`gregor server` subprocess per partition count; prints one JSON object.

For each count (default 1,000 / 5,000 / 10,000, in topics of --per-topic partitions) on a fresh
data dir:
  - create time per topic (first / median / last, seconds; Admin.create_topic, which answers
    once the controller committed it) and the time until the broker leads every partition;
  - the server's RSS (MiB), open descriptors and idle CPU (% of one core over --idle-seconds);
  - list_topics time (a Metadata request for every topic, through Admin);
  - produce rate (records/s, 100-byte values, acks=all, fsync-before-ack on) from one producer:
    --one-partition-records (default 5x --records) to one partition, then --records
    round-robin over every partition, once as each partition's first write, then
    --round-robin-passes times (default 3) in the steady state, and round_robin_vs_one, the
    median steady pass's rate over the one-partition rate (every pass's rate beside it). The
    one-partition phase is longer than the round-robin ones because it is ~3x faster: with
    --records alone (200,000) it lasted 0.4 s on a quiet machine (2026-11-27), the producer's
    start and its last linger a visible share of the window.
    1,000,000 records (~116 MB with the accumulator's accounting) also outrun buffer.memory
    (32 MiB), so the phase includes send() waiting for space: a sustained rate;
  - restart time until the ready line: after SIGTERM (clean) and after SIGKILL (unclean).
And in process: a metadata image of --image-partitions partitions (default 100,000) built one
100-partition topic delta at a time (first / median / last delta), snapshotted, loaded back.

--brokers 3: a fresh cluster of 3 `gregor controller` and 3 `gregor broker` processes per count
instead, on loopback, the same figures per node and a broker restarted until it is back in
every ISR (scripts/bench/_partitions_cluster.py).

    .venv/bin/python scripts/bench/partitions_bench.py [--counts 1000,5000,10000]
        [--per-topic 100] [--records 200000] [--one-partition-records N]
        [--round-robin-passes 3]
        [--data-dir DIR] [--brokers 1|3]
        [--restart-timeout 600]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _partitions_cluster import run_count_cluster  # noqa: E402
from _partitions_common import (  # noqa: E402
    create_stats,
    idle_cpu_percent,
    list_and_produce,
    proc_stats,
)
from _server import READY, Server, gregor_command, stop_server  # noqa: E402


def start_server(data_dir: str) -> Server:
    """`gregor server` on `data_dir`, its stderr appended to `data_dir`.stderr (kept when it
    fails to start, whose tail is then shown)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    log_path = data_dir + ".stderr"
    Path(os.path.abspath(data_dir)).parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(log_path, "ab") as err:
        proc = subprocess.Popen(
            [*gregor_command(), "server", "--port", "0", "--data-dir", data_dir],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
            text=True,
            start_new_session=True,
        )
    assert proc.stdout is not None
    while time.monotonic() - t0 < 300:
        line = proc.stdout.readline()
        if not line:
            break
        m = READY.search(line)
        if m:
            port = int(m["port"])
            return Server(proc, f"127.0.0.1:{port}", port, time.monotonic() - t0)
    stop_server(proc)
    with open(log_path, errors="replace") as f:
        tail = f.read()[-3000:]
    raise SystemExit(f"gregor server not ready (exit {proc.poll()}):\n{tail}")


def _all_led(bootstrap: str, topics: list[str], per_topic: int, timeout: float) -> float:
    """Seconds until Metadata shows a leader for every partition of `topics`."""
    from client import Admin

    t0 = time.monotonic()
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        while time.monotonic() - t0 < timeout:
            try:
                if all(
                    len(d.partitions) == per_topic and all(p.leader >= 0 for p in d.partitions)
                    for d in (admin.describe_topic(t) for t in topics)
                ):
                    return time.monotonic() - t0
            except Exception:  # a topic not visible yet: ask again
                pass
            time.sleep(0.05)
    raise SystemExit(f"not every partition led within {timeout} s")


def metadata_image(partitions: int, per_topic: int) -> dict:
    """In process: build an image of `partitions` partitions (RF 3 over 3 brokers) one topic
    delta at a time, then snapshot it and load the snapshot back."""
    from controller.metadata.delta import MetadataDelta
    from controller.metadata.image import MetadataImage
    from controller.metadata.records import Partition, RegisterBroker, Topic
    from controller.metadata.snapshot import load_snapshot, snapshot_bytes

    delta = MetadataDelta(MetadataImage.EMPTY)
    offset = 0
    for b in (1, 2, 3):
        delta.replay(RegisterBroker(b, b, "h", 9000 + b, None, f"i{b}", False), offset)
        offset += 1
    image = delta.apply()
    times = []
    for t in range(max(1, partitions // per_topic)):
        t0 = time.perf_counter()
        delta = MetadataDelta(image)
        tid = t.to_bytes(16, "big")
        delta.replay(Topic(f"t{t:06d}", tid), offset)
        offset += 1
        for p in range(per_topic):
            delta.replay(Partition(tid, p, (1, 2, 3), (1, 2, 3), 1, 0, 0), offset)
            offset += 1
        image = delta.apply()
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    data = snapshot_bytes(image)
    t1 = time.perf_counter()
    loaded = load_snapshot(data)
    t2 = time.perf_counter()
    assert loaded.same_state(image)
    return {
        "partitions": partitions,
        "topic_delta_ms": {
            "first": round(times[0] * 1000, 3),
            "median": round(statistics.median(times) * 1000, 3),
            "last": round(times[-1] * 1000, 3),
        },
        "snapshot_bytes": len(data),
        "snapshot_write_s": round(t1 - t0, 3),
        "snapshot_load_s": round(t2 - t1, 3),
    }


def run_count(count: int, args: argparse.Namespace, base: str) -> dict:
    from client import Admin

    per_topic = args.per_topic
    topics = [f"p{i:05d}" for i in range(max(1, count // per_topic))]
    data = str(Path(base) / f"data-{count}")
    out: dict = {"partitions": len(topics) * per_topic, "topics": len(topics)}
    server: Server | None = start_server(data)
    try:
        assert server is not None
        times = []
        with Admin({"bootstrap.servers": server.bootstrap}) as admin:
            for name in topics:
                t0 = time.monotonic()
                admin.create_topic(name, partitions=per_topic)
                times.append(time.monotonic() - t0)
        out["create_s"] = create_stats(times)
        out["all_led_after_create_s"] = round(_all_led(server.bootstrap, topics, per_topic, 300), 2)
        out["idle"] = proc_stats(server.proc.pid)
        out["idle"]["cpu_percent"] = idle_cpu_percent([server.proc.pid], args.idle_seconds)[0]
        out.update(
            list_and_produce(
                server.bootstrap,
                topics,
                per_topic,
                args.records,
                args.one_records,
                args.round_robin_passes,
            )
        )
        out["after_produce"] = proc_stats(server.proc.pid)
        stop_server(server.proc)  # clean stop
        server = None
        server = start_server(data)
        out["restart_clean_ready_s"] = round(server.ready_s, 2)
        out["after_restart"] = proc_stats(server.proc.pid)
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait(30)
        server.proc.stdout.close() if server.proc.stdout else None
        server = None
        server = start_server(data)
        out["restart_unclean_ready_s"] = round(server.ready_s, 2)
        out["all_led_after_unclean_restart_s"] = round(
            _all_led(server.bootstrap, topics[-3:], per_topic, 120), 2
        )
    finally:
        if server is not None:
            stop_server(server.proc)
        shutil.rmtree(data, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="1000,5000,10000")
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument(
        "--one-partition-records",
        type=int,
        default=None,
        help="records of the one-partition phase (default: 5x --records)",
    )
    ap.add_argument(
        "--round-robin-passes",
        type=int,
        default=3,
        help="steady round-robin passes after the first; the figure is their median",
    )
    ap.add_argument("--idle-seconds", type=float, default=5.0)
    ap.add_argument("--data-dir", help="where the servers keep data (default: a temp dir)")
    ap.add_argument(
        "--image-partitions",
        type=int,
        default=100_000,
        help="partitions of the in-process metadata image timed (0: skip)",
    )
    ap.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="1: one combined server; 3: 3 controllers and 3 brokers, replication factor 3",
    )
    ap.add_argument(
        "--restart-timeout",
        type=float,
        default=600.0,
        help="--brokers 3: seconds to wait for a broker to stop, start, leave or rejoin the ISRs",
    )
    args = ap.parse_args()
    args.one_records = args.one_partition_records or 5 * args.records
    if args.brokers not in (1, 3):
        ap.error(f"--brokers {args.brokers}: 1 (one combined server) or 3 (a cluster) only")
    base = tempfile.mkdtemp(prefix="gregor-partitions-bench-", dir=args.data_dir)
    result: dict = {
        **({"brokers": args.brokers, "cpus": os.cpu_count()} if args.brokers > 1 else {}),
        "load_before": os.getloadavg()[0],
        "nofile_limit": __import__("resource").getrlimit(__import__("resource").RLIMIT_NOFILE)[0],
        "runs": [],
    }
    if args.image_partitions:
        result["metadata_image"] = metadata_image(args.image_partitions, args.per_topic)
    try:
        for count in (int(c) for c in args.counts.split(",") if c):
            run = (run_count if args.brokers == 1 else run_count_cluster)(count, args, base)
            result["runs"].append(run)
            print(json.dumps(run), file=sys.stderr, flush=True)  # progress
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result["load_after"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
