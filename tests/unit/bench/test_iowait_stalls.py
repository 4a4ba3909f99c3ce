"""scripts/bench/_proc.py: the machine's iowait stalls (e2e_latency_bench.py's
"iowait_during"), from /proc/stat samples: which runs of windows count as the machine waiting on
its disk, and the sampler reading the real /proc/stat on a thread of its own."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest
from helpers import load_script

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "scripts" / "bench"
MS = 1_000_000  # ns


def _proc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return load_script("bench_proc", BENCH / "_proc.py")


def _samples(windows: list[tuple[int, int]], step_ms: int = 50) -> list[tuple[int, list[int]]]:
    """/proc/stat-like cumulative ticks (user, nice, system, idle, iowait, irq, softirq, steal)
    from each window's (busy, iowait) ticks out of 10 (two CPUs, 50 ms, 10 ms ticks)."""
    ticks = [0] * 8
    out = [(0, list(ticks))]
    for i, (busy, iowait) in enumerate(windows, 1):
        ticks[0] += busy
        ticks[4] += iowait
        ticks[3] += 10 - busy - iowait
        out.append((i * step_ms * MS, list(ticks)))
    return out


def test_a_run_of_iowait_windows_is_one_stall_with_its_start_and_length(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = _proc(monkeypatch)
    # busy, then four windows (200 ms) mostly in iowait, then busy again
    got = m.iowait_stalls(_samples([(8, 0), (8, 1), (1, 9), (0, 10), (0, 10), (2, 8), (8, 0)]))
    assert got["stalls"] == [{"at_ns": 100 * MS, "ms": 200.0}]
    assert got["longest_ms"] == 200.0
    assert got["iowait_share"] == pytest.approx(38 / 70, abs=1e-4)


def test_short_waits_and_busy_windows_with_a_little_iowait_are_no_stall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = _proc(monkeypatch)
    # windows with iowait under half of their ticks, however many in a row
    got = m.iowait_stalls(_samples([(8, 0), (5, 4), (6, 4), (4, 4), (1, 4), (9, 0)]))
    assert got["stalls"] == []
    assert got["longest_ms"] == 0.0
    # one window of iowait shorter than min_ms (50 ms by default): no stall
    short = _samples([(8, 0), (0, 10), (8, 0)], step_ms=25)
    assert m.iowait_stalls(short)["stalls"] == []
    # the same window counts once the threshold is at or below its length
    assert m.iowait_stalls(short, min_ms=25)["stalls"] == [{"at_ns": 25 * MS, "ms": 25.0}]


def test_a_stall_still_open_at_the_last_sample_is_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = _proc(monkeypatch)
    got = m.iowait_stalls(_samples([(8, 0), (0, 10), (1, 9), (0, 10)]))
    assert got["stalls"] == [{"at_ns": 50 * MS, "ms": 150.0}]


def test_no_samples_or_no_ticks_give_an_empty_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    m = _proc(monkeypatch)
    assert m.iowait_stalls([]) == {"iowait_share": 0.0, "stalls": [], "longest_ms": 0.0}
    still = [(0, [0] * 8), (50 * MS, [0] * 8)]
    assert m.iowait_stalls(still) == {"iowait_share": 0.0, "stalls": [], "longest_ms": 0.0}


class _StopAfter(threading.Event):
    """A stop event whose `wait` answers "stopped" on its `n`-th call: the sampler's loop runs
    a known number of rounds without a thread or a clock."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    def wait(self, timeout: float | None = None) -> bool:
        self.left -= 1
        return self.left <= 0


def _check_ticks(m, samples: list[tuple[int, list[int]]]) -> None:
    times = [t for t, _ in samples]
    assert times == sorted(times)
    for _, ticks in samples:
        assert len(ticks) >= 8 and all(x >= 0 for x in ticks)
    # cumulative counters: never lower in a later sample
    for (_, a), (_, b) in itertools.pairwise(samples):
        assert all(y >= x for x, y in zip(a, b, strict=False))
    assert set(m.iowait_stalls(samples)) == {"iowait_share", "stalls", "longest_ms"}


def test_the_sampler_reads_proc_stat_until_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    m = _proc(monkeypatch)
    # its loop, driven on this thread: a sample per round, one more at the stop
    sampler = m.IowaitSampler(interval=0.01)
    sampler._stop = _StopAfter(3)
    sampler._run()
    assert len(sampler.samples) >= 4  # (three read while running, one more at the stop)
    _check_ticks(m, sampler.samples)
    # and on its own thread: one sample at the start, one at the stop, at least
    samples = m.IowaitSampler(interval=0.01).start().stop()
    assert len(samples) >= 2
    _check_ticks(m, samples)
