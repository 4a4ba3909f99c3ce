"""Raft benchmarks (not a test): prints one JSON object.

- core_3_voters: entries/s committed by a 3-voter in-memory group (pure core, no I/O),
  proposals of `batch` records, messages delivered synchronously.
- storage_fsync_*: RaftStorage.persist() of single-entry and 100-entry Readies (real fsync).
- sim_seeds_per_s: deterministic-simulation throughput (tests/sim).

Run from the repository root: .venv/bin/python scripts/bench/raft_bench.py
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

from controller.raft.core import RaftNode
from controller.raft.messages import Entry
from controller.raft.state import Ready, Role
from controller.raft.storage import RaftStorage


def bench_core(total: int = 20_000, batch: int = 50, size: int = 100) -> float:
    nodes = {i: RaftNode(i, [1, 2, 3], rng=random.Random(i)) for i in (1, 2, 3)}
    queue: deque = deque()

    def drain(i: int) -> None:
        n = nodes[i]
        while n.has_ready():
            rd = n.ready()
            queue.extend(rd.messages)
            n.advance(rd)

    def settle() -> None:
        while queue:
            m = queue.popleft()
            nodes[m.to].step(m)
            drain(m.to)

    while nodes[1].role is not Role.LEADER:
        nodes[1].tick()
        drain(1)
        settle()
    payload = [b"x" * size] * batch
    start = time.perf_counter()
    last = 0
    for _ in range(total // batch):
        last = nodes[1].propose(payload)
        drain(1)
        settle()
    took = time.perf_counter() - start
    assert all(n.commit_index == last for n in nodes.values())
    return total / took


def bench_storage(entries_per_ready: int, readies: int = 200, size: int = 200) -> float:
    with tempfile.TemporaryDirectory() as d:
        s = RaftStorage(Path(d))
        s.load()
        idx = 1
        start = time.perf_counter()
        for _ in range(readies):
            es = [Entry(idx + k, 1, b"x" * size) for k in range(entries_per_ready)]
            idx += entries_per_ready
            s.persist(Ready(None, None, None, None, es, [], []))
        took = time.perf_counter() - start
        s.close()
    return readies / took


def bench_sim(seeds: int = 100) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "sim"))
    from raft_sim import run_seed
    from test_raft_sim import config_for

    start = time.perf_counter()
    for seed in range(seeds):
        run_seed(seed, config_for(seed))
    return seeds / (time.perf_counter() - start)


def main() -> None:
    result = {
        "core_3_voters_entries_per_s": round(bench_core()),
        "storage_fsync_persist_1_entry_per_s": round(bench_storage(1)),
        "storage_fsync_persist_100_entries_per_s": round(bench_storage(100) * 100),
        "sim_seeds_per_s": round(bench_sim(), 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
