#!/usr/bin/env python
"""What checking a Produce or Fetch answer costs a partition entry, in Python and in C
(client/protocol/fast_checks.py, client/protocol/_checks.c). Prints JSON.

    .venv/bin/python scripts/bench/response_checks_bench.py [--answers 300] [--rounds 5]

Answers shaped as one producer over 1,000 RF=3 partitions makes them: ~330 one-batch
partition entries in 10 topics (7,000-byte records sections). Three cases: a Fetch answer as
the leader sends it (the fields left at their defaults still to fill), a Fetch answer as a
follower receives it (complete), and a Produce answer. Each case checks `--answers` fresh
answers per round (the process CPU time of the checks alone, the answers built beforehand)
and reports the median over `--rounds` in microseconds per partition entry; `c` is null
when the extension is not built.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from client.protocol import ApiKey
from client.protocol.fast_checks import PYTHON_FAST_CHECKS
from client.records.extensions import optional_extension

TOPICS, PER_TOPIC = 10, 33
RECORDS = b"x" * 7000


def fetch_answer(complete: bool) -> dict[str, Any]:
    rest: dict[str, Any] = (
        {"diverging_epoch": -1, "diverging_end_offset": -1, "aborted_transactions": []}
        if complete
        else {}
    )
    return {
        "error_code": 0,
        "session_id": 7,
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": f"t{t}",
                "partitions": [
                    {
                        "partition": p,
                        "error_code": 0,
                        "high_watermark": 100,
                        "last_stable_offset": 100,
                        "log_start_offset": 0,
                        "records": RECORDS,
                        **rest,
                    }
                    for p in range(PER_TOPIC)
                ],
            }
            for t in range(TOPICS)
        ],
    }


def produce_answer() -> dict[str, Any]:
    part = {
        "error_code": 0,
        "error_message": None,
        "base_offset": 5,
        "log_append_time_ms": -1,
        "log_start_offset": 0,
    }
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": f"t{t}", "partitions": [{"partition": p, **part} for p in range(PER_TOPIC)]}
            for t in range(TOPICS)
        ],
    }


def us_per_entry(
    check: Callable[[Any], Any], make: Callable[[], dict[str, Any]], answers: int, rounds: int
) -> float:
    per_round = []
    for _ in range(rounds):
        bodies = [make() for _ in range(answers)]
        t0 = time.process_time()
        for body in bodies:
            if check(body) is not body:
                raise SystemExit("the check refused a valid answer")
        per_round.append((time.process_time() - t0) / (answers * TOPICS * PER_TOPIC) * 1e6)
    return round(statistics.median(per_round), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--answers", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ext = optional_extension("client.protocol._checks")
    cases: dict[str, tuple[int, Callable[[], dict[str, Any]]]] = {
        "fetch_sent_by_leader": (ApiKey.FETCH, lambda: fetch_answer(False)),
        "fetch_received": (ApiKey.FETCH, lambda: fetch_answer(True)),
        "produce": (ApiKey.PRODUCE, produce_answer),
    }
    out: dict[str, Any] = {"entries_per_answer": TOPICS * PER_TOPIC, "us_per_entry": {}}
    for name, (key, make) in cases.items():
        c_check = None
        if ext is not None:
            c_check = ext.fetch_response if key == ApiKey.FETCH else ext.produce_response
        out["us_per_entry"][name] = {
            "python": us_per_entry(PYTHON_FAST_CHECKS[key], make, args.answers, args.rounds),
            "c": None
            if c_check is None
            else us_per_entry(c_check, make, args.answers, args.rounds),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
