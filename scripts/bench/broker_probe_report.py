#!/usr/bin/env python
"""Sums up what scripts/bench/broker_probe wrote (one DIR/<pid>.json per probed process) and
prints one JSON object: per process, its CPU seconds, per wrapped function the calls and the
thread CPU and wall time per call (us), the slowest calls, and per request kind (API key and
client id) the p50 / p99 / max of each request stage (ms).

    .venv/bin/python scripts/bench/broker_probe_report.py DIR [--slowest 10]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _stats import percentile

STAGE_NAMES = ("queue", "local", "remote", "response_queue", "send", "total")


def summarize(doc: dict, slowest: int = 10) -> dict:
    """One probed process's file, summed up."""
    functions = {
        label: {
            "calls": n,
            "cpu_us_per_call": round(cpu / n / 1e3, 1),
            "wall_us_per_call": round(wall / n / 1e3, 1),
            "cpu_s": round(cpu / 1e9, 3),
        }
        for label, (n, cpu, wall) in sorted(doc["functions"].items(), key=lambda kv: -kv[1][1])
        if n
    }
    slow = sorted(doc["slow"], key=lambda s: -s[3])[:slowest]
    first = min((s[0] for s in doc["slow"]), default=0)
    groups: dict[str, list[list]] = {}
    for row in doc["stages"]:
        groups.setdefault(f"{row[0]} {row[8]}", []).append(row)
    stages = {}
    for kind, rows in sorted(groups.items()):
        per = {}
        for i, name in enumerate(STAGE_NAMES):
            xs = sorted(r[2 + i] / 1e6 for r in rows)
            per[name] = {
                "p50_ms": round(percentile(xs, 0.5), 3),
                "p99_ms": round(percentile(xs, 0.99), 3),
                "max_ms": round(xs[-1], 3),
            }
        stages[kind] = {"requests": len(rows), **per}
    return {
        "pid": doc["pid"],
        "argv": doc["argv"],
        "cpu_s": doc["cpu_s"],  # since the process started, or since the last reset
        "resets": doc.get("resets", 0),  # BROKER_PROBE_RESET touches it noticed
        "functions": functions,
        "slowest_calls": [
            {
                "at_s": round((s[0] - first) / 1e9, 3),
                "function": s[1],
                "depth": s[2],
                "wall_ms": round(s[3] / 1e6, 2),
                "cpu_ms": round(s[4] / 1e6, 2),
                "thread": s[5],
            }
            for s in slow
        ],
        "stages": stages,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--slowest", type=int, default=10)
    args = ap.parse_args()
    files = sorted(Path(args.dir).glob("*.json"))
    if not files:
        print(f"no probe files in {args.dir}", file=sys.stderr)
        return 1
    out = [summarize(json.loads(f.read_text()), args.slowest) for f in files]
    print(json.dumps({"processes": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
