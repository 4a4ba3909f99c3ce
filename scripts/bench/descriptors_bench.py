"""What the broker's per-heartbeat descriptor count costs (broker/log/descriptors.py: it lists
/proc/self/fd once per broker.heartbeat.interval.ms). Prints JSON.

    .venv/bin/python scripts/bench/descriptors_bench.py [--open 100,1000,10000] [--repeat 20]

For each count it holds that many extra descriptors open (/dev/null), raising the soft
RLIMIT_NOFILE up to the hard limit if needed, and times `DescriptorMonitor.reason()` (count +
decision): the best and median of `--repeat` calls, in ms. Wall clock on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--open", default="100,1000,10000")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    from broker.log.descriptors import DescriptorMonitor, open_descriptors

    counts = [int(x) for x in args.open.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(counts) + 1024
    if soft != resource.RLIM_INFINITY and soft < want:
        top = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))
    rows = []
    for n in counts:
        fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(n)]
        try:
            m = DescriptorMonitor()
            times = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                m.reason()
                times.append((time.perf_counter() - t) * 1000)
            rows.append(
                {
                    "extra_open": n,
                    "open_descriptors": open_descriptors(),
                    "best_ms": round(min(times), 3),
                    "median_ms": round(statistics.median(times), 3),
                }
            )
        finally:
            for fd in fds:
                os.close(fd)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    print(json.dumps({"soft_limit": limit, "load_avg_1m": os.getloadavg()[0], "rows": rows}))


if __name__ == "__main__":
    main()
