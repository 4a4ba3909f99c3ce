#!/usr/bin/env python
"""Consumer group benchmark against a real `gregor server` subprocess; prints one JSON object.

- rebalance_s: a 4th member joins a 3-member group of a 12-partition topic that is being
  produced to; the time from its subscribe() to every partition being owned by exactly one
  member with 3 each, and the newcomer having received a record from each of its partitions
  (--repeat times; the broker's group.consumer.heartbeat.interval.ms bounds it from below:
  the old members learn of the newcomer on their next heartbeat);
- commit: --commits synchronous commit() calls of one member (one partition, a new offset
  each time): commits/s and latency p50/p99 (each is one replicated, fsynced write);
- consume: --records 100-byte records on one partition read from the beginning by a group
  consumer and by an assign() consumer (alternating, --repeat each): records/s and the cost
  of the group one.

    .venv/bin/python scripts/bench/group_bench.py [--heartbeat-ms 5000] [--repeat 3]
        [--commits 2000] [--records 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import start_server, stop_server  # noqa: E402


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from client import Consumer

        self.first_seen: dict[int, float] = {}
        self.stop = threading.Event()
        self.c = Consumer(bootstrap_servers=bootstrap, group_id=group,
                          auto_offset_reset="latest")  # fmt: skip
        self.c.subscribe([topic], on_revoke=self._revoked)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _revoked(self, tps: list) -> None:
        for tp in tps:
            self.first_seen.pop(tp.partition, None)

    def _run(self) -> None:
        while not self.stop.is_set():
            for r in self.c.poll(timeout_ms=50):
                self.first_seen.setdefault(r.partition, time.monotonic())

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.c.assignment()}

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.c.close()


def _wait(cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit("timed out")
        time.sleep(0.005)


def rebalance(bootstrap: str, run: int) -> float:
    from client import Admin, Producer

    topic, group = f"rb{run}", f"rb{run}"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic(topic, partitions=12)
    stop = threading.Event()

    def produce() -> None:
        with Producer(bootstrap_servers=bootstrap, linger_ms=1) as p:
            i = 0
            while not stop.is_set():
                p.send(topic, b"x", partition=i % 12)
                i += 1
                if i % 12 == 0:
                    p.flush()
                    time.sleep(0.005)

    prod = threading.Thread(target=produce, daemon=True)
    prod.start()
    members = [Member(bootstrap, group, topic) for _ in range(3)]
    try:
        _wait(lambda: sorted(p for m in members for p in m.owned()) == list(range(12)), 120)
        t0 = time.monotonic()
        new = Member(bootstrap, group, topic)
        members.append(new)

        def done() -> bool:
            owned = [m.owned() for m in members]
            return (
                sorted(p for o in owned for p in o) == list(range(12))
                and all(len(o) == 3 for o in owned)
                and set(new.first_seen) >= owned[-1]
            )

        _wait(done, 120)
        return time.monotonic() - t0
    finally:
        stop.set()
        prod.join(30)
        for m in members:
            m.close()


def commits(bootstrap: str, n: int) -> dict:
    from client import Admin, Consumer, TopicPartition

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic("ct", partitions=1)
    tp = TopicPartition("ct", 0)
    with Consumer(bootstrap_servers=bootstrap, group_id="ct", enable_auto_commit=False) as c:
        c.subscribe(["ct"])
        _wait(lambda: c.poll(20) is not None and c.assignment() == {tp}, 120)
        lat = []
        t0 = time.monotonic()
        for i in range(n):
            s = time.perf_counter()
            c.commit({tp: i})
            lat.append(time.perf_counter() - s)
        total = time.monotonic() - t0
    lat.sort()
    return {
        "commits": n,
        "commits_per_s": round(n / total),
        "p50_ms": round(lat[len(lat) // 2] * 1000, 2),
        "p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 2),
    }


def consume_rate(bootstrap: str, records: int, grouped: bool, run: int) -> float:
    from client import Consumer, TopicPartition

    kw = {"group_id": f"cr{run}"} if grouped else {}
    with Consumer(bootstrap_servers=bootstrap, max_poll_records=100_000,
                  auto_offset_reset="earliest", **kw) as c:  # fmt: skip
        if grouped:
            c.subscribe(["cr"])
        else:
            c.assign([TopicPartition("cr", 0)])
        n = 0
        t0 = None
        while n < records:
            got = c.poll(timeout_ms=1000)
            if got and t0 is None:
                t0 = time.monotonic()
                n += len(got)
                continue
            n += len(got)
        assert t0 is not None
        return records / (time.monotonic() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heartbeat-ms", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--commits", type=int, default=2000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--what", default="rebalance,commit,consume",
                    help="which measurements, comma-separated")  # fmt: skip
    args = ap.parse_args()
    what = set(args.what.split(","))

    from client import Admin
    from client.cli.perf import run_produce

    data = tempfile.mkdtemp(prefix="gregor-group-bench-")
    srv = start_server(data, overrides={
        "group.consumer.heartbeat.interval.ms": args.heartbeat_ms,
        "offsets.topic.num.partitions": 3,
    })  # fmt: skip
    out: dict = {"load_avg": os.getloadavg(), "heartbeat_interval_ms": args.heartbeat_ms}
    try:
        if "rebalance" in what:
            out["rebalance_s"] = [round(rebalance(srv.bootstrap, i), 3) for i in range(args.repeat)]
            print(json.dumps(out), file=sys.stderr, flush=True)
        if "commit" in what:
            out["commit"] = commits(srv.bootstrap, args.commits)
            print(json.dumps(out), file=sys.stderr, flush=True)
        if "consume" not in what:
            return 0
        with Admin(bootstrap_servers=srv.bootstrap) as admin:
            admin.create_topic("cr", partitions=1)
        run_produce(
            {"bootstrap.servers": srv.bootstrap}, "cr", args.records, 100, "bulk", partition=0
        )
        group, plain = [], []
        for i in range(args.repeat):
            plain.append(consume_rate(srv.bootstrap, args.records, False, i))
            group.append(consume_rate(srv.bootstrap, args.records, True, i))
        out["consume"] = {
            "assign_rec_per_s": [round(x) for x in plain],
            "group_rec_per_s": [round(x) for x in group],
            "group_cost_pct_of_medians": round(
                100 * (1 - statistics.median(group) / statistics.median(plain)), 1
            ),
        }
    finally:
        stop_server(srv.proc)
        shutil.rmtree(data, ignore_errors=True)
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
