"""CPU time the client quotas add to each answered request (broker/quota/manager.py), with no
quota in force and with a producer byte rate and a request percentage in force. Prints JSON.

    .venv/bin/python scripts/bench/quota_bench.py [--n 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from types import SimpleNamespace

from broker.quota.manager import QuotaManager


def per_response_us(quotas: dict, n: int) -> float:
    manager = QuotaManager(lambda: quotas)
    conn = SimpleNamespace(principal="User:alice")
    started = time.monotonic_ns() - 50_000
    requests = [
        SimpleNamespace(api_key=0, connection=conn, client_id="app", size=16384, body={},
                        dequeued_ns=started, local_done_ns=0, quota_sent=None)
        for _ in range(n)
    ]  # fmt: skip
    t = time.process_time()
    for r in requests:
        manager.throttle(r, 100)
    return (time.process_time() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=100_000, help="responses per case")
    n = ap.parse_args().n
    busy = {(("user", "alice"),): {"producer_byte_rate": 1e12, "request_percentage": 1e9}}
    print(
        json.dumps(
            {
                "cpu_us_per_response_no_quota": round(per_response_us({}, n), 3),
                "cpu_us_per_response_two_quotas": round(per_response_us(busy, n), 3),
                "loadavg_1m": os.getloadavg()[0],
            }
        )
    )


if __name__ == "__main__":
    main()
