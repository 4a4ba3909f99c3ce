"""Standalone runner of the replication simulation: `python -m tests.sim.run_replication --seeds
5000` (from the repository root), or `--seed N` to replay one seed. Exit status 1 on the first
failure."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replication_sim import SimFailure, run_seed
from test_replication_sim import config_for


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seeds", type=int, default=1000, help="run seeds 0..N-1 (from --start)")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--seed", type=int, default=None, help="replay one seed")
    p.add_argument("--trace", action="store_true", help="print the replayed seed's last events")
    args = p.parse_args(argv)
    chosen = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    t0 = time.monotonic()
    events = acked = unclean = 0
    for seed in chosen:
        try:
            sim = run_seed(seed, config_for(seed))
        except SimFailure as e:
            print(e, file=sys.stderr)
            return 1
        events += sim.n_events
        acked += len(sim.acked)
        unclean += sim.unclean_elections
        if args.trace:
            print("\n".join(sim.trace))
    took = time.monotonic() - t0
    print(
        f"{len(chosen)} seeds OK, {events} events, {acked} records acked, {unclean} unclean"
        f" elections, {took:.1f}s ({took / len(chosen) * 1000:.1f} ms/seed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
