"""kill -9 a process that appends and group-commits; every reported-flushed batch must survive.

The child (log_crash_child.py) prints each flushed offset after its fsync. The parent SIGKILLs it
after a random number of reports (seeded; the seed is printed), reopens the log (unclean: no
clean-shutdown marker), and checks that it holds every batch below the highest reported flushed
offset, intact (CRC, contiguous offsets, values encoding their offsets), and nothing invalid.
Each run of the child appends a bounded number of records (log_crash_child.budget), so the whole
log the checks read is bounded too, however slow the disk is.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest
from log_crash_child import CONFIG, budget

from broker.log import LogConfig, LogManager
from broker.log.manager import CLEAN_SHUTDOWN_MARKER
from client.records.header import HEADER_SIZE, iter_headers

CHILD = Path(__file__).with_name("log_crash_child.py")
ROOT = Path(__file__).resolve().parents[2]
KILLS = 20


def read_line(proc: subprocess.Popen, deadline: float) -> str:
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("child produced no output before the deadline")
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"child exited early: {proc.wait()} {proc.stderr.read()}")
            return line.strip()


def check_log(log_dir: Path, must_have: int) -> int:
    mgr = LogManager([log_dir], LogConfig(**CONFIG))
    try:
        log = mgr.get("crash", 0)
        assert log is not None
        end = log.end_offset
        assert end >= must_have, f"lost flushed data: end {end} < reported flushed {must_have}"
        offset, expected = log.log_start_offset, log.log_start_offset
        while offset < end:
            r = log.read(offset, 1 << 20)
            for _, h in iter_headers(r.data, check_crc=True):  # raises on any invalid batch
                assert h.base_offset == expected, (h.base_offset, expected)
                pos = _ + HEADER_SIZE
                records = msgpack.unpackb(r.data[pos : _ + h.size], raw=False)
                for delta, _ts, _key, value, _hdrs in records:
                    assert value.startswith(f"{h.base_offset + delta}:".encode()), (
                        h.base_offset,
                        delta,
                    )
                expected = h.next_offset
            assert r.next_offset > offset
            offset = r.next_offset
        assert expected == end
        return end
    finally:
        mgr.close(clean=random.random() < 0.5)


@pytest.mark.slow
def test_sigkill_during_group_commit_loses_no_flushed_batch(tmp_path):
    seed = int(os.environ.get("GREGOR_CRASH_SEED", random.randrange(1 << 30)))
    print(f"crash test seed {seed} (replay: GREGOR_CRASH_SEED={seed})")
    rng = random.Random(seed)
    random.seed(seed)
    log_dir = tmp_path / "logs"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    flushed_max = 0
    t0 = time.monotonic()
    for kill in range(KILLS):
        child_seed, reports = rng.randrange(1 << 30), rng.randint(1, 40)
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(log_dir), str(child_seed), str(reports)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env=env,
        )
        try:
            deadline = time.monotonic() + 20
            start = read_line(proc, deadline)
            assert start.startswith("start "), start
            start_offset = int(start.split()[1])
            assert start_offset >= flushed_max
            for _ in range(reports):
                flushed_max = max(flushed_max, int(read_line(proc, deadline)))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        assert not (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
        end = check_log(log_dir, flushed_max)
        assert end <= start_offset + budget(reports), (start_offset, reports, end)
        print(
            f"kill {kill}: flushed {flushed_max}, recovered end {end}"
            f" ({end - start_offset} of this run's budget of {budget(reports)})"
        )
    assert flushed_max > 0
    print(f"{KILLS} kills in {time.monotonic() - t0:.1f} s")  # (a figure, not a check)
