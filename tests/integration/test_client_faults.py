"""The client library against a real in-process broker, with faults from a real TCP proxy
(tests/fault_proxy.py) in between: retriable and fatal error codes, retries running out,
dropped connections, swallowed and delayed responses, pipelining on one connection. Then the
client behaviours tests/integration/test_client_broker.py does not cover: the asyncio API,
pause/resume, offset resets, oversized batches, admin, config errors, closed and unreachable
clients.

The proxy rewrites error codes of answers the broker really gave, so a "failed" produce was in
fact appended: without idempotence a retried produce duplicates its records, as in Kafka; with
it (the default) the leader answers the retry as a duplicate. The tests count duplicates from
the requests the proxy recorded rather than assume none.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from fault_proxy import FaultProxy
from helpers import async_wait_until, poll_n, returns_within

from client import Admin, Consumer, Producer, TopicPartition, aio
from client.aio.connection import BrokerConnection
from client.errors import (
    ClientClosedError,
    ConfigError,
    ConnectionFailedError,
    ErrorCode,
    GregorTimeoutError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
)
from client.partitioner import default_partition
from client.protocol import ApiKey
from client.records.header import iter_headers

CLUSTER_ID = "client-faults"


@pytest.fixture
def broker(broker_factory):
    return broker_factory(cluster_id=CLUSTER_ID)


@pytest.fixture
def proxy(broker) -> Iterator[FaultProxy]:
    with FaultProxy(broker.address) as p:
        yield p


# -- helpers -------------------------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic(name, partitions=partitions)


async def apoll_n(consumer: aio.Consumer, n: int, timeout: float = 10.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        assert time.monotonic() < deadline, f"got {len(out)} of {n} records"
        out += await consumer.poll(timeout_ms=200)
    return out


async def until(cond: Callable[[], object], msg: str, timeout: float = 5.0) -> None:
    """Poll `cond` on the running loop until true; fail after `timeout` seconds."""
    await async_wait_until(cond, timeout, msg)


def read_log(bootstrap: str, topic: str, partitions: int = 1) -> list:
    """Every record of `topic` up to its end offsets, read straight from the broker."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(bootstrap_servers=bootstrap) as c:
        c.assign(tps)
        total = sum(c.end_offsets(tps).values())
        return poll_n(c, total)


def records_sent(proxy: FaultProxy) -> int:
    """Records in every Produce request that went through the proxy (the broker appended all)."""
    n = 0
    for _key, body in proxy.requests(ApiKey.PRODUCE):
        for t in body["topics"]:
            for p in t["partitions"]:
                n += sum(h.last_offset_delta + 1 for _pos, h in iter_headers(p["records"]))
    return n


# -- faults through the proxy --------------------------------------------------------------------


async def test_retriable_produce_error_is_retried_and_duplicates(broker, proxy) -> None:
    """Without idempotence (was test_retriable_produce_error_then_success)."""
    create_topic(broker.bootstrap, "r")
    proxy.inject_error(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS, times=3)
    async with aio.Producer(
        bootstrap_servers=proxy.bootstrap, retry_backoff_ms=1, enable_idempotence=False
    ) as p:
        md = await (await p.send("r", b"v"))
    assert proxy.pending(ApiKey.PRODUCE) == 0 and proxy.applied("error") == 3
    assert len(proxy.requests(ApiKey.PRODUCE)) == 4
    # Each refused attempt was appended: the acknowledged copy is the fourth.
    assert md.offset == 3
    assert [(r.offset, r.value) for r in read_log(broker.bootstrap, "r")] == [
        (i, b"v") for i in range(4)
    ]


async def test_idempotent_retries_store_the_batch_once(broker, proxy) -> None:
    """Issue 12: the same refused-but-appended attempts, with idempotence (the default): the
    leader answers the retries as duplicates with the first copy's offset; one copy in the log,
    and the next record follows it."""
    create_topic(broker.bootstrap, "ri")
    proxy.inject_error(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS, times=3)
    async with aio.Producer(bootstrap_servers=proxy.bootstrap, retry_backoff_ms=1) as p:
        md = await (await p.send("ri", b"v"))
        assert len(proxy.requests(ApiKey.PRODUCE)) == 4 and proxy.applied("error") == 3
        assert md.offset == 0
        assert (await (await p.send("ri", b"w"))).offset == 1
    assert [(r.offset, r.value) for r in read_log(broker.bootstrap, "ri")] == [
        (0, b"v"),
        (1, b"w"),
    ]


