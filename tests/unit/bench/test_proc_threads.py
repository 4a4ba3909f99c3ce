"""scripts/bench/_proc.py: the calling thread's CPU and run-queue wait, and the cyclic GC's
collections timed in the benchmark's own process (roundrobin_bench.py reports both)."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest
from helpers import load_script

BENCH = Path(__file__).resolve().parents[3] / "scripts" / "bench"


def _proc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return load_script("bench_proc", BENCH / "_proc.py")


def test_thread_schedstat_counts_this_threads_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    proc = _proc(monkeypatch)
    ran0, waited0 = proc.thread_schedstat()
    spin_until = time.thread_time() + 0.02
    while time.thread_time() < spin_until:
        pass
    ran1, waited1 = proc.thread_schedstat()
    assert ran1 - ran0 >= 0.015  # the 20 ms of CPU just spent (schedstat counts in ns)
    assert waited1 >= waited0 >= 0


def test_gc_timer_counts_collections_by_generation_while_active(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proc = _proc(monkeypatch)
    with proc.GcTimer() as timer:
        gc.collect(2)
        gc.collect(2)
        gc.collect(1)
    counted = {g: n for g, (n, _) in timer.by_generation.items()}
    assert counted[2] >= 2 and counted[1] >= 1  # (an automatic one may add to them)
    gc.collect(2)  # not counted: the timer is off
    assert {g: n for g, (n, _) in timer.by_generation.items()} == counted
    assert timer._callback not in gc.callbacks
    summary = timer.summary()
    assert summary["gen2"][0] == counted[2] and summary["gen2"][1] >= 0


def test_busy_seconds_is_the_machines_busy_ticks_in_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    proc = _proc(monkeypatch)
    hz = proc.os.sysconf("SC_CLK_TCK")
    # (all, idle) ticks, every CPU summed: 3 s of two CPUs' ticks of which 1.5 s idle
    assert proc.busy_seconds((10 * hz, 4 * hz), (13 * hz, int(5.5 * hz))) == pytest.approx(1.5)
    assert proc.busy_seconds((5, 5), (5, 5)) == 0
    before = proc.machine_ticks()
    spin_until = time.thread_time() + 0.05
    while time.thread_time() < spin_until:
        pass
    assert proc.busy_seconds(before, proc.machine_ticks()) >= 0.03  # this thread's 50 ms at least
