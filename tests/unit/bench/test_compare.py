"""scripts/bench/compare.py: its document (figures found, medians, goals, ratios) and a real
run, one tiny round of the consume benchmark, against this tree and a baseline checkout."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load_script

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "bench" / "compare.py"


def _module():
    return load_script("bench_compare", SCRIPT)


def test_last_json_takes_the_document_after_other_output() -> None:
    c = _module()
    assert c.last_json('progress\n{"a": 1}\n') == {"a": 1}
    assert c.last_json('{"x": 0}\n{\n  "b": [1, 2]\n}\n') == {"b": [1, 2]}
    with pytest.raises(ValueError, match="no JSON object"):
        c.last_json("Traceback: boom")


def test_scaled_arguments_and_summary() -> None:
    c = _module()
    bench = c.Bench(
        "b", "x.py", ("--k", "v"), {"--records": 1000, "--seconds": 10.0},
        (c.Figure("rate", ("r",), 100), c.Figure("p99", ("p",), 5, higher_is_better=False)),
    )  # fmt: skip
    assert c.bench_argv(bench, 0.5) == ["--k", "v", "--records", "500", "--seconds", "5"]
    runs = {
        "current": [{"values": {"rate": 120, "p99": 4}}, {"values": {"rate": 80, "p99": 6}},
                    {"values": {"rate": 110, "p99": 8}}],
        "baseline": [{"values": {"rate": 50, "p99": 10}}, {"error": "exit 1: boom"}],
    }  # fmt: skip
    s = c.summarize(bench, runs)
    assert s["rate"]["current_median"] == 110 and s["rate"]["meets_goal"] is True
    assert s["rate"]["improvement_ratio"] == 2.2  # 110 / 50
    assert s["p99"]["current_median"] == 6 and s["p99"]["meets_goal"] is False
    assert s["p99"]["improvement_ratio"] == round(10 / 6, 3)  # lower is better: base / current
    assert s["problems"] == ["exit 1: boom"]


def test_a_derived_figure_is_the_median_of_each_rounds_difference() -> None:
    c = _module()
    d = c.Derived("gap", ("b", "p99"), ("a", "p99"), 2)
    runs = {
        "a": {"current": [{"values": {"p99": 9.0}}, {"values": {"p99": 20.0}},
                          {"values": {"p99": 8.0}}, {"values": {"p99": 8.0}}],
              "baseline": [{"values": {"p99": 10.0}}]},
        "b": {"current": [{"values": {"p99": 10.5}}, {"values": {"p99": 21.0}},
                          {"error": "exit 1: boom"}, {"values": {"p99": None}}],
              "baseline": [{"values": {"p99": 14.0}}]},
    }  # fmt: skip
    row = c.derive(d, runs)
    # rounds are paired: (10.5 - 9), (21 - 20); a round either side lacks is left out
    assert row["current"] == [1.5, 1.0] and row["current_median"] == 1.25
    assert row["meets_goal"] is True and row["of"] == "b/p99" and row["minus"] == "a/p99"
    assert row["baseline"] == [4.0] and "improvement_ratio" not in row
    runs["b"]["current"][0] = {"values": {"p99": 13.0}}  # 4.0 and 1.0: median 2.5 > 2
    assert c.derive(d, runs)["meets_goal"] is False
    assert c.derive(d, {"a": runs["a"]}) is None  # only when both benchmarks ran
    names = {b.name for b in c.BENCHES}
    assert all(x.of[0] in names and x.minus[0] in names for x in c.DERIVED)


@pytest.mark.slow
def test_a_tiny_round_against_a_baseline_checkout() -> None:
    if shutil.which("gcc") is None or not (ROOT / ".git").exists():
        pytest.skip("needs gcc and a git checkout")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", "consume_1node", "--scale", "0.01",
         "--rounds", "1", "--baseline", "HEAD"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    trees = doc["trees"]
    assert Path(trees["current"]["imports_from"]) == ROOT
    assert trees["baseline"]["imports_from"] == trees["baseline"]["path"] != str(ROOT)
    fig = doc["benchmarks"]["consume_1node"]["records_per_s"]
    assert fig["current"][0] > 0 and fig["baseline"][0] > 0 and "improvement_ratio" in fig
    # what the host took meanwhile, per run and over all; the CPU's name
    stolen = doc["benchmarks"]["consume_1node"]["steal_share"]
    assert set(stolen) == {"current", "baseline"}
    assert all(len(v) == 1 and 0 <= v[0] <= 1 for v in stolen.values())
    assert 0 <= doc["machine"]["steal_share"] <= 1
    assert isinstance(doc["machine"]["cpu_model"], str)
    # the interpreter the benchmarks ran on, as the dynamic linker sees its executable
    exe = doc["machine"]["python_executable"]
    assert Path(exe).is_file() and Path(exe) == Path(sys.executable).resolve()
    linked = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    assert doc["machine"]["libpython_shared"] == ("libpython" in linked)
    assert doc["machine"]["python_loop_ms"] > 0
    loops = doc["benchmarks"]["consume_1node"]["python_loop_ms"]  # each run's, just before it
    assert set(loops) == {"current", "baseline"} and all(v[0] > 0 for v in loops.values())
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True
    ).stdout
    assert trees["baseline"]["path"] not in listed  # the checkout is removed again


def test_a_baseline_checkout_builds_every_extension_setup_py_declares(tmp_path: Path) -> None:
    """Only client/records/*.c were built in a baseline checkout: a tree whose other
    extensions (client/protocol/_checks.c) ran their Python fallbacks compared as slower than
    it is. Each one setup.py declares is built where its module imports from."""
    if shutil.which("gcc") is None or not (ROOT / ".git").exists():
        pytest.skip("needs gcc and a git checkout")
    compare = _module()
    declared = compare.declared_extensions((ROOT / "setup.py").read_text())
    assert declared.count(("client.protocol._checks", "client/protocol/_checks.c")) == 1
    assert len(declared) == (ROOT / "setup.py").read_text().count("Extension(\n")
    tree = compare.checkout("HEAD", tmp_path)
    try:
        code = "; ".join(f"import {m}; print({m}.__file__)" for m, _src in declared)
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, timeout=60,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert all(line.startswith(str(tree)) for line in out.stdout.split()), out.stdout
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
            capture_output=True,
        )
