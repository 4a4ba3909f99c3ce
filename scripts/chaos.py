"""Run fault scenarios of the cluster harness (CHECKER.md S1-S10) for as long as you like.

    python scripts/chaos.py --scenario S1 --duration 300 --seed 42
    python scripts/chaos.py --scenario all --duration 60
    python scripts/chaos.py --scenario S1 --secure      # SASL_SSL on every client and broker
                                                        # link, mTLS between controllers
    python scripts/chaos.py --list

Each run starts 3 controllers and 3 brokers in a work dir (kept: history, node logs, data dirs,
`<scenario>-report.json`), runs the workload through the scenario's seeded fault schedule,
repeated until --duration seconds of faults have passed (0: each fault the minimum number of
times, as CI runs them), heals, checks, prints the report's figures as JSON and a summary table.
The same seed replays the same schedule. Network scenarios run in a network namespace the run
creates and deletes (root, iptables). Exit status 1 when a scenario found an anomaly.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "cluster")]

from fault_scenarios import SCENARIOS, run_scenario, summary_table  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="all", help="S1..S10, or all")
    ap.add_argument("--duration", type=float, default=0.0, help="seconds of faults (0: minimum)")
    ap.add_argument("--seed", type=int, default=None, help="replay this fault schedule")
    ap.add_argument("--out", type=Path, default=None, help="work dir (default: a new tmp dir)")
    ap.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL (SCRAM) on client and broker links, SSL with client certificates on"
        " controller links, certificates from a CA of the run",
    )
    ap.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = ap.parse_args()
    if args.list:
        for s in SCENARIOS.values():
            print(f"{s.name:4} {s.summary}")
        return 0
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario {unknown[0]} (known: {', '.join(SCENARIOS)})")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    out = args.out or Path(tempfile.mkdtemp(prefix="gregor-chaos-"))
    print(f"seed {seed}, work dir {out}", flush=True)
    reports = []
    for name in names:
        workdir = out if len(names) == 1 else out / name
        report = run_scenario(name, workdir, seed, args.duration, args.secure)
        reports.append(report)
        print(json.dumps({k: v for k, v in report.items() if k != "anomalies"}), flush=True)
        if report.get("anomalies"):
            print(json.dumps(report["anomalies"], indent=2), flush=True)
    print(summary_table(reports))
    return 0 if all(r.get("valid", True) for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
