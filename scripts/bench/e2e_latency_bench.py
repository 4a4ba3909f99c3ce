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

--fsync off starts the brokers with `log.flush.on.ack: false` (Kafka's page-cache behaviour:
an acks=all write is durable by its replicas only, issue 28's "acks-only"; decision 191).
"bare_fdatasync_before" is a bare append + fdatasync loop in the same directory just before
the cluster starts (1,000 of 500 bytes, 1 ms apart), the disk's share of any tail.
"iowait_during" is the machine's iowait while the producer sent, read off /proc/stat every
50 ms: its share of the CPU time, and its stalls, runs of 50 ms or more in which the CPUs
mostly sat waiting on the disk (when, in seconds from the first record, and how long). A
virtual disk whose flush stalls stops every replica's fsync at once, and every record sent
meanwhile waits for it: a tail there is the disk's, not the brokers' (docs/performance.md).
--split also times each record's acknowledgement at the producer (a callback per record) and
reports the two parts of the latency, send -> ack and ack -> poll, overall and for the records
at or above the p99: whether a tail is the producer's and the brokers' or the consumer's.
--warmup S first runs a producer process for S seconds whose records are not counted (a
cluster past its first seconds, against a new one).
--oversleep also runs a process beside the cluster while the producer sends that sleeps 1 ms
at a time and records how late each wake-up came ("oversleep_during": p50/p99/max and each
second's max, ms): how long this machine's scheduler keeps a thread that became runnable
waiting for a CPU at the load the cluster makes. A record's way from send() to poll() takes
about ten such wake-ups (producer, the leader's network and I/O threads, both followers, the
leader's flusher, the consumer), so a tail there is a floor under the end-to-end tail.
"slowest" lists the slowest records after the warm-up (latency, and when each was sent, in
seconds from the first record), "per_second" the p99 and max of each second of sending: a
tail that sits in one second, or in the first ones, shows there.

    .venv/bin/python scripts/bench/e2e_latency_bench.py [--rate 5000] [--seconds 10]
        [--acks all|1] [--linger-ms 0] [--fsync on|off] [--warmup S] [--split] [--oversleep]
        [--root DIR]

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

from _proc import IowaitSampler, context_switches, cpu_seconds, iowait_stalls
from _stats import percentile

TOPIC = "e2e"


def produce(
    bootstrap: str, rate: float, seconds: float, acks: str, split: str = "", linger_ms: float = 0
) -> None:
    """The producer process: paced sends, each value carrying its send time. With `split` (a
    file name), each record's delivery time too: the file gets one "send_ns ack_ns" line per
    record (the time its acknowledgement reached the producer's callback)."""
    from client import Producer

    pad = b"x" * 80
    acked: list[tuple[int, int]] = []
    with Producer(bootstrap_servers=bootstrap, acks=acks, linger_ms=linger_ms) as p:
        start = time.monotonic()
        n = 0
        while True:
            now = time.monotonic()
            if now - start >= seconds:
                break
            due = start + n / rate
            if now < due:
                time.sleep(due - now)
            sent = time.time_ns()
            future = p.send(TOPIC, b"%019d" % sent + pad, partition=0)
            if split:
                future.add_done_callback(lambda _f, s=sent: acked.append((s, time.time_ns())))
            n += 1
        p.flush(60)
    if split:
        Path(split).write_text("".join(f"{s} {a}\n" for s, a in acked))
    print(json.dumps({"sent": n}), flush=True)


def bare_fdatasync(directory: Path, n: int = 1000, size: int = 500) -> dict:
    """p50/p99/max ms of n appends of `size` bytes to a new file, each fdatasynced, 1 ms apart
    (about the brokers' spacing): what this disk gives the brokers' fsyncs right now."""
    fd = os.open(directory / "fsync-probe", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    took = []
    try:
        for _ in range(n):
            os.write(fd, b"x" * size)
            t = time.perf_counter()
            os.fdatasync(fd)
            took.append((time.perf_counter() - t) * 1e3)
            time.sleep(0.001)
    finally:
        os.close(fd)
        (directory / "fsync-probe").unlink()
    took.sort()
    return {q: round(percentile(took, x), 3) for q, x in (("p50_ms", 0.5), ("p99_ms", 0.99))} | {
        "max_ms": round(took[-1], 3)
    }


def oversleep(seconds: float) -> None:
    """The --oversleep child: sleep 1 ms at a time for `seconds`, then print one JSON line of
    how late each wake-up was (oversleep_summary)."""
    start = time.monotonic()
    late: list[tuple[float, float]] = []  # (seconds since start, ms late)
    while True:
        t = time.monotonic()
        if t - start >= seconds:
            break
        time.sleep(0.001)
        late.append((t - start, (time.monotonic() - t - 0.001) * 1e3))
    print(json.dumps(oversleep_summary(late)), flush=True)


def oversleep_summary(late: list[tuple[float, float]]) -> dict:
    """p50/p99/max of the wake-ups' lateness (ms), how many were over 5 and 20 ms, and the
    max of each second (`late`: (seconds since the start, ms late) per wake-up)."""
    if not late:
        return {}
    xs = sorted(ms for _t, ms in late)
    per_second: dict[int, float] = {}
    for t, ms in late:
        sec = int(t)
        per_second[sec] = max(per_second.get(sec, ms), ms)
    return {
        "wakeups": len(xs),
        "p50_ms": round(percentile(xs, 0.5), 3),
        "p99_ms": round(percentile(xs, 0.99), 3),
        "max_ms": round(xs[-1], 2),
        "over_5ms": sum(1 for x in xs if x > 5),
        "over_20ms": sum(1 for x in xs if x > 20),
        "per_second_max_ms": [round(per_second[s], 2) for s in sorted(per_second)],
    }


def split_latencies(acks_file: Path, latencies: list[float], sent_ns: list[int]) -> dict:
    """Each record's latency in two parts: send -> the producer's ack, and the ack -> the
    consumer's poll() (negative: the consumer had it before the producer heard the ack); for
    the slowest end-to-end records (above the p99), the same two parts."""
    acked = {}
    for line in acks_file.read_text().splitlines():
        s, a = line.split()
        acked[int(s)] = int(a)
    to_ack, after_ack, tail = [], [], []
    p99 = percentile(sorted(latencies), 0.99) if latencies else 0.0
    for lat, s in zip(latencies, sent_ns, strict=False):
        a = acked.get(s)
        if a is None:
            continue
        part1 = (a - s) / 1e6
        to_ack.append(part1)
        after_ack.append(lat - part1)
        if lat >= p99:
            tail.append((part1, lat - part1))

    def summary(xs: list[float]) -> dict:
        xs = sorted(xs)
        if not xs:
            return {}
        return {
            "p50_ms": round(percentile(xs, 0.5), 2),
            "p99_ms": round(percentile(xs, 0.99), 2),
            "max_ms": round(xs[-1], 2),
        }

    return {
        "records": len(to_ack),
        "send_to_ack": summary(to_ack),
        "ack_to_poll": summary(after_ack),
        "tail_send_to_ack": summary([t[0] for t in tail]),  # records at or above the p99
        "tail_ack_to_poll": summary([t[1] for t in tail]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=5000.0, help="records/s the producer sends")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long it sends")
    ap.add_argument("--acks", choices=["all", "1"], default="all", help="the producer's acks")
    ap.add_argument(
        "--linger-ms",
        type=float,
        default=0.0,
        help="the producer's linger.ms (default 0: each record goes as soon as the leader is free)",
    )
    ap.add_argument(
        "--fsync",
        choices=["on", "off"],
        default="on",
        help="off: the brokers run with log.flush.on.ack false (acks-only)",
    )
    ap.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        help="seconds of a first producer (same rate) whose records are not counted",
    )
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2]),
                    help="the checkout whose brokers and client run (default: this one)")  # fmt: skip
    ap.add_argument(
        "--split",
        action="store_true",
        help="also time each record's acknowledgement at the producer: splits the latency into"
        " send -> ack and ack -> poll (adds a callback per record to the producer)",
    )
    ap.add_argument(
        "--oversleep",
        action="store_true",
        help="also run a process that times 1 ms sleeps while the producer sends: the"
        " scheduler's wake-up delays at the cluster's load",
    )
    ap.add_argument("--oversleep-child", type=float, help=argparse.SUPPRESS)  # (child mode)
    ap.add_argument("--split-file", help=argparse.SUPPRESS)  # (child mode: where acks go)
    ap.add_argument("--produce", metavar="BOOTSTRAP", help=argparse.SUPPRESS)  # (child mode)
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    sys.path[:0] = [root, str(Path(root) / "scripts" / "bench")]
    os.environ["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    os.chdir(root)  # (the nodes run `python -m broker.cli`, which imports from the cwd first)
    if args.oversleep_child is not None:
        oversleep(args.oversleep_child)
        return 0
    if args.produce:
        produce(
            args.produce, args.rate, args.seconds, args.acks, args.split_file or "", args.linger_ms
        )
        return 0

    from _cluster import start_cluster, stop_nodes  # (the tree's own, whatever its layout)

    from client import Admin, Consumer, TopicPartition

    tmp = Path(tempfile.mkdtemp(prefix="gregor-e2e-"))
    disk_before = bare_fdatasync(tmp)

    def edit(node, text: str) -> str:
        return text + "log.flush.on.ack: false\n" if node.role == "broker" else text

    # (edit only when needed: --root may name a tree whose start_cluster has no edit)
    ctrl, brokers = start_cluster(tmp, 3, 3, **({"edit": edit} if args.fsync == "off" else {}))
    bootstrap = ",".join(n.address for n in brokers.values())
    try:
        with Admin(bootstrap_servers=bootstrap) as admin:
            admin.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        latencies: list[float] = []
        sent_ns: list[int] = []
        polls = [0, 0]  # poll() calls that returned nothing, and records
        stop = threading.Event()

        def consume() -> None:
            with Consumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=500) as c:
                tp = TopicPartition(TOPIC, 0)
                c.assign([tp])
                c.seek_to_beginning(tp)
                while not stop.is_set():
                    got = c.poll(timeout_ms=200)
                    polls[bool(got)] += 1
                    for r in got:
                        now = time.time_ns()
                        t = int(r.value[:19])
                        latencies.append((now - t) / 1e6)
                        sent_ns.append(t)

        reader = threading.Thread(target=consume)
        reader.start()

        acks_file = tmp / "acks.txt"

        def producer(seconds: float, split: bool = False) -> int:
            child = subprocess.run(
                [sys.executable, __file__, "--produce", bootstrap, "--rate", str(args.rate),
                 "--seconds", str(seconds), "--acks", args.acks, "--root", root,
                 "--linger-ms", str(args.linger_ms),
                 *(["--split-file", str(acks_file)] if split else [])],
                capture_output=True, text=True, timeout=seconds + 120,
            )  # fmt: skip
            if child.returncode != 0:
                raise RuntimeError(f"producer failed: {child.stderr[-2000:]}")
            return int(json.loads(child.stdout.strip().splitlines()[-1])["sent"])

        skip = 0  # records of the --warmup producer, not counted
        if args.warmup > 0:
            skip = producer(args.warmup)
            deadline = time.monotonic() + 30
            while len(latencies) < skip and time.monotonic() < deadline:
                time.sleep(0.05)
            skip = len(latencies)
        pids = {n.node_id: n.proc.pid for n in brokers.values() if n.proc is not None}
        cpu0 = {i: cpu_seconds(pid) for i, pid in pids.items()}
        switches0 = {i: context_switches(pid, voluntary_only=True) for i, pid in pids.items()}
        own0 = time.process_time()
        t0 = time.time()
        prober = (
            subprocess.Popen(
                [sys.executable, __file__, "--oversleep-child", str(args.seconds), "--root", root],
                stdout=subprocess.PIPE,
                text=True,
            )
            if args.oversleep
            else None
        )
        sampler = IowaitSampler().start()
        try:
            sent = skip + producer(args.seconds, args.split)
        finally:
            disk_waits = iowait_stalls(sampler.stop())
        broker_cpu = {i: round(cpu_seconds(pid) - cpu0[i], 2) for i, pid in pids.items()}
        broker_switches = {
            i: context_switches(pid, voluntary_only=True) - switches0[i] for i, pid in pids.items()
        }
        consumer_cpu = round(time.process_time() - own0, 2)
        deadline = time.monotonic() + 30
        while len(latencies) < sent and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        reader.join(30)
        warm = skip + int(args.rate)  # after ~1 s of warm-up
        steady = sorted(latencies[warm:])
        first = sent_ns[skip] if len(sent_ns) > skip else 0
        by_second: dict[int, list[float]] = {}
        for lat, t in zip(latencies[skip:], sent_ns[skip:], strict=False):
            by_second.setdefault((t - first) // 1_000_000_000, []).append(lat)
        slowest = sorted(range(warm, len(latencies)), key=latencies.__getitem__)[-10:]
        out = {
            "root": root,
            "rate": args.rate,
            "seconds": args.seconds,
            "acks": args.acks,
            "linger_ms": args.linger_ms,
            "sent": sent - skip,
            "received": len(latencies) - skip,
            "warmup_records": skip,
            "p50_ms": round(percentile(steady, 0.50), 2),
            "p99_ms": round(percentile(steady, 0.99), 2),
            "p999_ms": round(percentile(steady, 0.999), 2),
            "max_ms": round(steady[-1], 2),
            "later_than_fetch_max_wait": sum(1 for x in steady if x >= 500.0),
            "fsync": args.fsync,
            "bare_fdatasync_before": disk_before,  # the disk, just before the cluster started
            # the whole machine waiting on the disk while the producer sent (stalls: when, in
            # seconds from the first record, and how long)
            "iowait_during": {
                "iowait_share": disk_waits["iowait_share"],
                "longest_ms": disk_waits["longest_ms"],
                "stalls": [
                    {"at_s": round((w["at_ns"] - first) / 1e9, 2), "ms": w["ms"]}
                    for w in disk_waits["stalls"]
                ],
            },
            "broker_cpu_s": broker_cpu,  # each broker's, while the producer ran
            "broker_voluntary_switches": broker_switches,  # each broker's, all its threads
            "consumer_cpu_s": consumer_cpu,
            "polls_with_records": polls[
                1
            ],  # the consumer's wake-ups that brought records  # this process's (the consumer thread's, mostly)
            "slowest": [
                {"ms": round(latencies[i], 2), "sent_s": round((sent_ns[i] - first) / 1e9, 4)}
                for i in reversed(slowest)
            ],
            "per_second": [
                {
                    "s": sec,
                    "p99_ms": round(percentile(sorted(xs), 0.99), 2),
                    "max_ms": round(max(xs), 2),
                }
                for sec, xs in sorted(by_second.items())
            ],
            "load_avg": round(os.getloadavg()[0], 2),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
        }
        if args.split:
            out["split"] = split_latencies(acks_file, latencies[warm:], sent_ns[warm:])
        if prober is not None:
            got, _ = prober.communicate(timeout=60)
            out["oversleep_during"] = json.loads(got.strip().splitlines()[-1])
        print(json.dumps(out))
    finally:
        stop_nodes(list(brokers.values()))
        stop_nodes(ctrl)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
