"""The client library against a real in-process broker (broker_server fixture): produce and
consume round trips, keys -> Kafka's partitions, headers, compression, seeks, offsets, admin,
closed clients. Skipped (with the reason) while the broker does not serve Produce/Fetch yet."""

from __future__ import annotations

import asyncio

import pytest
from helpers import poll_n

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import ClientClosedError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
from client.partitioner import default_partition
from client.protocol import ApiKey


def _served_apis(bootstrap: str) -> set[int]:
    from client.aio.connection import BrokerConnection

    host, port = bootstrap.rsplit(":", 1)

    async def probe() -> set[int]:
        conn = BrokerConnection(host, int(port))
        await conn.connect()
        conn.close()
        return set(conn.api_versions)

    return asyncio.run(probe())


@pytest.fixture
def broker(broker_server):
    missing = {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.CREATE_TOPICS} - _served_apis(
        broker_server.bootstrap
    )
    if missing:
        pytest.skip(f"broker does not serve {sorted(ApiKey(k).name for k in missing)} yet")
    return broker_server


def test_round_trip_keys_headers(broker) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic("rt", partitions=3)
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topic("rt", partitions=3)
    keys = [b"21", b"foobar", b"abc", b"a-little-bit-long-string"] * 5
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=1) as p:
        futs = [
            p.send("rt", b"v%d" % i, key=k, headers=[("i", b"%d" % i)]) for i, k in enumerate(keys)
        ]
        mds = [f.result(15) for f in futs]
    for k, md in zip(keys, mds, strict=True):
        assert md.partition == default_partition(k, 3)
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        c.subscribe(["rt"])
        got = poll_n(c, len(keys), timeout=15)
    assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(len(keys)))
    by_value = {r.value: r for r in got}
    assert by_value[b"v3"].headers == (("i", b"3"),) and by_value[b"v3"].key == keys[3]
    for part in range(3):
        offsets = [r.offset for r in got if r.partition == part]
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_compressed_bulk(broker, codec: str) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic(f"c-{codec}")
    with Producer(bootstrap_servers=broker.bootstrap, compression_type=codec) as p:
        assert p.send_many(f"c-{codec}", [b"%06d" % i for i in range(2000)]).result(15) == 2000
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        c.assign([TopicPartition(f"c-{codec}", 0)])
        got = poll_n(c, 2000, timeout=15)
    assert [r.value for r in got] == [b"%06d" % i for i in range(2000)]


def test_seek_offsets_and_describe(broker) -> None:
    tp = TopicPartition("s", 0)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic("s")
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            for i in range(10):  # one batch each: ListOffsets by time has batch granularity
                p.send("s", b"%d" % i, timestamp_ms=1_000_000 + i).result(10)
        d = admin.describe_topic("s")
        assert d.partitions[0].high_watermark == 10 and d.partitions[0].log_start_offset == 0
        assert admin.list_offsets({tp: -1}) == {tp: 10}
        assert "s" in admin.list_topics()
    with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="latest") as c:
        c.assign([tp])
        assert c.end_offsets([tp]) == {tp: 10}
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.position(tp) == 10
        c.seek(tp, 6)
        assert [r.value for r in poll_n(c, 4, timeout=15)] == [b"6", b"7", b"8", b"9"]
        assert c.offsets_for_times({tp: 1_000_003}) == {tp: 3}
        c.seek_to_beginning(tp)
        assert c.position(tp) == 0


def test_errors_and_closed_clients(broker) -> None:
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_topic("nope")
    p = Producer(
        bootstrap_servers=broker.bootstrap, max_block_ms=300, allow_auto_create_topics=False
    )
    from client.errors import GregorTimeoutError

    with pytest.raises(GregorTimeoutError, match="nope"):
        p.send("nope", b"v")  # no such topic, no auto-creation: blocks max.block.ms
    p.close()
    with pytest.raises(ClientClosedError):
        p.send("nope", b"v")


