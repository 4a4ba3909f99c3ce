"""Authorizer lookups (broker/security/authorizer.py): CPU time per `authorize` call with N
ACLs (literal and prefixed, many principals), for an allowed and a refused lookup, and the time
to build the index. Prints JSON. CPU time (process_time), so a loaded machine inflates it less
than wall time; say the load average beside any figure.

    .venv/bin/python scripts/bench/acl_bench.py [--acls 10000] [--calls 200000] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

from broker.security.authorizer import Authorizer
from client.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--acls", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    bindings = {}
    for i in range(args.acls):
        prefixed = rng.random() < 0.2
        name = f"team{rng.randrange(500)}-" if prefixed else f"topic-{rng.randrange(50_000)}"
        b = AclBinding(
            ResourceType.TOPIC,
            name,
            PatternType.PREFIXED if prefixed else PatternType.LITERAL,
            f"User:u{rng.randrange(1000)}",
            "*",
            rng.choice([AclOperation.READ, AclOperation.WRITE, AclOperation.ALL]),
            AclPermissionType.DENY if rng.random() < 0.05 else AclPermissionType.ALLOW,
        )
        bindings[i.to_bytes(16, "big")] = b
    a = Authorizer([], False, lambda: bindings)
    t0 = time.process_time()
    a.index()
    build_s = time.process_time() - t0
    sample = list(bindings.values())
    queries = []
    for _ in range(1000):
        b = rng.choice(sample)
        name = b.resource_name + ("x" if b.pattern_type == PatternType.PREFIXED else "")
        queries.append((b.principal, AclOperation.DESCRIBE, name))  # mostly allowed (implied)
        queries.append(("User:nobody", AclOperation.READ, name))  # refused
    results = {}
    for label, qs in (("allowed_or_mixed", queries[0::2]), ("refused", queries[1::2])):
        n = args.calls // 2
        t0 = time.process_time()
        for i in range(n):
            p, op, name = qs[i % len(qs)]
            a.authorize(p, "10.0.0.1", op, ResourceType.TOPIC, name)
        results[label + "_us_per_call"] = round((time.process_time() - t0) / n * 1e6, 3)
    print(
        json.dumps(
            {
                "bench": "acl_authorize",
                "acls": args.acls,
                "calls": args.calls,
                "seed": args.seed,
                "index_build_ms": round(build_s * 1000, 1),
                **results,
                "loadavg_1m": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
