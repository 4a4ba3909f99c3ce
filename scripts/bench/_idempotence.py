"""Idempotence on against off for one producer process (100-byte values, bulk mode), runs
interleaved (off, on, off, on) on four fresh topics so that drift of the machine's disk and CPU
speed hits both alike; the best run of each and the cost (goal <= 10%)."""

from __future__ import annotations

from typing import Any


def idempotence_ab(config: dict[str, Any], topics: list[str], records: int) -> dict:
    from client.cli.perf import run_produce

    assert len(topics) == 4
    runs: dict[bool, list[dict]] = {False: [], True: []}
    for i, topic in enumerate(topics):
        idem = bool(i % 2)
        runs[idem].append(
            run_produce({**config, "enable.idempotence": idem}, topic, records, 100, "bulk", 5000)
        )
    best = {k: max(v, key=lambda r: r["records_per_s"]) for k, v in runs.items()}
    return {
        "idempotent": best[True],
        "not_idempotent": best[False],
        "runs_records_per_s": {
            "idempotent": [r["records_per_s"] for r in runs[True]],
            "not_idempotent": [r["records_per_s"] for r in runs[False]],
        },
        "idempotence_cost": round(
            1 - best[True]["records_per_s"] / best[False]["records_per_s"], 3
        ),
    }
