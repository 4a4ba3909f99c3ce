"""scripts/bench/e2e_latency_bench.py --oversleep: the summary of a wake-up prober's lateness,
and the prober itself as the benchmark runs it (a child process printing one JSON line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load_script

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "scripts" / "bench"
SCRIPT = BENCH / "e2e_latency_bench.py"


def _module(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCH))  # (it imports its sibling _proc)
    return load_script("bench_e2e_latency", SCRIPT)


def test_summary_counts_the_late_wakeups_and_each_seconds_max(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = _module(monkeypatch)
    late = [(0.1, 0.05), (0.5, 6.0), (0.9, 0.07), (1.2, 25.0), (1.3, 0.06), (2.7, 0.08)]
    got = m.oversleep_summary(late)
    assert got["wakeups"] == 6
    assert got["max_ms"] == 25.0
    assert got["over_5ms"] == 2 and got["over_20ms"] == 1
    assert got["per_second_max_ms"] == [6.0, 25.0, 0.08]
    assert got["p50_ms"] == 0.08  # (the benchmark's percentile: the upper of two middles)
    assert m.oversleep_summary([]) == {}


def test_the_prober_child_reports_its_wakeups() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--oversleep-child", "0.3", "--root", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["wakeups"] > 10  # ~1 ms sleeps over 0.3 s
    # time.sleep never returns early: no wake-up is counted as early
    assert 0 <= got["p50_ms"] <= got["p99_ms"] <= got["max_ms"]
    assert len(got["per_second_max_ms"]) == 1
