"""Metadata/controller benchmark: prints one JSON object.

- local_append: LocalMetadataLog appends of one record (fsync each) → appends/s, p50/p99 ms
- create_topics: QuorumController.create_topics of 1 topic x 8 partitions over LocalMetadataLog
- raft3_commit: three real `gregor controller` processes; BrokerRegistration (answered once
  committed on a majority, each voter fsyncing) latency p50/p99, sequential
- raft3_failover: SIGKILL the leader → a new leader visible in DescribeQuorum (seconds)

Usage: python scripts/bench/metadata_bench.py [--n 300] [--skip-raft]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from client.protocol.api_keys import ApiKey  # noqa: E402
from controller.quorum import LocalMetadataLog, QuorumController  # noqa: E402
from controller.quorum.network import request  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(p * len(xs)))] * 1000, 3)


def bench_local(n: int, tmp: str) -> dict:
    log = LocalMetadataLog(os.path.join(tmp, "local"))
    lat = []
    t0 = time.perf_counter()
    for _ in range(n):
        s = time.perf_counter()
        log.append([b"x" * 100])
        lat.append(time.perf_counter() - s)
    el = time.perf_counter() - t0
    log.close()
    out = {"appends_per_s": round(n / el), "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99)}
    log = LocalMetadataLog(os.path.join(tmp, "ctl"))
    c = QuorumController(log, None, None, random.Random(1))
    for b in (1, 2, 3):
        r = c.register_broker(b, "h", 9000 + b)
        c.broker_heartbeat(b, r["broker_epoch"], c.last_written_offset)
    t0 = time.perf_counter()
    for i in range(n):
        c.create_topics([{"name": f"t{i}", "num_partitions": 8, "replication_factor": 3}])
    el = time.perf_counter() - t0
    log.close()
    return {"local_append": out, "create_topics_per_s": round(n / el, 1)}


def free_ports(k: int) -> list[int]:
    socks = [socket.socket() for _ in range(k)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def leader(ports: dict[int, int], alive: set[int]) -> int | None:
    for n in alive:
        try:
            d = request("127.0.0.1", ports[n], ApiKey.DESCRIBE_QUORUM, {}, timeout=0.5)
        except OSError:
            continue
        if d["role"] == "leader":
            return n
    return None


def wait(cond, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.01)
    raise TimeoutError


def bench_raft(n: int, tmp: str) -> dict:
    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    voters = ",".join(f"{k}@127.0.0.1:{p}" for k, p in ports.items())
    procs = {}
    exe = str(Path(sys.executable).with_name("gregor"))
    for k in ports:
        cfg = Path(tmp) / f"c{k}.yaml"
        cfg.write_text(
            f'node.id: {k}\ncontroller.quorum.voters: "{voters}"\n'
            f"metadata.log.dir: {tmp}/raft-{k}\ncontroller.quorum.election.timeout.ms: 500\n"
            "log.level: WARNING\n"
        )
        procs[k] = subprocess.Popen(
            [exe, "controller", "--config", str(cfg)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        for p in procs.values():
            p.stdout.readline()
        t0 = time.monotonic()
        lid = wait(lambda: leader(ports, set(procs)), 10)
        first_leader_s = time.monotonic() - t0
        wait(
            lambda: (
                request(
                    "127.0.0.1",
                    ports[lid],
                    ApiKey.BROKER_REGISTRATION,
                    {"broker_id": 999, "host": "h", "port": 1},
                )["error_code"]
                == 0
            ),
            10,
        )
        lat = []
        for i in range(n):
            s = time.perf_counter()
            r = request(
                "127.0.0.1",
                ports[lid],
                ApiKey.BROKER_REGISTRATION,
                {"broker_id": 1000 + i, "host": "h", "port": 1},
            )
            lat.append(time.perf_counter() - s)
            assert r["error_code"] == 0, r
        os.killpg(procs[lid].pid, signal.SIGKILL)
        procs.pop(lid).wait()
        t1 = time.monotonic()
        wait(lambda: leader(ports, set(procs)), 10)
        failover = time.monotonic() - t1
        return {
            "raft3_first_leader_s": round(first_leader_s, 3),
            "raft3_commit": {
                "p50_ms": pct(lat, 0.5),
                "p99_ms": pct(lat, 0.99),
                "per_s": round(n / sum(lat), 1),
            },
            "raft3_failover_s": round(failover, 3),
        }
    finally:
        for p in procs.values():
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--skip-raft", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = bench_local(a.n, tmp)
        if not a.skip_raft:
            out.update(bench_raft(a.n, tmp))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