async def test_non_retriable_error_fails_the_future(broker, proxy) -> None:
    """(was test_non_retriable_error_fails_the_future)"""
    create_topic(broker.bootstrap, "n")
    proxy.inject_error(ApiKey.PRODUCE, ErrorCode.MESSAGE_TOO_LARGE)
    async with aio.Producer(bootstrap_servers=proxy.bootstrap, retry_backoff_ms=1) as p:
        fut = await p.send("n", b"v")
        with pytest.raises(MessageTooLargeError):
            await fut
        # Not retried; the producer still works for the next record.
        assert len(proxy.requests(ApiKey.PRODUCE)) == 1
        assert (await (await p.send("n", b"w"))).offset == 1


async def test_retries_exhausted(broker, proxy) -> None:
    """(was test_retries_exhausted)"""
    create_topic(broker.bootstrap, "x")
    proxy.inject_error(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=10)
    async with aio.Producer(bootstrap_servers=proxy.bootstrap, retries=2, retry_backoff_ms=1) as p:
        fut = await p.send("x", b"v")
        with pytest.raises(NotLeaderOrFollowerError) as info:
            await fut
    assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert len(proxy.requests(ApiKey.PRODUCE)) == 3  # the first try and two retries
    assert proxy.pending(ApiKey.PRODUCE) == 7


def test_keyed_send_many_retried_on_not_leader_lands_on_kafka_partitions(broker, proxy) -> None:
    """(was test_send_many_keyed_and_retry_on_not_leader and test_keys_land_on_kafka_partition)"""
    create_topic(broker.bootstrap, "k", 7)
    proxy.inject_error(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=2)
    records = [(b"%d" % i, b"v%d" % i) for i in range(300)]
    with Producer({"bootstrap.servers": proxy.bootstrap, "retry.backoff.ms": 5}) as p:
        assert p.send_many("k", records).result(10) == 300
        for key in (b"21", b"foobar", b"abc", b"a-little-bit-long-string"):
            assert p.send("k", b"v", key=key).result(10).partition == default_partition(key, 7)
    assert proxy.applied("error") == 2
    # NOT_LEADER_OR_FOLLOWER makes the producer refresh metadata before it retries.
    keys = [k for k, _b in proxy.requests()]
    first_fault = keys.index(ApiKey.PRODUCE)
    assert ApiKey.METADATA in keys[first_fault + 1 :]
    got = read_log(broker.bootstrap, "k", 7)
    # The refused batches were appended too, but their retries were answered as duplicates
    # (idempotence): every record once, although more were sent.
    assert len(got) == 304 < records_sent(proxy)
    assert sorted((r.key, r.value) for r in got if r.value != b"v") == sorted(records)
    for r in got:
        assert r.partition == default_partition(r.key, 7), r


def test_fetch_error_is_retried(broker, proxy) -> None:
    create_topic(broker.bootstrap, "f")
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send_many("f", [b"%d" % i for i in range(20)]).result(10)
    proxy.inject_error(ApiKey.FETCH, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=2)
    with Consumer(bootstrap_servers=proxy.bootstrap, retry_backoff_ms=5) as c:
        c.assign([TopicPartition("f", 0)])
        got = poll_n(c, 20)
    assert [r.value for r in got] == [b"%d" % i for i in range(20)]
    assert proxy.applied("error") == 2 and len(proxy.requests(ApiKey.FETCH)) >= 3


def test_connection_loss_is_retried(broker, proxy) -> None:
    """(was test_connection_loss_is_retried)"""
    create_topic(broker.bootstrap, "l")
    with Producer(bootstrap_servers=proxy.bootstrap, retry_backoff_ms=5) as p:
        assert p.send("l", b"a").result(10).offset == 0
        accepted = proxy.accepted
        assert proxy.drop_connections() >= 2  # the client's socket and the proxy's upstream
        assert p.send("l", b"b").result(10).offset == 1
    assert proxy.accepted > accepted  # it reconnected, through the proxy
    assert [r.value for r in read_log(broker.bootstrap, "l")] == [b"a", b"b"]


def test_swallowed_fetch_times_out_and_the_consumer_recovers(broker, proxy) -> None:
    create_topic(broker.bootstrap, "sw")
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        p.send_many("sw", [b"a", b"b"]).result(10)
    proxy.swallow(ApiKey.FETCH)
    with Consumer(
        bootstrap_servers=proxy.bootstrap,
        request_timeout_ms=500,
        fetch_max_wait_ms=50,
        retry_backoff_ms=5,
    ) as c:
        c.assign([TopicPartition("sw", 0)])
        assert [r.value for r in poll_n(c, 2)] == [b"a", b"b"]
    assert proxy.applied("swallow") == 1
    assert proxy.accepted >= 2  # the timed-out connection was closed and replaced


