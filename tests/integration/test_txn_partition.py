"""Transactions, the partition side, on the wire against one in-process broker (issue 29):
transactional batches written with Produce, ended with WriteTxnMarkers (27); read_committed
Fetch stops at the last stable offset and names the aborted transactions, read_uncommitted
sees everything; ListOffsets' latest follows the isolation level; the client's
read_committed Consumer drops aborted records and never returns markers; a restart keeps the
LSO and the aborted index."""

from __future__ import annotations

from helpers import RawClient, wait_until

from client import Admin, Consumer, TopicPartition
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.records import build_batch, decode_partition_records
from client.records.control import build_marker

TOPIC = "txp"


def _init(c: RawClient) -> int:
    return c.request(ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None})["producer_id"]


def _produce(c: RawClient, batch: bytes) -> dict:
    body = {
        "acks": -1,
        "timeout_ms": 10_000,
        "topics": [{"name": TOPIC, "partitions": [{"partition": 0, "records": batch}]}],
    }
    return c.request(ApiKey.PRODUCE, 0, body)["topics"][0]["partitions"][0]


def _txn(pid: int, seq: int, values: list[bytes], epoch: int = 0) -> bytes:
    return build_batch(
        [(None, v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )


def _marker(pid: int, epoch: int, commit: bool, topic: str = TOPIC) -> dict:
    return {
        "producer_id": pid,
        "producer_epoch": epoch,
        "transaction_result": commit,
        "topics": [{"name": topic, "partition_indexes": [0]}],
        "coordinator_epoch": 0,
    }


def _write_markers(c: RawClient, *markers: dict) -> list[int]:
    resp = c.request(ApiKey.WRITE_TXN_MARKERS, 0, {"markers": list(markers)})
    return [m["topics"][0]["partitions"][0]["error_code"] for m in resp["markers"]]


def _fetch(c: RawClient, isolation: int, offset: int = 0) -> dict:
    body = {
        "max_wait_ms": 0,
        "isolation_level": isolation,
        "topics": [{"name": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset}]}],
    }
    return c.request(ApiKey.FETCH, 0, body)["topics"][0]["partitions"][0]


def _values(p: dict) -> list[bytes]:
    aborted = p.get("aborted_transactions") or None
    return [r.value for r in decode_partition_records(p["records"], TOPIC, 0, True, aborted)]


def _latest(c: RawClient, isolation: int) -> int:
    body = {
        "isolation_level": isolation,
        "topics": [{"name": TOPIC, "partitions": [{"partition": 0, "timestamp": -1}]}],
    }
    return c.request(ApiKey.LIST_OFFSETS, 0, body)["topics"][0]["partitions"][0]["offset"]


def test_read_committed_over_the_wire_and_after_a_restart(broker_factory, tmp_path) -> None:
    data = tmp_path / "data"
    server = broker_factory(data_dir=data)
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic(TOPIC)
    with RawClient((server.host, server.port)) as c:
        a, b, d = _init(c), _init(c), _init(c)
        assert _produce(c, build_batch([(None, b"p0")]))["error_code"] == 0  # 0
        assert _produce(c, _txn(a, 0, [b"a1", b"a2"]))["error_code"] == 0  # 1-2
        assert _produce(c, _txn(b, 0, [b"b1"]))["error_code"] == 0  # 3
        assert _produce(c, build_batch([(None, b"p1")]))["error_code"] == 0  # 4
        # undecided: read_committed stops at the first open transaction
        committed = _fetch(c, 1)
        assert committed["last_stable_offset"] == 1 and _values(committed) == [b"p0"]
        assert _values(_fetch(c, 0)) == [b"p0", b"a1", b"a2", b"b1", b"p1"]
        assert (_latest(c, 1), _latest(c, 0)) == (1, 5)
        # a client may not write a control batch
        refused = _produce(c, build_marker(a, 0, True, 0, 1))
        assert refused["error_code"] == ErrorCode.INVALID_RECORD, refused
        # abort a, commit b: one request, two markers (offsets 5 and 6)
        assert _write_markers(c, _marker(a, 0, False), _marker(b, 0, True)) == [0, 0]
        committed = _fetch(c, 1)
        assert committed["last_stable_offset"] == 7
        assert committed["aborted_transactions"] == [{"producer_id": a, "first_offset": 1}]
        assert _values(committed) == [b"p0", b"b1", b"p1"]
        assert _values(_fetch(c, 1, offset=3))[:1] == [b"b1"]
        uncommitted = _fetch(c, 0)
        assert uncommitted["aborted_transactions"] == []
        assert _values(uncommitted) == [b"p0", b"a1", b"a2", b"b1", b"p1"]  # no markers
        # d opens a transaction at epoch 2; a marker of epoch 1 is fenced; unknown topic
        assert _produce(c, _txn(d, 0, [b"d1"], epoch=2))["error_code"] == 0  # 7
        assert _write_markers(c, _marker(d, 1, True)) == [ErrorCode.INVALID_PRODUCER_EPOCH]
        assert _write_markers(c, _marker(d, 2, True, topic="nope")) == [
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        ]
        no_such_partition = {
            **_marker(d, 2, True),
            "topics": [{"name": TOPIC, "partition_indexes": [5]}],
        }
        assert _write_markers(c, no_such_partition) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert _latest(c, 1) == 7
        assert _fetch(c, 1)["last_stable_offset"] == 7

        # the client: read_committed drops the aborted records, never returns markers
        def consumed(isolation: str) -> list[bytes]:
            got: list[bytes] = []
            with Consumer(bootstrap_servers=server.bootstrap, isolation_level=isolation) as cons:
                cons.assign([TopicPartition(TOPIC, 0)])
                cons.seek(TopicPartition(TOPIC, 0), 0)
                expected = 3 if isolation == "read_committed" else 6
                wait_until(
                    lambda: (
                        bool(got.extend(r.value for r in cons.poll(200))) or len(got) >= expected
                    ),
                    timeout=15,
                    msg=f"{expected} records ({isolation})",
                )
            return got

        assert consumed("read_committed") == [b"p0", b"b1", b"p1"]
        assert consumed("read_uncommitted") == [b"p0", b"a1", b"a2", b"b1", b"p1", b"d1"]
    server.server.shutdown()
    server = broker_factory(data_dir=data)
    with RawClient((server.host, server.port)) as c:
        committed = _fetch(c, 1)  # d's transaction is still open after the restart
        assert committed["last_stable_offset"] == 7
        assert committed["aborted_transactions"] == [{"producer_id": a, "first_offset": 1}]
        assert _write_markers(c, _marker(d, 2, True)) == [0]  # 8
        committed = _fetch(c, 1)
        assert committed["last_stable_offset"] == 9
        assert _values(committed) == [b"p0", b"b1", b"p1", b"d1"]
