"""The default client.id is unique per process and per client (issue 22, item 7), as
Kafka's clients number theirs: gregor-ROLE-PID-N."""

from __future__ import annotations

import os
import subprocess
import sys

from client.aio.config import resolve_config


def test_default_client_ids_name_the_process_and_count() -> None:
    ids = [
        resolve_config(role, {"bootstrap.servers": "h:1"}, {}).client_id
        for role in ("consumer", "consumer", "producer", "admin")
    ]
    pid = os.getpid()
    assert len(set(ids)) == 4, ids
    for role, cid in zip(("consumer", "consumer", "producer", "admin"), ids, strict=True):
        prefix, _, n = cid.rpartition("-")
        assert prefix == f"gregor-{role}-{pid}" and n.isdigit(), cid
    mine = resolve_config("consumer", {"bootstrap.servers": "h:1", "client.id": "mine"}, {})
    assert mine.client_id == "mine"


def test_two_processes_get_different_ids() -> None:
    code = (
        "from client.aio.config import resolve_config;"
        "print(resolve_config('consumer', {'bootstrap.servers': 'h:1'}, {}).client_id)"
    )
    got = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(got) == 2 and all(g.startswith("gregor-consumer-") for g in got), got
