"""Metadata/controller benchmark (not a test): prints one JSON object.

In process, over LocalMetadataLog (one node, fsync per append):
- local_append: appends of one 100-byte record → appends/s, p50/p99 ms
- local_create_topics_per_s: QuorumController.replication.create_topics of 1 topic x 8 partitions each

Three real `gregor controller` processes on loopback (election timeout 500 ms, each voter
fsyncing every Raft Ready):
- raft3_first_leader_s: all voters listening → a leader every voter agrees on
- raft3_commit: sequential BrokerRegistration round trips (one record, answered once committed
  on a majority) → p50/p99 ms, per second
- raft3_records_per_s: batched proposals — CreateTopics of `--topics-per-request` topics x
  `--partitions` partitions (1 Topic + P Partition records per topic, all in one Raft proposal),
  with 1 and with 4 requests in flight; records committed per second
- raft3_failover: `--kills` times: SIGKILL the leader, then time until a surviving voter
  answers DescribeQuorum as leader (`to_leader_s`) and until a write (BrokerRegistration)
  commits through it (`to_commit_s`); min/p50/p90/max. The killed voter is restarted and caught
  up before the next kill, so every kill hits a full 3-voter quorum.
- raft3_sigterm_handover: the same over `--kills / 2` SIGTERMs: a leader stopping cleanly
  transfers leadership first (controlled shutdown).

Usage: .venv/bin/python scripts/bench/metadata_bench.py [--n 200] [--kills 20] [--skip-raft]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _stats import percentile  # (this script's own directory)

from client.protocol.api_keys import ApiKey
from controller.quorum import LocalMetadataLog, QuorumController
from controller.quorum.network import request

HOST = "127.0.0.1"


def pct_ms(xs: list[float], p: float) -> float:
    return round(percentile(sorted(xs), p) * 1000, 3)


def dist_s(xs: list[float]) -> dict:
    xs = sorted(xs)

    def at(p: float) -> float:
        return round(xs[min(len(xs) - 1, int(p * len(xs)))], 3)

    return {"n": len(xs), "min": round(xs[0], 3), "p50": at(0.5), "p90": at(0.9), "max": at(1.0)}


def bench_local(n: int, tmp: str) -> dict:
    log = LocalMetadataLog(str(Path(tmp) / "local"))
    lat = []
    t0 = time.perf_counter()
    for _ in range(n):
        s = time.perf_counter()
        log.append([b"x" * 100])
        lat.append(time.perf_counter() - s)
    el = time.perf_counter() - t0
    log.close()
    out = {"appends_per_s": round(n / el), "p50_ms": pct_ms(lat, 0.5), "p99_ms": pct_ms(lat, 0.99)}
    log = LocalMetadataLog(str(Path(tmp) / "ctl"))
    c = QuorumController(log, None, None, random.Random(1))
    for b in (1, 2, 3):
        r = c.cluster.register_broker(b, "h", 9000 + b)
        c.cluster.broker_heartbeat(b, r["broker_epoch"], c.last_written_offset)
    t0 = time.perf_counter()
    for i in range(n):
        c.replication.create_topics(
            [{"name": f"t{i}", "num_partitions": 8, "replication_factor": 3}]
        )
    el = time.perf_counter() - t0
    log.close()
    return {"local_append": out, "local_create_topics_per_s": round(n / el, 1)}


def wait(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.005)
    raise TimeoutError(what)


class Quorum:
    """Three `gregor controller` processes in their own sessions; `close()` kills only them."""

    def __init__(self, tmp: str) -> None:
        socks = [socket.socket() for _ in range(3)]
        for s in socks:
            s.bind((HOST, 0))
        self.ports = {i + 1: s.getsockname()[1] for i, s in enumerate(socks)}
        for s in socks:
            s.close()
        voters = ",".join(f"{k}@{HOST}:{p}" for k, p in self.ports.items())
        self.exe = str(Path(sys.executable).with_name("gregor"))
        self.cfg = {}
        for k in self.ports:
            self.cfg[k] = Path(tmp) / f"controller-{k}.yaml"
            self.cfg[k].write_text(
                f'node.id: {k}\ncontroller.quorum.voters: "{voters}"\n'
                f"metadata.log.dir: {tmp}/raft-{k}\n"
                "controller.quorum.election.timeout.ms: 500\n"
                "broker.session.timeout.ms: 3600000\n"
                "log.level: WARNING\n"
            )
        self.procs: dict[int, subprocess.Popen] = {}

    def spawn(self, k: int) -> None:
        self.procs[k] = subprocess.Popen(
            [self.exe, "controller", "--config", str(self.cfg[k])],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def ready(self, k: int) -> None:
        line = self.procs[k].stdout.readline().decode()
        if "listening on" not in line:
            raise RuntimeError(f"controller {k} did not start: {line!r}")

    def kill(self, k: int, sig: int = signal.SIGKILL) -> None:
        p = self.procs[k]
        os.killpg(p.pid, sig)

    def reap(self, k: int) -> None:
        p = self.procs.pop(k)
        p.wait(30)
        p.stdout.close()

    def close(self) -> None:
        for k in list(self.procs):
            self.kill(k)
            self.reap(k)

    def describe(self, k: int) -> dict | None:
        try:
            return request(HOST, self.ports[k], ApiKey.DESCRIBE_QUORUM, {}, timeout=0.5)
        except OSError:
            return None

    def leader(self) -> int | None:
        """The voter saying it leads, when every other running voter agrees."""
        views = {k: self.describe(k) for k in self.procs}
        lead = [k for k, v in views.items() if v and v["role"] == "leader"]
        if len(lead) != 1 or not all(v and v["leader_id"] == lead[0] for v in views.values()):
            return None
        return lead[0]

    def call(self, k: int, api: int, body: dict, timeout: float = 30.0) -> dict:
        return request(HOST, self.ports[k], api, body, timeout=timeout)

    def hw(self, k: int) -> int:
        body = {"from_offset": 0, "max_records": 1, "include_snapshot": False}
        return self.call(k, ApiKey.METADATA_FETCH, body, 5.0)["high_watermark"]


def register(q: Quorum, k: int, broker_id: int) -> bool:
    try:
        r = q.call(k, ApiKey.BROKER_REGISTRATION, {"broker_id": broker_id, "host": HOST, "port": 1})
    except OSError:
        return False
    return r["error_code"] == 0


def bench_throughput(q: Quorum, lid: int, topics_per_request: int, partitions: int) -> dict:
    # three live brokers so that RF 3 placement works
    for b in (1, 2, 3):
        r = q.call(lid, ApiKey.BROKER_REGISTRATION, {"broker_id": b, "host": HOST, "port": 1})
        hb = {
            "broker_id": b,
            "broker_epoch": r["broker_epoch"],
            "current_metadata_offset": q.hw(lid) - 1,
        }
        assert not q.call(lid, ApiKey.BROKER_HEARTBEAT, hb)["is_fenced"]
    seq = 0
    out = {}
    for inflight, requests in ((1, 10), (4, 20)):

        def create(i: int, inflight: int = inflight) -> int:
            topics = [
                {
                    "name": f"b{inflight}-{i}-{j}",
                    "num_partitions": partitions,
                    "replication_factor": 3,
                }
                for j in range(topics_per_request)
            ]
            resp = q.call(lid, ApiKey.CREATE_TOPICS, {"topics": topics, "timeout_ms": 30_000})
            assert all(t["error_code"] == 0 for t in resp["topics"]), resp["topics"][:2]
            return len(topics) * (1 + partitions)

        t0 = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(inflight) as pool:
            records = sum(pool.map(create, range(seq, seq + requests)))
        took = time.perf_counter() - t0
        seq += requests
        out[f"inflight_{inflight}"] = {
            "records": records,
            "seconds": round(took, 3),
            "records_per_s": round(records / took),
        }
    return {
        "batch": f"{topics_per_request} topics x {partitions} partitions per CreateTopics "
        f"({topics_per_request * (1 + partitions)} records per proposal)",
        **out,
    }


def bench_failover(
    q: Quorum, kills: int, sig: int = signal.SIGKILL, first_broker: int = 5000
) -> dict:
    to_leader, to_commit = [], []
    broker = first_broker
    for _ in range(kills):
        lid = wait(q.leader, 10, "a leader")
        want = q.hw(lid)
        wait(lambda want=want: all(q.hw(k) >= want for k in q.procs), 10, "voters caught up")
        q.kill(lid, sig)
        t0 = time.monotonic()
        survivors = [k for k in q.procs if k != lid]
        new = wait(
            lambda survivors=survivors: next(
                (k for k in survivors if (d := q.describe(k)) and d["role"] == "leader"), None
            ),
            10,
            "a new leader",
        )
        to_leader.append(time.monotonic() - t0)
        broker += 1
        wait(lambda b=broker, new=new: register(q, new, b), 10, "a committed write")
        to_commit.append(time.monotonic() - t0)
        q.reap(lid)
        q.spawn(lid)
        q.ready(lid)
    return {"kills": kills, "to_leader_s": dist_s(to_leader), "to_commit_s": dist_s(to_commit)}


def bench_raft(n: int, kills: int, topics_per_request: int, partitions: int, tmp: str) -> dict:
    q = Quorum(tmp)
    try:
        for k in (1, 2, 3):
            q.spawn(k)
        for k in (1, 2, 3):
            q.ready(k)
        t0 = time.monotonic()
        lid = wait(q.leader, 10, "a leader")
        first_leader_s = time.monotonic() - t0
        wait(lambda: register(q, lid, 999), 10, "the first commit")
        lat = []
        for i in range(n):
            s = time.perf_counter()
            assert register(q, lid, 1000 + i)
            lat.append(time.perf_counter() - s)
        throughput = bench_throughput(q, lid, topics_per_request, partitions)
        failover = bench_failover(q, kills)
        handover = bench_failover(q, max(1, kills // 2), signal.SIGTERM, 6000)
        return {
            "raft3_first_leader_s": round(first_leader_s, 3),
            "raft3_commit": {
                "p50_ms": pct_ms(lat, 0.5),
                "p99_ms": pct_ms(lat, 0.99),
                "per_s": round(n / sum(lat), 1),
            },
            "raft3_records_per_s": throughput,
            "raft3_failover": failover,
            "raft3_sigterm_handover": handover,
        }
    finally:
        q.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--topics-per-request", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--skip-raft", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = bench_local(a.n, tmp)
        if not a.skip_raft:
            out.update(bench_raft(a.n, a.kills, a.topics_per_request, a.partitions, tmp))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