async def test_request_timeout_closes_connection(proxy) -> None:
    """(was test_request_timeout_closes_connection; the broker's answer is swallowed)"""
    conn = BrokerConnection(proxy.host, proxy.port, request_timeout_ms=200)
    await conn.connect()
    assert ApiKey.PRODUCE in conn.api_versions
    proxy.swallow(ApiKey.METADATA)
    try:
        with pytest.raises(GregorTimeoutError, match="Metadata"):
            await conn.request(ApiKey.METADATA, {"topics": None})
        assert not conn.connected
        with pytest.raises(ConnectionFailedError, match=proxy.bootstrap):
            await conn.request(ApiKey.METADATA, {"topics": None})
    finally:
        conn.close()


async def test_delayed_response_arrives_within_and_fails_beyond_the_timeout(proxy) -> None:
    conn = BrokerConnection(proxy.host, proxy.port, request_timeout_ms=2000)
    await conn.connect()
    try:
        proxy.delay(ApiKey.METADATA, 0.05)
        body = await conn.request(ApiKey.METADATA, {"topics": None})
        assert body is not None and body["cluster_id"] == CLUSTER_ID and conn.connected
        proxy.delay(ApiKey.METADATA, 1.0)
        with pytest.raises(GregorTimeoutError, match="Metadata"):
            await conn.request(ApiKey.METADATA, {"topics": None}, timeout_ms=100)
        assert not conn.connected
    finally:
        conn.close()


async def test_pipelined_requests_share_one_connection(proxy) -> None:
    """(was test_pipelined_requests_share_one_connection)"""
    conn = BrokerConnection(proxy.host, proxy.port, max_in_flight=3)
    await conn.connect()
    try:
        proxy.delay(ApiKey.METADATA, 1.0)  # hold the first answer: the next two queue behind
        task = asyncio.ensure_future(  # noqa: RUF006 (held in `task`, awaited below)
            asyncio.gather(*[conn.request(ApiKey.METADATA, {"topics": None}) for _ in range(20)])
        )
        await until(lambda: len(proxy.requests(ApiKey.METADATA)) >= 3, "3 requests in flight")
        # While the first answer is held, the other 17 wait for a slot on the client.
        assert len(proxy.requests(ApiKey.METADATA)) == 3
        assert conn.in_flight == 3 and not task.done()
        bodies = await task
    finally:
        conn.close()
    assert len(proxy.requests(ApiKey.METADATA)) == 20 and proxy.accepted == 1
    assert all(b["cluster_id"] == CLUSTER_ID for b in bodies)
    assert all((br["host"], br["port"]) == proxy.address for b in bodies for br in b["brokers"])


# -- the client against the broker, beyond test_client_broker.py ---------------------------------


async def test_async_round_trip_with_keys_and_headers(broker) -> None:
    """(was test_async_round_trip_with_keys_and_headers)"""
    async with aio.Admin(bootstrap_servers=broker.bootstrap) as a:
        await a.create_topic("a", partitions=2)
    async with aio.Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        futs = [
            await p.send("a", b"v%d" % i, key=b"k%d" % (i % 3), headers={"n": b"%d" % i})
            for i in range(30)
        ]
        mds = await asyncio.gather(*futs)
        assert {m.partition for m in mds} <= {0, 1}
        assert await p.partitions_for("a") == [0, 1]
        assert await (await p.send_many("a", [b"bulk"] * 50, partition=1)) == 50
    async with aio.Consumer(bootstrap_servers=broker.bootstrap) as c:
        c.subscribe(["a"])
        got = await apoll_n(c, 80)
        assert c.assignment() == {TopicPartition("a", 0), TopicPartition("a", 1)}
    assert len(got) == 80
    by_value = {r.value: r for r in got}
    assert by_value[b"v7"].key == b"k1" and by_value[b"v7"].headers == (("n", b"7"),)
    for part in (0, 1):  # per-partition order is send order
        offsets = [r.offset for r in got if r.partition == part]
        assert offsets == list(range(len(offsets)))
    assert [r.value for r in got if r.partition == 1][-50:] == [b"bulk"] * 50


