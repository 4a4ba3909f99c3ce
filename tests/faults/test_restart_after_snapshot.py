"""A restart whose metadata loads from a snapshot older than some topics must not lose those
topics' data: the snapshot image alone does not list them (the records after it do), so a
full resync against it would delete their logs before the records re-create them empty."""

from __future__ import annotations

import signal

import pytest
from helpers import RawClient, wait_until

from client.protocol import ApiKey
from client.records import build_batch, decode_records


def _create(c: RawClient, name: str, n: int = 1) -> None:
    body = {
        "topics": [{"name": name, "num_partitions": n, "replication_factor": 1}],
        "timeout_ms": 10_000,
        "validate_only": False,
    }
    assert c.request(ApiKey.CREATE_TOPICS, 0, body)["topics"][0]["error_code"] == 0


def _produce(c: RawClient, topic: str, value: bytes) -> dict:
    body = {
        "acks": -1,
        "timeout_ms": 10_000,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition": 0, "records": build_batch([(None, value)])}],
            }
        ],
    }
    return c.request(ApiKey.PRODUCE, 0, body)["topics"][0]["partitions"][0]


def _values(c: RawClient, topic: str) -> list[bytes] | None:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    p = c.request(ApiKey.FETCH, 0, body)["topics"][0]["partitions"][0]
    if p["error_code"] != 0:
        return None
    return [r.value for r in decode_records(p["records"])] if p["records"] else []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_topics_created_after_the_snapshot_keep_their_data(gregor_process, tmp_path, sig):
    data = tmp_path / "data"
    snap = ("--override", "metadata.log.max.records.between.snapshots=20")
    gp = gregor_process(*snap, data_dir=data)
    with RawClient(gp.address) as c:
        for i in range(6):  # 3 records each: past 20 records, a snapshot is taken
            _create(c, f"early{i}")
        _create(c, "late")  # after the snapshot (the log keeps the records past it)
        assert _produce(c, "early0", b"e")["error_code"] == 0
        assert _produce(c, "late", b"l")["error_code"] == 0
    wait_until(lambda: "metadata snapshot written" in gp.stderr(), 20, "a metadata snapshot")
    gp.proc.send_signal(sig) if sig == signal.SIGTERM else gp.proc.kill()
    gp.proc.wait(30)
    gp2 = gregor_process(*snap, data_dir=data)
    assert "reloaded from snapshot" in gp2.stderr()
    with RawClient(gp2.address) as c:
        wait_until(lambda: _values(c, "late") is not None, 20, "late served again")
        assert _values(c, "late") == [b"l"]
        assert _values(c, "early0") == [b"e"]
    assert "deleted log late-0" not in gp2.stderr()
