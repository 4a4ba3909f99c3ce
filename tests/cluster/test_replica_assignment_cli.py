"""`gregor topics create --replica-assignment` on three real brokers (issue 22, item 7): each
partition gets exactly the listed replicas, in order, and its first replica leads; partitions
of different sizes are refused with INVALID_REPLICA_ASSIGNMENT."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers import gregor_command, wait_until


def _gregor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*gregor_command(), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_replica_assignment_sets_replicas_and_preferred_leaders(broker_cluster) -> None:
    _q, b = broker_cluster()  # brokers 4, 5, 6
    bs = ["--bootstrap-server", b.bootstrap_all()]
    r = _gregor("topics", "create", "placed", "--replica-assignment", "4:5:6,5:6:4,6:4", *bs)
    assert r.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT" in r.stderr, r.stderr
    r = _gregor("topics", "create", "placed", "--replica-assignment", "4:5:6,5:6:4,6:4:5", *bs)
    assert r.returncode == 0, r.stderr

    def described() -> list | None:
        out = _gregor("topics", "describe", "placed", "--json", *bs)
        parts = json.loads(out.stdout)[0]["partitions"] if out.returncode == 0 else []
        rows = [(p["replicas"], p["leader"], sorted(p["isr"])) for p in parts]
        return rows if rows and all(len(isr) == 3 for _r, _l, isr in rows) else None

    rows = wait_until(described, 30, "every partition with a full ISR")
    assert [(r, leader) for r, leader, _isr in rows] == [
        ([4, 5, 6], 4),
        ([5, 6, 4], 5),
        ([6, 4, 5], 6),
    ]
