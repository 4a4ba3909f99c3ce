#!/usr/bin/env python
"""One producer, one partition against round-robin over many: what each costs per record.

Starts one `gregor server` (from the tree given by --root, default this one), creates
--partitions partitions (topics of 100), writes every partition once, then --repeat times:
100-byte records, acks=all, linger.ms 5 (--linger-ms), one `send()` per record (a future each),
first all to one partition, then round-robin over all. For each run it prints the rate, the
records per batch the producer made, and the CPU seconds per record of the producer's process
and of the server (user + system, from getrusage and /proc), and how the time splits between the
send() loop and the flush() after it (the last requests' round trips), and how busy the
machine's CPUs were in each of the two (machine_busy, 0..1: near 1 the run is CPU-bound, and
what each process spends per record decides the rate) and the whole machine's CPU per record
(machine_cpu_us_per_record: every process and the kernel's threads), and the produce requests:
the most any leader got (the rounds of replication the run took), the first request's time,
partitions, records per partition and round trip, the median round trip, and how many went after
the send() loop (request_rounds); the send() loop's thread's CPU and run-queue wait during the
loop (send_loop_thread_s) and the producer's cyclic GC collections per generation with their CPU
(producer_gc). CPU per record is steadier than the rate on a shared machine: compare two trees
with --root (e.g. a `git worktree` of an older commit, with the C extensions of client/records
copied or built there).

--brokers 3: a cluster of 3 controllers and 3 brokers instead (scripts/bench/_cluster.py),
topics of replication factor 3 and min.insync.replicas 2, as partitions_bench.py --brokers 3
measures the spread; the server figures are then the three brokers' summed CPU per record and
per batch, and each broker's read and write syscalls per 1,000 records (/proc/PID/io).

    .venv/bin/python scripts/bench/roundrobin_bench.py [--partitions 5000] [--records 200000]
        [--repeat 3] [--brokers 1|3] [--linger-ms 5] [--root DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _proc import GcTimer, busy_seconds, busy_share, cpu_seconds, machine_ticks, thread_schedstat


def request_rounds(requests: list[tuple[int, float, float, int, int]], loop_s: float) -> dict:
    """How a run's produce requests went (the producer holds one request per leader in
    flight, decision 43, so a leader's requests are the rounds of its partitions'
    replication): the most requests any leader got, and when the first request of the run
    went, how many partitions and records per partition it carried, and its round trip (a
    request's append, both followers' fetches of it, their appends and syncs, the high
    watermark); also the median round trip, and how many requests went after the send()
    loop ended (the flush()'s tail)."""
    if not requests:
        return {}
    by_leader: dict[int, int] = {}
    for node, *_ in requests:
        by_leader[node] = by_leader.get(node, 0) + 1
    first = min(requests, key=lambda r: r[1])
    return {
        "requests_per_leader_max": max(by_leader.values()),
        "first_request": {
            "sent_ms": round(first[1] * 1000, 1),
            "round_trip_ms": round((first[2] - first[1]) * 1000, 1),
            "partitions": first[3],
            "records_per_partition": round(first[4] / max(1, first[3]), 1),
        },
        "round_trip_ms_median": round(statistics.median(r[2] - r[1] for r in requests) * 1000, 1),
        "requests_after_loop": sum(1 for r in requests if r[1] >= loop_s),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=5000)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--brokers", type=int, default=1, choices=(1, 3))
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
    ap.add_argument("--linger-ms", type=int, default=5, help="the producer's linger.ms")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    sys.path[:0] = [root, str(Path(root) / "scripts" / "bench")]
    os.environ["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])

    import partitions_bench as pb
    from _partitions_common import VALUE, produce

    import client.aio.sender as sender_mod  # from `root`
    from client import Admin

    built = [0]
    build = sender_mod.build_batch

    def counting(*a: object, **k: object) -> bytes:
        built[0] += 1
        return build(*a, **k)  # type: ignore[arg-type]

    sender_mod.build_batch = counting  # counts the batches the producer encodes

    # every produce request of a run: (leader, sent, answered, partitions, records), the
    # times in seconds from the run's first send()
    requests: list[tuple[int, float, float, int, int]] = []
    clock = [0.0]
    send_request = sender_mod.Sender._send

    async def timed_send(self: Any, node: int, parts: Any, busy: Any) -> None:
        sent = time.monotonic() - clock[0]
        records = sum(len(b.entries) for _tp, batches in parts for b in batches)
        await send_request(self, node, parts, busy)
        requests.append((node, sent, time.monotonic() - clock[0], len(parts), records))

    sender_mod.Sender._send = timed_send  # type: ignore[method-assign]

    base = tempfile.mkdtemp(prefix="gregor-rr-bench-")
    if args.brokers == 1:
        server = pb.start_server(str(Path(base) / "data"))
        bootstrap, pids = server.bootstrap, [server.proc.pid]
        stop = lambda: pb.stop_server(server.proc)  # noqa: E731
    else:
        from _cluster import start_cluster

        from broker.cluster_nodes import stop_nodes

        # the nodes run `python -m broker.cli`, which imports from the working directory first
        os.chdir(root)
        controllers, brokers = start_cluster(Path(base) / "cluster", 3, 3)
        bootstrap = ",".join(n.address for n in brokers.values())
        pids = [n.proc.pid for n in brokers.values() if n.proc is not None]

        def stop() -> None:
            stop_nodes(list(brokers.values()))
            stop_nodes(controllers)

    def server_cpu() -> float:
        return sum(cpu_seconds(pid) for pid in pids)

    def syscalls() -> list[tuple[int, int]]:
        """(read, write) syscalls so far of each server process."""
        out = []
        for pid in pids:
            with open(f"/proc/{pid}/io") as f:
                io = dict(line.split(": ") for line in f.read().splitlines())
            out.append((int(io["syscr"]), int(io["syscw"])))
        return out

    def own_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def run(targets: list[tuple[str, int]]) -> dict:
        """Rate and costs of sending to `targets`, from the first send() to the end of flush()
        (the producer's start-up and metadata requests are left out)."""
        from client import Producer

        cfg = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": args.linger_ms}
        n, count = args.records, len(targets)
        with Producer(cfg) as producer:
            for topic in sorted({t for t, _ in targets}):
                producer.partitions_for(topic)
            built[0] = 0
            requests.clear()
            m0 = machine_ticks()
            c0, s0, io0, t0 = own_cpu(), server_cpu(), syscalls(), time.monotonic()
            clock[0] = t0
            r0 = thread_schedstat()
            with GcTimer() as gc_timer:
                futs = [producer.send(targets[i % count][0], VALUE, partition=targets[i % count][1])
                        for i in range(n)]  # fmt: skip
                sent = time.monotonic() - t0
                r1 = thread_schedstat()
                m1 = machine_ticks()
                producer.flush()
            elapsed = time.monotonic() - t0
            m2 = machine_ticks()
            c1, s1, io1 = own_cpu(), server_cpu(), syscalls()
        errors = sum(1 for f in futs if f.exception() is not None)
        batches = max(1, built[0])
        return {
            **request_rounds(requests, sent),
            "records_per_s": round(n / elapsed, 1),
            "send_loop_s": round(sent, 3),
            "flush_s": round(elapsed - sent, 3),
            # how busy the whole machine's CPUs were during the send() loop and the flush()
            "machine_busy": [busy_share(m0, m1), busy_share(m1, m2)],
            # the send() loop's thread during the loop: seconds on a CPU and seconds waiting
            # for one (the machine's other threads had them)
            "send_loop_thread_s": {
                "cpu": round(r1[0] - r0[0], 3),
                "runqueue_wait": round(r1[1] - r0[1], 3),
            },
            # the producer process's cyclic GC over the run, per generation: [collections,
            # CPU ms of the threads that ran them] (decision 202)
            "producer_gc": gc_timer.summary(),
            "errors": errors,
            "records_per_batch": round(n / batches, 1),
            "producer_cpu_us_per_record": round((c1 - c0) / n * 1e6, 2),
            "server_cpu_us_per_record": round((s1 - s0) / n * 1e6, 2),
            "server_cpu_us_per_batch": round((s1 - s0) / batches * 1e6, 1),
            # the whole machine's CPU over the run (every process, the kernel's threads): in a
            # CPU-bound phase the rate is the machine's busy CPUs over this; what is not the
            # producer's or the server's is the controllers' and the kernel's
            "machine_cpu_us_per_record": round(busy_seconds(m0, m2) / n * 1e6, 2),
            "server_read_syscalls_per_krecord": [
                round((b[0] - a[0]) * 1000 / n, 1) for a, b in zip(io0, io1, strict=True)
            ],
            "server_write_syscalls_per_krecord": [
                round((b[1] - a[1]) * 1000 / n, 1) for a, b in zip(io0, io1, strict=True)
            ],
        }

    try:
        topics = [f"rr{i:05d}" for i in range(max(1, args.partitions // 100))]
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            for t in topics:
                if args.brokers == 1:
                    admin.create_topic(t, partitions=100)
                else:
                    admin.create_topic(t, 100, 3, {"min.insync.replicas": "2"})
        pb._all_led(bootstrap, topics, 100, 300)
        every = [(t, p) for p in range(100) for t in topics]
        produce(bootstrap, every, len(every))  # each partition's first batch
        probe_reset = os.environ.get("BROKER_PROBE_RESET")
        if probe_reset:  # the broker probe (scripts/bench/broker_probe) counts the passes only
            Path(probe_reset).touch()
            time.sleep(1.5)  # (it looks once a second)
        out: dict = {
            "root": root,
            "brokers": args.brokers,
            "linger_ms": args.linger_ms,
            "partitions": len(every),
            "load_before": os.getloadavg()[0],
        }
        runs = []
        for _ in range(args.repeat):
            one, spread = run([(topics[0], 0)]), run(every)
            spread["vs_one"] = round(spread["records_per_s"] / one["records_per_s"], 3)
            runs.append({"one_partition": one, "round_robin": spread})
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
        out["runs"] = runs
        out["median_vs_one"] = statistics.median(r["round_robin"]["vs_one"] for r in runs)
        out["load_after"] = os.getloadavg()[0]
        print(json.dumps(out, indent=2))
    finally:
        stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