async def test_consumer_pause_resume_and_reset_latest(broker) -> None:
    """(was test_consumer_pause_resume_and_reset_latest)"""
    create_topic(broker.bootstrap, "p")
    tp = TopicPartition("p", 0)
    async with aio.Producer(bootstrap_servers=broker.bootstrap) as p:
        await (await p.send_many("p", [b"old"] * 5))
        async with aio.Consumer(
            bootstrap_servers=broker.bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=50
        ) as c:
            c.assign([tp])
            assert await c.position(tp) == 5
            c.pause(tp)
            assert c.paused() == {tp}
            await (await p.send("p", b"new"))
            assert await c.poll(timeout_ms=100) == []
            c.resume(tp)
            assert [r.value for r in await apoll_n(c, 1)] == [b"new"]


def test_offset_out_of_range_resets_and_times_past_the_end(broker) -> None:
    """(was test_offset_out_of_range_resets; and offsets_for_times past the last record from
    test_seek_end_offsets_and_times)"""
    create_topic(broker.bootstrap, "o")
    tp = TopicPartition("o", 0)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for i in range(3):
            p.send("o", b"x", timestamp_ms=1000 + i)
        p.flush()
    with Consumer(bootstrap_servers=broker.bootstrap) as c:
        c.assign([tp])
        c.seek(tp, 100)
        assert [r.offset for r in poll_n(c, 3)] == [0, 1, 2]
        assert c.offsets_for_times({tp: 5000}) == {tp: None}


async def test_batch_larger_than_partition_fetch_size_is_still_read(broker) -> None:
    """(was test_batch_larger_than_partition_fetch_size_is_still_read)"""
    create_topic(broker.bootstrap, "big")
    async with aio.Producer(bootstrap_servers=broker.bootstrap, batch_size=1 << 20) as p:
        assert await (await p.send_many("big", [b"y" * 1000] * 200)) == 200  # one ~200 KB batch
    async with aio.Consumer(
        bootstrap_servers=broker.bootstrap, max_partition_fetch_bytes=10_000
    ) as c:
        c.assign([TopicPartition("big", 0)])
        got = await apoll_n(c, 200)
    assert [r.offset for r in got] == list(range(200))


async def test_admin_async(broker) -> None:
    """(was test_admin_async)"""
    async with aio.Admin(bootstrap_servers=broker.bootstrap) as a:
        await a.create_topic("adm", partitions=3)
        assert await a.list_topics() == ["adm"]
        tp = TopicPartition("adm", 2)
        assert await a.list_offsets({tp: -1}) == {tp: 0}
        cfgs = await a.describe_configs(topics=["adm"])
        assert cfgs[("topic", "adm")]["retention.ms"].value == "604800000"


def test_admin_delete_topic_and_describe_cluster(broker, proxy) -> None:
    """(was test_admin: the parts test_client_broker.py does not check; through the proxy, so
    the described broker is the proxy's address)"""
    with Admin(bootstrap_servers=proxy.bootstrap) as a:
        a.create_topic("gone", partitions=2)
        assert [p.partition for p in a.describe_topic("gone").partitions] == [0, 1]
        d = a.describe_cluster()
        assert d.cluster_id == CLUSTER_ID
        assert [(b.host, b.port) for b in d.brokers] == [proxy.address]
        a.delete_topic("gone")
        assert "gone" not in a.list_topics()


def test_closed_consumer_raises(broker) -> None:
    """(was test_closed_clients_raise; the producer half is in test_client_broker.py)"""
    c = Consumer(bootstrap_servers=broker.bootstrap)
    c.close()
    with pytest.raises(ClientClosedError):
        c.poll()


# -- no broker needed ----------------------------------------------------------------------------


def test_config_errors_name_the_key() -> None:
    """(was test_config_errors_name_the_key)"""
    with pytest.raises(ConfigError, match="linger.ms"):
        aio.Producer({"linger.msx": 5})
    with pytest.raises(ConfigError, match="acks"):
        aio.Producer(acks="most")
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        aio.Consumer(bootstrap_servers="nohost")


async def test_connection_error_names_address() -> None:
    """(was test_connection_error_names_address)"""
    p = aio.Producer(bootstrap_servers="127.0.0.1:1", socket_connection_setup_timeout_ms=2000)
    with pytest.raises(ConnectionFailedError, match="127.0.0.1:1"):
        await p.start()
    await p.close()