def test_large_requests_go_out_vectored_and_arrive_whole(broker, monkeypatch) -> None:
    """Requests of at least VECTORED_MIN_BYTES of batches are written as the batches' own
    buffers (several batches of a partition as one BinParts bin); the broker stores exactly
    what a joined request would have carried."""
    from client.aio import connection
    from client.protocol import BinParts

    seen: list[int] = []
    real = connection.encode_request_parts

    def spy(api_key, version, corr, client_id, body, *args):
        for t in body["topics"]:
            for p in t["partitions"]:
                r = p["records"]
                seen.append(len(r) if type(r) is BinParts else 1)
        return real(api_key, version, corr, client_id, body, *args)

    monkeypatch.setattr(connection, "encode_request_parts", spy)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic("vec", partitions=2)
    values = [b"%07d" % i + b"x" * 993 for i in range(3000)]  # 3 MB, 1000-byte values
    with Producer(bootstrap_servers=broker.bootstrap, batch_size=64 << 10, linger_ms=20) as p:
        assert p.send_many("vec", values[:1500], partition=0).result(30) == 1500
        assert p.send_many("vec", values[1500:], partition=1).result(30) == 1500
    # encode_request_parts runs only for vectored requests; some carried several batches
    assert seen and max(seen) > 1, seen
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        c.assign([TopicPartition("vec", 0), TopicPartition("vec", 1)])
        got = poll_n(c, 3000, timeout=30)
    for part, want in ((0, values[:1500]), (1, values[1500:])):
        recs = [r for r in got if r.partition == part]
        assert [r.value for r in recs] == want
        assert [r.offset for r in recs] == list(range(1500))


def test_acks_0_producer_keeps_sending_past_its_in_flight_limit(broker) -> None:
    # Regression: a request with no answer (acks=0) kept its in-flight slot for good, so an
    # acks=0 producer stalled after max.in.flight.requests.per.connection requests.
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic("acks0", partitions=1)
    cfg = {"bootstrap.servers": broker.bootstrap, "acks": 0, "linger.ms": 0}
    with Producer({**cfg, "max.in.flight.requests.per.connection": 2}) as p:
        for i in range(12):  # each flush sends (at least) one request
            p.send("acks0", b"r%d" % i, partition=0)
            p.flush(10)
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        c.assign([TopicPartition("acks0", 0)])
        got = poll_n(c, 12, timeout=15)
    assert [r.value for r in got] == [b"r%d" % i for i in range(12)]


def test_connect_closed_at_once_is_a_connection_failure(broker, monkeypatch) -> None:
    """Regression (container tier, CI): the peer reset a connection as it was made, and
    uvloop's socket had no descriptor left when TCP_NODELAY was set: a ValueError escaped
    connect() instead of ConnectionFailedError, and the producer's request task died with it."""
    from client.aio.connection import BrokerConnection
    from client.errors import ConnectionFailedError

    class GoneSocket:
        def setsockopt(self, *args: object) -> None:
            raise ValueError("negative file descriptor")

    host, port = broker.bootstrap.rsplit(":", 1)

    async def go() -> None:
        loop = asyncio.get_running_loop()
        real = loop.create_connection
        made = []

        async def create_connection(*args, **kwargs):
            tr, pr = await real(*args, **kwargs)
            made.append(tr)
            monkeypatch.setattr(tr, "get_extra_info", lambda name, default=None: GoneSocket())
            return tr, pr

        monkeypatch.setattr(loop, "create_connection", create_connection)
        conn = BrokerConnection(host, int(port))
        with pytest.raises(ConnectionFailedError, match="closed at once"):
            await conn.connect()
        assert made and made[0].is_closing()
        assert not conn.connected

    asyncio.run(go())


def test_an_unexpected_send_failure_is_retried_not_stranded(broker, monkeypatch) -> None:
    """Regression: an exception that is not a GregorError out of the request path left the
    request's batches muted and unfinished, so flush() waited for them for good."""
    from client.aio.cluster import ClusterClient

    real = ClusterClient.send
    failed = []

    async def send(self, node, api_key, *args, **kwargs):
        if api_key == ApiKey.PRODUCE and not failed:
            failed.append(node)
            raise ValueError("negative file descriptor")
        return await real(self, node, api_key, *args, **kwargs)

    monkeypatch.setattr(ClusterClient, "send", send)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic("stranded", partitions=1)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0, retry_backoff_ms=10) as p:
        md = p.send("stranded", b"once", partition=0).result(15)
        p.flush(15)
    assert failed and md.offset == 0
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        c.assign([TopicPartition("stranded", 0)])
        got = poll_n(c, 1, timeout=15)
    assert [r.value for r in got] == [b"once"]
