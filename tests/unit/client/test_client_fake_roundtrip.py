"""The client library against an in-memory broker: produce/consume round trips, keys,
headers, compression, seeks, offsets, retries on injected errors, closed clients."""

from __future__ import annotations

import pytest
from fake_broker import FakeBroker

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import ClientClosedError, ErrorCode, TopicAlreadyExistsError
from client.partitioner import default_partition


def consume_all(bootstrap: str, tps: list[TopicPartition], n: int, **kw) -> list:
    out: list = []
    with Consumer(bootstrap_servers=bootstrap, **kw) as c:
        c.assign(tps)
        for _ in range(200):
            out += c.poll(timeout_ms=100)
            if len(out) >= n:
                break
    return out


def test_produce_consume_round_trip(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("t", 1)
    with Producer(bootstrap_servers=fake_broker.bootstrap, linger_ms=1) as p:
        futs = [p.send("t", f"v{i}".encode(), headers=[("h", b"x")]) for i in range(100)]
        mds = [f.result(10) for f in futs]
    assert [m.offset for m in mds] == list(range(100))
    recs = consume_all(fake_broker.bootstrap, [TopicPartition("t", 0)], 100)
    assert [r.value for r in recs] == [f"v{i}".encode() for i in range(100)]
    assert recs[0].headers == (("h", b"x"),)
    assert [r.offset for r in recs] == list(range(100))


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_compression(fake_broker: FakeBroker, codec: str) -> None:
    fake_broker.create_topic("c", 1)
    with Producer(bootstrap_servers=fake_broker.bootstrap, compression_type=codec) as p:
        p.send_many("c", [b"x" * 100] * 500).result(10)
    recs = consume_all(fake_broker.bootstrap, [TopicPartition("c", 0)], 500)
    assert len(recs) == 500 and all(r.value == b"x" * 100 for r in recs)


def test_keys_land_on_kafka_partition(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("k", 7)
    with Producer({"bootstrap.servers": fake_broker.bootstrap}) as p:
        for key in (b"21", b"foobar", b"abc", b"a-little-bit-long-string"):
            md = p.send("k", b"v", key=key).result(10)
            assert md.partition == default_partition(key, 7)


def test_send_many_keyed_and_retry_on_not_leader(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("r", 3)
    fake_broker.inject(0, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=2)
    with Producer(bootstrap_servers=fake_broker.bootstrap, retry_backoff_ms=5) as p:
        n = p.send_many("r", [(str(i).encode(), b"v%d" % i) for i in range(300)]).result(10)
    assert n == 300
    total = sum(fake_broker.next_offset[("r", i)] for i in range(3))
    assert total == 300


def test_seek_end_offsets_and_times(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("s", 1)
    tp = TopicPartition("s", 0)
    with Producer(bootstrap_servers=fake_broker.bootstrap) as p:
        for i in range(10):
            p.send("s", b"%d" % i, timestamp_ms=1000 + i)
        p.flush()
    with Consumer(bootstrap_servers=fake_broker.bootstrap, auto_offset_reset="latest") as c:
        c.assign([tp])
        assert c.end_offsets([tp]) == {tp: 10}
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.position(tp) == 10
        c.seek(tp, 7)
        got = []
        while len(got) < 3:
            got += c.poll(timeout_ms=200)
        assert [r.value for r in got] == [b"7", b"8", b"9"]
        assert c.offsets_for_times({tp: 1004}) == {tp: 4}
        assert c.offsets_for_times({tp: 5000}) == {tp: None}
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0


def test_admin(fake_broker: FakeBroker) -> None:
    with Admin(bootstrap_servers=fake_broker.bootstrap) as a:
        a.create_topic("a", partitions=2)
        with pytest.raises(TopicAlreadyExistsError):
            a.create_topic("a")
        assert a.list_topics() == ["a"]
        d = a.describe_topic("a")
        assert [p.partition for p in d.partitions] == [0, 1]
        assert d.partitions[0].high_watermark == 0
        assert a.describe_cluster().cluster_id == "fake"
        a.delete_topic("a")
        assert a.list_topics() == []


def test_closed_clients_raise(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("z", 1)
    p = Producer(bootstrap_servers=fake_broker.bootstrap)
    p.close()
    with pytest.raises(ClientClosedError):
        p.send("z", b"v")
    c = Consumer(bootstrap_servers=fake_broker.bootstrap)
    c.close()
    with pytest.raises(ClientClosedError):
        c.poll()


def test_connection_loss_is_retried(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("l", 1)
    with Producer(bootstrap_servers=fake_broker.bootstrap, retry_backoff_ms=5) as p:
        p.send("l", b"a").result(10)
        fake_broker.close_connections()
        assert p.send("l", b"b").result(10).offset == 1


def test_unreachable_bootstrap_fails_fast_and_cleans_up() -> None:
    import threading

    from client.errors import ConnectionFailedError

    before = threading.active_count()
    with pytest.raises(ConnectionFailedError, match="127.0.0.1:1"):
        Producer(bootstrap_servers="127.0.0.1:1", socket_connection_setup_timeout_ms=1000)
    assert threading.active_count() == before  # the loop thread was stopped
