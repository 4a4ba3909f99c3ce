"""The asyncio core against the in-memory broker: same API as the facade, as coroutines;
connection errors name the address; config errors name the key."""

from __future__ import annotations

import asyncio

import pytest
from fake_broker import FakeBroker

from client.aio import Admin, Consumer, Producer, TopicPartition
from client.aio.connection import BrokerConnection
from client.errors import ConfigError, ConnectionFailedError, ErrorCode, MessageTooLargeError
from client.protocol import ApiKey


async def test_async_round_trip_with_keys_and_headers(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("a", 2)
    async with Producer(bootstrap_servers=fake_broker.bootstrap, linger_ms=0) as p:
        futs = [
            await p.send("a", b"v%d" % i, key=b"k%d" % (i % 3), headers={"n": b"%d" % i})
            for i in range(30)
        ]
        mds = await asyncio.gather(*futs)
        assert {m.partition for m in mds} <= {0, 1}
        assert await p.partitions_for("a") == [0, 1]
        n = await (await p.send_many("a", [b"bulk"] * 50, partition=1))
        assert n == 50
    async with Consumer(bootstrap_servers=fake_broker.bootstrap) as c:
        c.subscribe(["a"])
        got = []
        while len(got) < 80:
            got += await c.poll(timeout_ms=200)
        assert c.assignment() == {TopicPartition("a", 0), TopicPartition("a", 1)}
    by_value = {r.value: r for r in got}
    assert by_value[b"v7"].key == b"k1" and by_value[b"v7"].headers == (("n", b"7"),)
    # Per-partition order is send order.
    for part in (0, 1):
        offs = [r.offset for r in got if r.partition == part]
        assert offs == sorted(offs)


async def test_consumer_pause_resume_and_reset_latest(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("p", 1)
    tp = TopicPartition("p", 0)
    async with Producer(bootstrap_servers=fake_broker.bootstrap) as p:
        await (await p.send_many("p", [b"old"] * 5))
    async with Consumer(bootstrap_servers=fake_broker.bootstrap, auto_offset_reset="latest") as c:
        c.assign([tp])
        assert await c.position(tp) == 5
        c.pause(tp)
        assert c.paused() == {tp}
        async with Producer(bootstrap_servers=fake_broker.bootstrap) as p:
            await (await p.send("p", b"new"))
        assert await c.poll(timeout_ms=50) == []
        c.resume(tp)
        got = []
        while not got:
            got = await c.poll(timeout_ms=200)
        assert [r.value for r in got] == [b"new"]


async def test_offset_out_of_range_resets(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("o", 1)
    tp = TopicPartition("o", 0)
    async with Producer(bootstrap_servers=fake_broker.bootstrap) as p:
        await (await p.send_many("o", [b"x"] * 3))
    async with Consumer(bootstrap_servers=fake_broker.bootstrap) as c:
        c.assign([tp])
        c.seek(tp, 100)
        got = []
        while len(got) < 3:
            got += await c.poll(timeout_ms=200)
        assert [r.offset for r in got] == [0, 1, 2]


async def test_retriable_produce_error_then_success(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("r", 1)
    fake_broker.inject(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS, times=3)
    async with Producer(bootstrap_servers=fake_broker.bootstrap, retry_backoff_ms=1) as p:
        md = await (await p.send("r", b"v"))
    assert md.offset == 0


async def test_non_retriable_error_fails_the_future(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("n", 1)
    fake_broker.inject(ApiKey.PRODUCE, ErrorCode.MESSAGE_TOO_LARGE)
    async with Producer(bootstrap_servers=fake_broker.bootstrap) as p:
        fut = await p.send("n", b"v")
        with pytest.raises(MessageTooLargeError):
            await fut


async def test_retries_exhausted(fake_broker: FakeBroker) -> None:
    fake_broker.create_topic("x", 1)
    fake_broker.inject(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=10)
    async with Producer(
        bootstrap_servers=fake_broker.bootstrap, retries=2, retry_backoff_ms=1
    ) as p:
        fut = await p.send("x", b"v")
        with pytest.raises(Exception) as info:
            await fut
        assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_connection_error_names_address() -> None:
    p = Producer(bootstrap_servers="127.0.0.1:1", socket_connection_setup_timeout_ms=2000)
    with pytest.raises(ConnectionFailedError, match="127.0.0.1:1"):
        await p.start()
    await p.close()


async def test_request_timeout_closes_connection(fake_broker: FakeBroker) -> None:
    conn = BrokerConnection("127.0.0.1", fake_broker.port, request_timeout_ms=200)
    await conn.connect()
    assert ApiKey.PRODUCE in conn.api_versions
    fake_broker.create_topic("slow", 1)
    # A fetch that waits 5 s on the broker cannot beat a 200 ms client timeout.
    body = {
        "max_wait_ms": 5000,
        "min_bytes": 1,
        "topics": [{"name": "slow", "partitions": [{"partition": 0, "fetch_offset": 0}]}],
    }
    from client.errors import GregorTimeoutError

    with pytest.raises(GregorTimeoutError, match="Fetch"):
        await conn.request(ApiKey.FETCH, body)
    assert not conn.connected
    conn.close()


async def test_pipelined_requests_share_one_connection(fake_broker: FakeBroker) -> None:
    conn = BrokerConnection("127.0.0.1", fake_broker.port, max_in_flight=3)
    await conn.connect()
    bodies = await asyncio.gather(
        *[conn.request(ApiKey.METADATA, {"topics": None}) for _ in range(20)]
    )
    assert all(b["cluster_id"] == "fake" for b in bodies)
    conn.close()


async def test_admin_async(fake_broker: FakeBroker) -> None:
    async with Admin(bootstrap_servers=fake_broker.bootstrap) as a:
        await a.create_topic("adm", partitions=3)
        assert (await a.list_topics()) == ["adm"]
        tp = TopicPartition("adm", 2)
        assert await a.list_offsets({tp: -1}) == {tp: 0}
        cfgs = await a.describe_configs(topics=["adm"])
        assert cfgs[("topic", "adm")]["retention.ms"].value == "604800000"


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match="linger.ms"):
        Producer({"linger.msx": 5})
    with pytest.raises(ConfigError, match="acks"):
        Producer(acks="most")
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        Consumer(bootstrap_servers="nohost")


async def test_batch_larger_than_partition_fetch_size_is_still_read(
    fake_broker: FakeBroker,
) -> None:
    fake_broker.create_topic("big", 1)
    async with Producer(bootstrap_servers=fake_broker.bootstrap, batch_size=1 << 20) as p:
        await (await p.send_many("big", [b"y" * 1000] * 200))  # one ~200 KB batch
    async with Consumer(
        bootstrap_servers=fake_broker.bootstrap, max_partition_fetch_bytes=10_000
    ) as c:
        c.assign([TopicPartition("big", 0)])
        got = []
        while len(got) < 200:
            got += await c.poll(timeout_ms=500)
        assert len(got) == 200
