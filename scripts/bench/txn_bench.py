#!/usr/bin/env python
"""The cost of transactions (issue 29: <= 15 % at 1,000 records per transaction): per-record
send() of 100-byte records (acks=all) into one partition of a real `gregor server`, idempotent
against transactional with 1,000 and with 100 records per transaction, in one run; prints one
JSON object.

Each round runs the three modes in a rotated order against one fresh server (so a drift of the
shared machine's load hits each alike). A mode sends --records records and ends when the last
is acknowledged: the idempotent producer flushes, a transactional one commits its last
transaction (a read_committed reader sees them then). Records/s per mode per round; the
summary gives each mode's median and the transactional modes' cost against idempotent,
`1 - txn/idempotent` in percent.

    .venv/bin/python scripts/bench/txn_bench.py [--records 100000] [--rounds 3] [--no-flush-on-ack]

`--no-flush-on-ack` runs the server with `log.flush.on.ack=false` (Kafka's page-cache
behaviour: nothing is fsynced before it is acknowledged), which shows how much of the cost is
the fsyncs a transaction waits for in a row.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import start_server, stop_server  # noqa: E402

from client import Admin, Producer  # noqa: E402

VALUE = b"x" * 100


def run_mode(bootstrap: str, topic: str, mode: str, records: int, tag: str) -> float:
    """Records/s of one mode: from the first send() to the last acknowledgement."""
    if mode == "idempotent":
        with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
            t0 = time.perf_counter()
            for _ in range(records):
                p.send(topic, VALUE, partition=0)
            p.flush()
            return records / (time.perf_counter() - t0)
    per_txn = int(mode.split("_")[1])
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, transactional_id=f"bench-{tag}") as p:
        p.init_transactions()
        t0 = time.perf_counter()
        sent = 0
        while sent < records:
            p.begin_transaction()
            n = min(per_txn, records - sent)
            for _ in range(n):
                p.send(topic, VALUE, partition=0)
            p.commit_transaction()
            sent += n
        return records / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-flush-on-ack", action="store_true",
                    help="server with log.flush.on.ack=false (no fsync before acknowledging)")
    ap.add_argument("--per-txn", default="1000,100",
                    help="records per transaction, comma-separated (a mode txn_N each)")
    args = ap.parse_args()
    modes = ("idempotent", *(f"txn_{int(n)}" for n in args.per_txn.split(",")))
    rates: dict[str, list[float]] = {m: [] for m in modes}
    tmp = Path(tempfile.mkdtemp(prefix="gregor-txn-bench-"))
    try:
        server = start_server(
            str(tmp / "data"),
            overrides={"log.flush.on.ack": "false"} if args.no_flush_on_ack else None,
        )
        try:
            with Admin(bootstrap_servers=server.bootstrap) as admin:
                for m in modes:
                    admin.create_topic(m, 1)
            warm = f"warm-{os.getpid()}"
            run_mode(server.bootstrap, modes[1], modes[1], 1_000, warm)  # makes the state topic
            for r in range(args.rounds):
                order = modes[r % len(modes) :] + modes[: r % len(modes)]
                for m in order:
                    rates[m].append(run_mode(server.bootstrap, m, m, args.records, f"{m}-{r}"))
                    print(f"round {r + 1} {m}: {rates[m][-1]:,.0f} records/s", file=sys.stderr)
        finally:
            stop_server(server.proc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {m: statistics.median(v) for m, v in rates.items()}
    out = {
        "records": args.records,
        "rounds": args.rounds,
        "log_flush_on_ack": not args.no_flush_on_ack,
        "load_average": os.getloadavg()[0],
        "records_per_s": {m: [round(x) for x in v] for m, v in rates.items()},
        "median_records_per_s": {m: round(v) for m, v in med.items()},
        "cost_pct": {
            m: round(100 * (1 - med[m] / med["idempotent"]), 1) for m in modes[1:]
        },
        "goal": "cost at 1,000 records per transaction <= 15 %",
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
