#!/usr/bin/env python
"""Issue 28's goal figures in one JSON document, optionally against a baseline revision.

Runs the benchmarks of scripts/bench/ that feed the performance goals (docs/performance.md),
each as its own process, and prints one JSON object: per figure, the values of every round,
their median, the goal and whether the median meets it. With --baseline REV, the same
benchmarks also run from a checkout of REV (a detached `git worktree` in a temp dir, its C
extensions built in place), alternating current/baseline within each round (the order flips
every round), so a regression shows as a ratio measured on the same machine at the same time,
not as an absolute figure from another day.

Each tree runs its own copy of each benchmark script (they put their own tree first on
sys.path and start servers from it), with the interpreter of this process; a benchmark the
baseline does not have is reported as missing there. Which tree's code a run imported is
checked, not assumed ("imports_from").

A derived figure ("derived" in the document) is computed from two benchmarks' figures of the
same round and tree, one minus the other (issue 28's "acks-only p99 <= fsync p99 + 2 ms":
the p99 of the run with fsync off minus that of the run with fsync on, decision 191); its
median is over the rounds' differences. It is there only when both benchmarks ran. The
end-to-end benchmarks also keep, per run, where the tail sat ("details": p99 and max per
second, the slowest records, a bare fdatasync loop on the disk just before, and the stalls in
which the whole machine waited on its disk while the producer sent: a virtual disk whose flush
stalls for 50-500 ms makes the tail of an fsync-on run by itself). Every run also
records the share of the machine's CPU time a virtual machine's host took meanwhile (steal:
`steal_share` per benchmark and tree, `machine.steal_share` over all runs), and the document
names the CPU (`machine.cpu_model`): the same tree runs 30-40 % slower on one kind of machine
than on another, and a host that takes a fifth of the CPUs for some seconds moves a round. It
names the interpreter too (`machine.python_executable`, `machine.libpython_shared`) with how
fast it runs plain Python here (`machine.python_loop_ms`): pyenv's default build (shared
libpython, no PGO) ran it 1.2 times slower than Debian's python3.11 (PGO and LTO, linked
statically) on one machine, and the per-record produce figures ~15 % lower. Each run records the
same loop's time just before it (`python_loop_ms` per benchmark and tree): a machine whose
speed drifts within a session (a virtual machine's host busy elsewhere) shows there.

    .venv/bin/python scripts/bench/compare.py [--baseline REV] [--rounds 3] [--only a,b]
        [--scale 1.0] [--list]

--scale multiplies record counts and durations (0.05 makes a quick smoke run; the figures of
such a run are not comparable with the goals). Progress goes to stderr, the document to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _proc import cpu_model, libpython_shared, steal_share, steal_ticks

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Figure:
    name: str
    path: tuple[str, ...]  # where the value sits in the benchmark's JSON
    goal: float | None  # None: reported, no goal
    higher_is_better: bool = True


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    args: tuple[str, ...]
    scaled: dict[str, float]  # option -> base value, multiplied by --scale
    figures: tuple[Figure, ...]
    keep: tuple[str, ...] = ()  # keys of the benchmark's JSON kept as each run's "details"


@dataclass(frozen=True)
class Derived:
    """`of` minus `minus`, each a (benchmark, figure) pair, per round."""

    name: str
    of: tuple[str, str]
    minus: tuple[str, str]
    goal: float | None
    higher_is_better: bool = False


# where an end-to-end tail sat (which second, which records) and what the disk gave before
E2E_DETAILS = (
    "per_second",
    "slowest",
    "bare_fdatasync_before",
    "iowait_during",
    "broker_cpu_s",
    "load_avg",
)

BENCHES: tuple[Bench, ...] = (
    Bench(
        "send_1node",
        "send_bench.py",
        ("--brokers", "1", "--repeat", "1"),
        {"--records": 500_000},
        (
            Figure("send_records_per_s", ("median", "send", "records_per_s"), 500_000),
            Figure("callback_records_per_s", ("median", "callback", "records_per_s"), 500_000),
            Figure("bulk_records_per_s", ("median", "bulk", "records_per_s"), 1_200_000),
        ),
    ),
    Bench(
        "send_rf3",
        "send_bench.py",
        ("--brokers", "3", "--repeat", "1", "--modes", "send,callback"),
        {"--records": 300_000},
        (
            Figure("send_records_per_s", ("median", "send", "records_per_s"), 300_000),
            Figure("callback_records_per_s", ("median", "callback", "records_per_s"), 300_000),
        ),
    ),
    Bench(
        "consume_1node",
        "consume_bench.py",
        (),
        {"--records": 2_000_000},
        (Figure("records_per_s", ("consume", "records_per_s"), 2_000_000),),
    ),
    Bench(
        "consume_rf3",
        "consume_bench.py",
        ("--brokers", "3"),
        {"--records": 2_000_000},
        (Figure("records_per_s", ("consume", "records_per_s"), 1_500_000),),
    ),
    Bench(
        "e2e_latency_rf3",
        "e2e_latency_bench.py",
        ("--rate", "5000"),
        {"--seconds": 10},
        (
            Figure("p50_ms", ("p50_ms",), None, higher_is_better=False),
            Figure("p99_ms", ("p99_ms",), 10, higher_is_better=False),
            Figure("max_ms", ("max_ms",), 50, higher_is_better=False),
        ),
        E2E_DETAILS,
    ),
    Bench(  # right after e2e_latency_rf3, so that each round's pair shares the machine
        "e2e_acks_only_rf3",
        "e2e_latency_bench.py",
        ("--rate", "5000", "--fsync", "off"),
        {"--seconds": 10},
        (
            Figure("p50_ms", ("p50_ms",), None, higher_is_better=False),
            Figure("p99_ms", ("p99_ms",), None, higher_is_better=False),
            Figure("max_ms", ("max_ms",), None, higher_is_better=False),
        ),
        E2E_DETAILS,
    ),
    Bench(
        "spread_1000_rf3",
        "partitions_bench.py",
        ("--brokers", "3", "--counts", "1000", "--image-partitions", "0"),
        {"--records": 200_000},
        (Figure("round_robin_vs_one", ("runs", "0", "round_robin_vs_one"), 0.5),),
    ),
)


DERIVED: tuple[Derived, ...] = (
    Derived(
        "acks_only_p99_minus_fsync_p99_ms",
        ("e2e_acks_only_rf3", "p99_ms"),
        ("e2e_latency_rf3", "p99_ms"),
        2,
    ),
)


def _dig(doc: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    return doc


def last_json(stdout: str) -> dict:
    """The benchmark's document: the last JSON object on stdout (some print one line, some an
    indented object)."""
    text = stdout.strip()
    start = text.rfind("\n{")
    candidates = [text[start + 1 :]] if start >= 0 else []
    candidates.append(text)
    for c in candidates:
        try:
            doc = json.loads(c)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
    for line in reversed(text.splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
    raise ValueError(f"no JSON object in the benchmark's output: {text[-300:]!r}")


def bench_argv(bench: Bench, scale: float) -> list[str]:
    argv = list(bench.args)
    for opt, base in bench.scaled.items():
        value = base * scale
        argv += [opt, str(max(1, int(value))) if isinstance(base, int) else f"{value:g}"]
    return argv


def tree_env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH", "")) if p)
    return env


def imports_from(tree: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", "import client, os; print(os.path.dirname(os.path.dirname("
         "os.path.abspath(client.__file__))))"],
        cwd=tempfile.gettempdir(), env=tree_env(tree), capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    return out.stdout.strip()


def run_bench(tree: Path, bench: Bench, scale: float, timeout: float) -> dict:
    script = tree / "scripts" / "bench" / bench.script
    if not script.exists():
        return {"missing": f"{bench.script} is not in this tree"}
    argv = [sys.executable, str(script), *bench_argv(bench, scale)]
    loop_ms = python_loop_ms()  # how fast the machine runs Python just before this run
    t0, steal0 = time.monotonic(), steal_ticks()
    proc = subprocess.run(
        argv, cwd=tree, env=tree_env(tree), capture_output=True, text=True, timeout=timeout
    )
    ran = {
        "seconds": round(time.monotonic() - t0, 1),
        "steal_share": steal_share(steal0, steal_ticks()),
        "python_loop_ms": loop_ms,
    }
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-1500:]}", **ran}
    try:
        doc = last_json(proc.stdout)
    except ValueError as exc:
        return {"error": str(exc), **ran}
    values: dict[str, Any] = {}
    for fig in bench.figures:
        try:
            values[fig.name] = _dig(doc, fig.path)
        except (KeyError, IndexError, TypeError, ValueError):
            values[fig.name] = None
    out: dict[str, Any] = {"values": values, **ran}
    if bench.keep:
        out["details"] = {k: doc.get(k) for k in bench.keep}
    return out


def summarize(bench: Bench, runs: dict[str, list[dict]]) -> dict:
    """Per figure: each tree's values, median, the goal and whether the current median meets
    it, and current/baseline (for a lower-is-better figure, baseline/current, so > 1 is always
    an improvement)."""
    out: dict[str, Any] = {}
    for fig in bench.figures:
        row: dict[str, Any] = {"goal": fig.goal, "higher_is_better": fig.higher_is_better}
        medians: dict[str, float] = {}
        for tree, results in runs.items():
            vals = [r["values"][fig.name] for r in results if r.get("values")]
            vals = [v for v in vals if isinstance(v, int | float)]
            row[tree] = vals
            if vals:
                medians[tree] = statistics.median(vals)
                row[f"{tree}_median"] = medians[tree]
        cur = medians.get("current")
        if cur is not None and fig.goal is not None:
            row["meets_goal"] = cur >= fig.goal if fig.higher_is_better else cur <= fig.goal
        base = medians.get("baseline")
        if cur is not None and base:
            ratio = cur / base if fig.higher_is_better else (base / cur if cur else None)
            row["improvement_ratio"] = round(ratio, 3) if ratio is not None else None
        out[fig.name] = row
    problems = [r.get("error") or r.get("missing") for rs in runs.values() for r in rs]
    problems = [p for p in problems if p]
    if problems:
        out["problems"] = problems
    return out


def derive(d: Derived, runs: dict[str, dict[str, list[dict]]]) -> dict | None:
    """Per tree: `of` - `minus` of each round where both have a value, their median, and (for
    the current tree) whether it meets the goal. No ratio to a baseline: a difference can be
    zero or change sign. None when either benchmark did not run."""
    if d.of[0] not in runs or d.minus[0] not in runs:
        return None
    row: dict[str, Any] = {"goal": d.goal, "higher_is_better": d.higher_is_better,
                           "of": "/".join(d.of), "minus": "/".join(d.minus)}  # fmt: skip
    for tree, results in runs[d.of[0]].items():
        diffs = []
        for a, b in zip(results, runs[d.minus[0]].get(tree, []), strict=False):
            x = (a.get("values") or {}).get(d.of[1])
            y = (b.get("values") or {}).get(d.minus[1])
            if isinstance(x, int | float) and isinstance(y, int | float):
                diffs.append(round(x - y, 3))
        row[tree] = diffs
        if diffs:
            row[f"{tree}_median"] = statistics.median(diffs)
    cur = row.get("current_median")
    if cur is not None and d.goal is not None:
        row["meets_goal"] = cur >= d.goal if d.higher_is_better else cur <= d.goal
    return row


def checkout(rev: str, into: Path) -> Path:
    """A detached worktree of `rev` with its C extensions built in place."""
    tree = into / "baseline"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    # The extensions as setup.py builds them (-O2 -Wall), compiled directly: setup.py run by
    # this venv's own (older) setuptools cannot read pyproject.toml's license field.
    # Every extension that tree's setup.py declares (module and source), each where its
    # module imports from: a tree whose extension was left unbuilt would run its Python
    # fallback and compare as slower than it is.
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for module, src in declared_extensions((tree / "setup.py").read_text()):
        out = tree.joinpath(*module.split(".")).with_suffix("")
        subprocess.run(
            ["gcc", "-O2", "-Wall", "-shared", "-fPIC", f"-I{include}", str(tree / src),
             "-o", str(out) + suffix],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
    return tree


def declared_extensions(setup_py: str) -> list[tuple[str, str]]:
    """(module, its one C source) of every Extension a setup.py declares."""
    return re.findall(r'Extension\(\s*"([\w.]+)",\s*sources=\["([^"]+)"\]', setup_py)


def rev_of(tree: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    return out.stdout.strip() + ("+dirty" if dirty else "")


def python_loop_ms(repeat: int = 3) -> float:
    """The best of `repeat` runs of a fixed piece of plain Python (dict stores and lookups,
    tuples, small strings), in ms: how fast this interpreter runs on this machine now. Two documents'
    figures compare only when theirs are close (an interpreter built without PGO and LTO,
    or a slower CPU, shows here first)."""

    def work() -> int:
        table: dict[int, tuple[int, str]] = {}
        total = 0
        for i in range(300_000):
            table[i & 1023] = (i, str(i & 7))
            total += len(table[i & 511][1])
        return total

    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - t0)
    return round(best * 1000, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", metavar="REV", help="also run a checkout of REV, alternately")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", help="comma-separated benchmark names (see --list)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies records and durations")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per benchmark run")
    ap.add_argument("--list", action="store_true", help="print the benchmarks and exit")
    args = ap.parse_args()
    if args.list:
        for b in BENCHES:
            goals = ", ".join(f"{f.name} {'>=' if f.higher_is_better else '<='} {f.goal}"
                              for f in b.figures if f.goal is not None)  # fmt: skip
            print(f"{b.name:18} {b.script} {' '.join(bench_argv(b, 1.0))}  [{goals}]")
        for d in DERIVED:
            print(f"{d.name}: {'/'.join(d.of)} - {'/'.join(d.minus)} "
                  f"{'>=' if d.higher_is_better else '<='} {d.goal}")  # fmt: skip
        return 0
    names = {b.name for b in BENCHES}
    chosen = [b for b in BENCHES if not args.only or b.name in args.only.split(",")]
    unknown = set(args.only.split(",")) - names if args.only else set()
    if unknown:
        ap.error(f"--only: unknown benchmark(s) {sorted(unknown)}; known: {sorted(names)}")
    if args.rounds < 1 or args.scale <= 0:
        ap.error("--rounds must be >= 1 and --scale > 0")

    tmp = Path(tempfile.mkdtemp(prefix="gregor-compare-"))
    trees: dict[str, Path] = {"current": ROOT}
    try:
        if args.baseline:
            trees["baseline"] = checkout(args.baseline, tmp)
        doc: dict[str, Any] = {
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
                "cpu_model": cpu_model(),
                # the benchmarks run on this interpreter: which, how it was built, and how
                # fast it runs plain Python here (interpreter and CPU in one figure)
                "python_executable": os.path.realpath(sys.executable),
                "libpython_shared": libpython_shared(),
                "python_loop_ms": python_loop_ms(),
                "load_before": [round(x, 2) for x in os.getloadavg()],
            },
            "scale": args.scale,
            "rounds": args.rounds,
            "trees": {
                k: {"path": str(t), "rev": rev_of(t), "imports_from": imports_from(t)}
                for k, t in trees.items()
            },
            "benchmarks": {},
        }
        for k, t in trees.items():
            got = doc["trees"][k]["imports_from"]
            if Path(got).resolve() != t.resolve():
                raise SystemExit(f"{k} tree {t} imports Gregor from {got}: the figures would lie")
        runs: dict[str, dict[str, list[dict]]] = {b.name: {k: [] for k in trees} for b in chosen}
        steal0 = steal_ticks()
        order = list(trees)
        for rnd in range(args.rounds):
            for bench in chosen:
                for k in order:
                    print(f"round {rnd + 1}/{args.rounds} {bench.name} [{k}]", file=sys.stderr,
                          flush=True)  # fmt: skip
                    res = run_bench(trees[k], bench, args.scale, args.timeout)
                    print(f"  {json.dumps(res)}", file=sys.stderr, flush=True)
                    runs[bench.name][k].append(res)
            order.reverse()
        for bench in chosen:
            doc["benchmarks"][bench.name] = summarize(bench, runs[bench.name])
            for key in ("steal_share", "python_loop_ms"):
                doc["benchmarks"][bench.name][key] = {
                    k: [r.get(key) for r in rs] for k, rs in runs[bench.name].items()
                }
            if bench.keep:
                doc["benchmarks"][bench.name]["details"] = {
                    k: [r.get("details") for r in rs] for k, rs in runs[bench.name].items()
                }
        derived = {d.name: derive(d, runs) for d in DERIVED}
        doc["derived"] = {k: v for k, v in derived.items() if v is not None}
        doc["machine"]["load_after"] = [round(x, 2) for x in os.getloadavg()]
        # the share of the CPUs a virtual machine's host took over the runs (0..1): each run's
        # own is its "steal_share" in the progress lines and in `steal_share` per benchmark
        doc["machine"]["steal_share"] = steal_share(steal0, steal_ticks())
        print(json.dumps(doc, indent=2))
        failed = any("problems" in v for v in doc["benchmarks"].values())
        return 1 if failed else 0
    finally:
        if "baseline" in trees:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(trees["baseline"])],
                capture_output=True,
            )
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
