#!/usr/bin/env python
"""Consumer benchmark against a real `gregor server` subprocess; prints one JSON object.

Fills one partition with --records 100-byte values (bulk producer), then times one consumer
reading them all from the beginning (target >= 2,000,000 records/s).

    .venv/bin/python scripts/bench/consume_bench.py [--records 2000000] [--bootstrap H:P]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from produce_bench import start_server, stop_server  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--max-poll-records", type=int, default=100_000)
    ap.add_argument("--bootstrap", help="use a running broker instead of starting one")
    args = ap.parse_args()

    from client import Admin
    from client.cli.perf import run_consume, run_produce

    tmp = tempfile.mkdtemp(prefix="gregor-consume-bench-")
    proc = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            proc, bootstrap = start_server(os.path.join(tmp, "data"))
        topic = f"bench-consume-{int(time.time())}"
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topic(topic, partitions=1)
        fill = run_produce(
            {"bootstrap.servers": bootstrap, "acks": "1", "batch.size": 1 << 20,
             "max.request.size": 8 << 20, "buffer.memory": 256 << 20},
            topic, args.records, args.record_size, "bulk", 5000,
        )  # fmt: skip
        consume = run_consume(
            {"bootstrap.servers": bootstrap, "max.poll.records": args.max_poll_records,
             "max.partition.fetch.bytes": 1 << 20, "fetch.max.bytes": 64 << 20},
            topic, args.records,
        )  # fmt: skip
        print(json.dumps({"bootstrap": bootstrap, "fill": fill, "consume": consume}, indent=2))
    finally:
        if proc is not None:
            stop_server(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
