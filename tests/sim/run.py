"""Standalone runner: `python -m tests.sim.run --seeds 10000` (from the repository root), or
`--seed N` to replay one seed with its trace. Exit status 1 on the first failure."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from raft_sim import SimConfig, SimFailure, run_seed
from test_raft_sim import config_for, membership_config_for


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seeds", type=int, default=2000, help="run seeds 0..N-1 (from --start)")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--seed", type=int, default=None, help="replay one seed")
    p.add_argument("--voters", type=int, default=None, help="override the voter count")
    p.add_argument("--membership", action="store_true", help="membership changes among the faults")
    args = p.parse_args(argv)
    chosen = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    t0 = time.monotonic()
    events = 0
    for seed in chosen:
        if args.membership:
            cfg = membership_config_for(seed)
        elif args.voters is None:
            cfg = config_for(seed)
        else:
            cfg = SimConfig(voters=args.voters)
        try:
            events += run_seed(seed, cfg).n_events
        except SimFailure as e:
            print(e, file=sys.stderr)
            return 1
    took = time.monotonic() - t0
    print(
        f"{len(chosen)} seeds OK, {events} events, {took:.1f}s ({took / len(chosen) * 1000:.1f} ms/seed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
