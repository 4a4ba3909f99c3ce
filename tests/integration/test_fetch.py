"""Fetch and ListOffsets against an in-process broker: long poll, max bytes, out of range."""

from __future__ import annotations

import threading
import time

import pytest
from helpers import RawClient, wait_until
from replica_helpers import batch, create_topic, fetch, list_offset, produce, values_of

from client.errors import ErrorCode

LONG_WAIT_MS = 240_000  # a poll that only its own expiry could answer


@pytest.fixture
def client(broker_server):
    with RawClient(broker_server.address) as c:
        assert create_topic(c, "f", partitions=2)["error_code"] == 0
        yield c


def test_long_poll_returns_early_when_data_arrives(broker_server, client):
    result: dict = {}

    def poll() -> None:
        with RawClient(broker_server.address, timeout=LONG_WAIT_MS / 1000) as c2:
            t0 = time.monotonic()
            result["resp"] = fetch(c2, "f", 0, 0, max_wait_ms=LONG_WAIT_MS)
            result["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=poll)
    t.start()
    # the poll is parked in the fetch purgatory before we produce
    purgatory = broker_server.server.services.fetch_purgatory
    wait_until(lambda: purgatory.watched() > 0, 5, "fetch parked")
    assert produce(client, "f", 0, batch([b"hello"]))["error_code"] == 0
    # answered by the produce, not by the poll's expiry: far sooner than LONG_WAIT_MS
    wait_until(lambda: not t.is_alive(), LONG_WAIT_MS / 1000 / 4, "the parked fetch answered")
    print(f"long poll answered {result['elapsed'] * 1000:.1f} ms after it was sent")
    assert values_of(result["resp"]["records"]) == [(0, b"hello")]
    assert result["resp"]["high_watermark"] == 1


def test_long_poll_times_out_empty(client):
    t0 = time.monotonic()
    resp = fetch(client, "f", 1, 0, max_wait_ms=300)
    elapsed = time.monotonic() - t0
    print(f"empty long poll of 300 ms answered after {elapsed * 1000:.0f} ms")
    assert resp["error_code"] == 0 and resp["records"] == b""
    assert elapsed >= 0.25, "waited for max_wait_ms"


def test_min_bytes_waits_for_enough_data(broker_server, client):
    assert produce(client, "f", 0, batch([b"x"]))["error_code"] == 0
    t0 = time.monotonic()
    resp = fetch(client, "f", 0, 0, max_wait_ms=300, min_bytes=1 << 20)
    assert time.monotonic() - t0 >= 0.25  # not enough bytes: waited for max_wait_ms
    assert values_of(resp["records"]) == [(0, b"x")]  # and returned what there was


def test_offset_out_of_range(client):
    assert produce(client, "f", 0, batch([b"a", b"b"]))["error_code"] == 0
    resp = fetch(client, "f", 0, 5)
    assert resp["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    assert resp["records"] == b""
    resp = fetch(client, "f", 0, -1)
    assert resp["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    at_end = fetch(client, "f", 0, 2)
    assert at_end["error_code"] == 0 and at_end["records"] == b""


def test_max_bytes_first_batch_whole(client):
    for i in range(4):
        r = produce(client, "f", 0, batch([bytes([65 + i]) * 1000]), corr=i + 1)
        assert r["error_code"] == 0
    # a limit below one batch still returns the first batch whole
    small = fetch(client, "f", 0, 0, partition_max_bytes=10)
    assert [o for o, _ in values_of(small["records"])] == [0]
    two = fetch(client, "f", 0, 0, partition_max_bytes=2500)
    assert [o for o, _ in values_of(two["records"])] == [0, 1]
    mid = fetch(client, "f", 0, 2)
    assert [o for o, _ in values_of(mid["records"])] == [2, 3]


def test_consumers_never_read_above_high_watermark(broker_server, client):
    """Records appended but not yet flushed are invisible to consumers (HW = flushed offset)."""
    services = broker_server.server.services
    log = services.log_manager.get("f", 1)
    part = services.replica_manager.get_partition("f", 1)
    info = log.append_as_leader(batch([b"unflushed"]), part.leader_epoch)  # no flush requested
    assert info.first_offset == 0 and part.high_watermark == 0
    resp = fetch(client, "f", 1, 0)
    assert resp["records"] == b"" and resp["high_watermark"] == 0
    assert list_offset(client, "f", 1, -1)["offset"] == 0
    services.log_manager.request_flush(log)
    wait_until(lambda: part.high_watermark >= 1, 5, "the flush moves the HW")
    assert values_of(fetch(client, "f", 1, 0)["records"]) == [(0, b"unflushed")]


def test_list_offsets(client):
    base = 1_700_000_000_000
    from client.records import build_batch

    for i in range(3):
        records = build_batch([(None, b"v%d" % i)], timestamp_ms=base + i * 1000)
        assert produce(client, "f", 0, records, corr=i + 1)["error_code"] == 0
    assert list_offset(client, "f", 0, -2)["offset"] == 0
    assert list_offset(client, "f", 0, -1)["offset"] == 3
    found = list_offset(client, "f", 0, base + 1500)
    assert found["offset"] == 2 and found["timestamp"] == base + 2000
    assert list_offset(client, "f", 0, base + 10_000)["offset"] == -1
    assert list_offset(client, "nope", 0, -1)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_total_max_bytes_across_partitions(client):
    from client.protocol import ApiKey

    for p in (0, 1):
        for i in range(2):
            r = produce(client, "f", p, batch([b"%d" % p * 1000]), corr=10 * p + i + 1)
            assert r["error_code"] == 0
    parts = [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20} for p in (0, 1)]
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1500,  # less than one partition's two batches
        "topics": [{"name": "f", "partitions": parts}],
    }
    resp = client.request(ApiKey.FETCH, 0, body)
    got = {p["partition"]: values_of(p["records"]) for p in resp["topics"][0]["partitions"]}
    assert [o for o, _ in got[0]] == [0]  # the first batch whole, then the budget is spent
    assert got[1] == []