def test_unreachable_bootstrap_fails_fast_and_cleans_up() -> None:
    """(was test_unreachable_bootstrap_fails_fast_and_cleans_up)"""
    before = threading.active_count()
    with pytest.raises(ConnectionFailedError, match="127.0.0.1:1"):
        # fast: a refused connection fails at once, not after max.block.ms (10 min here)
        returns_within(
            lambda: Producer(
                bootstrap_servers="127.0.0.1:1",
                socket_connection_setup_timeout_ms=1000,
                max_block_ms=600_000,
            ),
            60,
            "Producer() against a refused bootstrap",
        )
    assert threading.active_count() == before  # the loop thread was stopped


async def test_a_request_to_a_broker_that_left_the_metadata_fails_retriably(broker) -> None:
    """Found by test_controlled_shutdown_of_each_broker_under_load (CI): a broker in a
    controlled shutdown leaves the metadata before it exits; the client closed its connection
    with ClientClosedError, which failed in-flight produces for good. The error is now a
    retriable ConnectionFailedError, so they go to the partition's new leader."""
    from client.aio.cluster import ClusterMetadata
    from client.errors import ConnectionFailedError

    create_topic(broker.bootstrap, "gone")
    async with aio.Producer(bootstrap_servers=broker.bootstrap) as p:
        cluster = p._cluster
        md = await cluster.refresh(["gone"])
        node = next(iter(md.brokers))
        conn = await cluster.connection(node)
        body = {
            "max_wait_ms": 5000,  # a long poll at the end: in flight when the broker "leaves"
            "topics": [{"name": "gone", "partitions": [{"partition": 0, "fetch_offset": 0}]}],
        }
        pending = asyncio.ensure_future(conn.request(ApiKey.FETCH, body))
        await async_wait_until(lambda: conn.in_flight, 5, "the fetch in flight")
        cluster._drop_departed(ClusterMetadata(brokers={}, topics=md.topics))
        with pytest.raises(ConnectionFailedError, match="left the cluster metadata") as info:
            await pending
        assert info.value.retriable


def test_flush_times_out_naming_what_is_undelivered_then_completes(broker, proxy) -> None:
    """A flush waits for the batches incomplete when it began (one countdown, not a future per
    batch): with the leader's answer held back it times out naming how many are left; a later
    flush sees them delivered."""
    create_topic(broker.bootstrap, "fl", partitions=3)
    with Producer(bootstrap_servers=proxy.bootstrap, linger_ms=0) as p:
        p.partitions_for("fl")
        proxy.delay(ApiKey.PRODUCE, 2.0)
        futs = [p.send("fl", b"v%d" % i, partition=i % 3) for i in range(30)]
        with pytest.raises(GregorTimeoutError, match=r"flush: [1-9]\d* batches still undelivered"):
            p.flush(timeout=0.3)
        p.flush(timeout=30)
        assert all(f.done() for f in futs)
        assert sorted(f.result().partition for f in futs) == sorted(i % 3 for i in range(30))
    assert proxy.applied("delay") == 1
    assert len(read_log(broker.bootstrap, "fl", 3)) == 30


def _metadata_asks(proxy: FaultProxy) -> list[list[str] | None]:
    """The topics each Metadata request through the proxy named (None: every topic)."""
    out: list[list[str] | None] = []
    for _key, body in proxy.requests(ApiKey.METADATA):
        topics = body.get("topics")
        out.append(None if topics is None else sorted(t["name"] for t in topics))
    return out


def test_a_new_topic_is_asked_for_alone_while_the_rest_is_fresh(broker, proxy) -> None:
    """KIP-526: a producer meeting its topics one by one asks for each new one alone (it asked
    for every known topic each time: N topics cost N²/2 topics of answers); a refresh owed
    for another reason (here a NOT_LEADER answer) still asks for all of them."""
    names = [f"k{i}" for i in range(5)]
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        for name in names:
            admin.create_topic(name, partitions=2)
    with Producer(bootstrap_servers=proxy.bootstrap, linger_ms=0, retry_backoff_ms=1) as p:
        p.partitions_for(names[0])
        before = len(_metadata_asks(proxy))
        for name in names[1:]:
            assert p.partitions_for(name) == [0, 1]
        assert _metadata_asks(proxy)[before:] == [[n] for n in names[1:]]
        assert p.send(names[4], b"a", partition=1).result(10).offset == 0
        proxy.inject_error(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        before = len(_metadata_asks(proxy))
        assert p.send(names[2], b"b", partition=0).result(10).offset == 0
        assert sorted(names) in _metadata_asks(proxy)[before:]  # the owed refresh: every topic
    assert proxy.applied("error") == 1
