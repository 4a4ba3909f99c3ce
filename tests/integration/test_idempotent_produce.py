"""Idempotent produce on the wire against a combined `gregor server` (issue 12, broker side):
InitProducerId hands out distinct ids from controller-allocated blocks; a batch sent twice with
the same producer id, epoch and sequence is stored once and both answers carry the same
offset; a sequence gap and a fenced epoch are refused; the state survives
a restart of the server."""

from __future__ import annotations

from helpers import RawClient

from client import Admin
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.records import build_batch, decode_records


def _produce(c: RawClient, pid: int, epoch: int, seq: int, values: list[bytes]) -> dict:
    batch = build_batch(
        [(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    body = {
        "acks": -1,
        "timeout_ms": 10_000,
        "topics": [{"name": "idem", "partitions": [{"partition": 0, "records": batch}]}],
    }
    return c.request(ApiKey.PRODUCE, 0, body)["topics"][0]["partitions"][0]


def _init(c: RawClient) -> int:
    resp = c.request(ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None})
    assert resp["error_code"] == 0 and resp["producer_epoch"] == 0, resp
    return resp["producer_id"]


def test_duplicates_are_stored_once(broker_factory, tmp_path) -> None:
    data = tmp_path / "data"
    server = broker_factory(data_dir=data)
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("idem")
    with RawClient((server.host, server.port)) as c:
        ids = [_init(c) for _ in range(3)]
        assert len(set(ids)) == 3
        pid = ids[0]
        first = _produce(c, pid, 0, 0, [b"a", b"b"])
        assert first["error_code"] == 0, first
        again = _produce(c, pid, 0, 0, [b"a", b"b"])  # a retry
        assert (again["error_code"], again["base_offset"]) == (0, first["base_offset"])
        assert _produce(c, pid, 0, 2, [b"c"])["base_offset"] == first["base_offset"] + 2
        gap = _produce(c, pid, 0, 9, [b"x"])
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert "expected 3" in gap["error_message"]
        assert _produce(c, pid, 1, 0, [b"d"])["error_code"] == 0  # a new epoch
        old = _produce(c, pid, 0, 3, [b"y"])
        assert old["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
        # a transactional id is the transaction coordinator's (tests/integration/test_txn_coordinator.py):
        # without FindCoordinator first, no broker coordinates it yet
        tx = c.request(ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": "t1"})
        assert tx["error_code"] == ErrorCode.NOT_COORDINATOR
    server.server.shutdown()
    server = broker_factory(data_dir=data)
    with RawClient((server.host, server.port)) as c:
        after = _produce(c, pid, 1, 0, [b"d"])  # the retry after a restart: still a duplicate
        assert (after["error_code"], after["base_offset"]) == (0, first["base_offset"] + 3)
        fetched = c.request(
            ApiKey.FETCH,
            0,
            {
                "max_wait_ms": 0,
                "topics": [{"name": "idem", "partitions": [{"partition": 0, "fetch_offset": 0}]}],
            },
        )["topics"][0]["partitions"][0]
        assert [r.value for r in decode_records(fetched["records"])] == [b"a", b"b", b"c", b"d"]
        assert _init(c) not in ids  # a new block after the restart
