#!/usr/bin/env python
"""What TLS and SASL cost: produce and consume over PLAINTEXT, SSL and SASL_SSL in one run,
against one `gregor server` with three listeners; prints one JSON object.

The server (fsync on ack, the default) listens on INTERNAL (PLAINTEXT, inter-broker), SSL and
SASL_SSL (SCRAM-SHA-512, the user from sasl.scram.bootstrap.file), with a test CA made by
tests/tls_certs.py (`cryptography`, a dev dependency). For each --repeat round and each
protocol, in alternating order, a fresh one-partition topic gets --records values of
--record-size bytes (bulk send_many, acks=all, the client's defaults otherwise; the sync
client), then a fresh consumer reads them from the start. Reported per protocol: the median
records/s and MB/s of produce and consume, each as a share of PLAINTEXT's (the issue's goal:
SASL_SSL >= 60 %), and the client process's CPU seconds per 100 MB moved (TLS costs CPU on
both ends; the server's is not measured here). Authentication happens once per connection, so
SASL_SSL against SSL shows what the SCRAM handshake adds to a run (next to nothing).

    .venv/bin/python scripts/bench/tls_bench.py [--records 200000] [--record-size 1024]
        [--repeat 3] [--protocols PLAINTEXT,SSL,SASL_SSL]
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
sys.path[:0] = [str(ROOT), str(ROOT / "scripts" / "bench"), str(ROOT / "tests")]

from _server import start_server, stop_server  # noqa: E402

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
PASSWORD = "bench-secret"


def _ports(proc) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """The `listener NAME: bound HOST:PORT, ...` lines after the ready line."""
    out: dict[str, int] = {}
    while len(out) < 3:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("gregor server stopped before listing its listeners")
        words = line.split()
        if words and words[0] == "listener":
            out[words[1].rstrip(":")] = int(line.split("bound ")[1].split(",")[0].rsplit(":", 1)[1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--protocols", default=",".join(PROTOCOLS))
    args = ap.parse_args()
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    bad = [p for p in protocols if p not in PROTOCOLS]
    if bad or "PLAINTEXT" not in protocols:
        ap.error(f"--protocols: some of {', '.join(PROTOCOLS)}, PLAINTEXT included")

    from tls_certs import Pki

    from client import Admin
    from client.cli.perf import run_consume, run_produce

    base = Path(tempfile.mkdtemp(prefix="gregor-tls-bench-"))
    pki = Pki(base / "pki")
    node = pki.issue("broker-1")
    users = base / "users.txt"
    users.write_text(f"SCRAM-SHA-512=[name=bench,password={PASSWORD}]\n")
    extra = []
    for key, value in {
        "listeners": "INTERNAL://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.certfile": node.cert,
        "ssl.keyfile": node.key,
        "sasl.scram.bootstrap.file": str(users),
    }.items():
        extra += ["--override", f"{key}={value}"]
    server = start_server(str(base / "data"), extra)
    try:
        ports = _ports(server.proc)
        configs = {
            "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{ports['INTERNAL']}"},
            "SSL": {
                "bootstrap.servers": f"127.0.0.1:{ports['SSL']}",
                "security.protocol": "SSL",
                "ssl.cafile": pki.ca,
            },
            "SASL_SSL": {
                "bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}",
                "security.protocol": "SASL_SSL",
                "ssl.cafile": pki.ca,
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bench",
                "sasl.password": PASSWORD,
            },
        }
        runs: dict[str, list[dict]] = {p: [] for p in protocols}
        for round_ in range(args.repeat):
            order = protocols if round_ % 2 == 0 else list(reversed(protocols))
            for proto in order:
                cfg = configs[proto]
                topic = f"tls-bench-{proto.lower()}-{round_}"
                with Admin(cfg) as admin:
                    admin.create_topic(topic, partitions=1)
                cpu0 = time.process_time()
                prod = run_produce(
                    {**cfg, "acks": "all"}, topic, args.records, args.record_size, mode="bulk"
                )
                cpu1 = time.process_time()
                cons = run_consume(cfg, topic, args.records)
                cpu2 = time.process_time()
                mb = args.records * args.record_size / 1e8  # per 100 MB
                runs[proto].append(
                    {
                        "produce_records_per_s": prod["records_per_s"],
                        "produce_mb_per_s": prod["mb_per_s"],
                        "produce_errors": prod["errors"],
                        "consume_records_per_s": cons["records_per_s"],
                        "consume_mb_per_s": cons["mb_per_s"],
                        "consumed": cons["records"],
                        "client_cpu_s_per_100mb_produce": round((cpu1 - cpu0) / mb, 2),
                        "client_cpu_s_per_100mb_consume": round((cpu2 - cpu1) / mb, 2),
                    }
                )
                print(f"{proto} round {round_}: {json.dumps(runs[proto][-1])}", file=sys.stderr)
    finally:
        stop_server(server.proc)
        shutil.rmtree(base, ignore_errors=True)

    def med(proto: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[proto])

    summary = {}
    for proto in protocols:
        summary[proto] = {
            key: med(proto, key)
            for key in (
                "produce_records_per_s",
                "produce_mb_per_s",
                "consume_records_per_s",
                "consume_mb_per_s",
                "client_cpu_s_per_100mb_produce",
                "client_cpu_s_per_100mb_consume",
            )
        }
        summary[proto]["produce_vs_plaintext"] = round(
            med(proto, "produce_records_per_s") / med("PLAINTEXT", "produce_records_per_s"), 3
        )
        summary[proto]["consume_vs_plaintext"] = round(
            med(proto, "consume_records_per_s") / med("PLAINTEXT", "consume_records_per_s"), 3
        )
    print(
        json.dumps(
            {
                "bench": "tls",
                "records": args.records,
                "record_size": args.record_size,
                "repeat": args.repeat,
                "loadavg": os.getloadavg(),
                "summary": summary,
                "runs": runs,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
