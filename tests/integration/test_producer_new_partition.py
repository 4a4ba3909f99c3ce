"""An explicit partition the producer does not know yet: after Admin.create_partitions grows a
topic, a producer that cached the old partition count refreshes its metadata and sends to the
new partition; a partition that never appears fails after max.block.ms with a clear error."""

from __future__ import annotations

import asyncio
import time

import pytest
from helpers import returns_within

from client import Admin, Producer, TopicPartition
from client import aio as client_aio
from client.errors import ConfigError, GregorTimeoutError

# Metadata never goes stale by age during the test: only the explicit partition triggers a refresh.
NO_AGE_REFRESH = {"metadata.max.age.ms": 600_000}


def test_send_to_a_partition_added_after_metadata_was_cached(broker_server) -> None:
    bootstrap = broker_server.bootstrap
    with (
        Admin(bootstrap_servers=bootstrap) as admin,
        Producer({"bootstrap.servers": bootstrap, **NO_AGE_REFRESH}) as one,
        Producer({"bootstrap.servers": bootstrap, **NO_AGE_REFRESH}) as bulk,
    ):
        admin.create_topic("grows", partitions=1)
        assert one.send("grows", b"p0", partition=0).result(10).partition == 0
        assert bulk.send_many("grows", [b"a"], partition=0).result(10) == 1
        assert one.partitions_for("grows") == [0] == bulk.partitions_for("grows")

        admin.create_partitions("grows", 3)
        md = one.send("grows", b"p2", partition=2).result(10)
        assert (md.partition, md.offset) == (2, 0)
        assert bulk.send_many("grows", [b"x", b"y"], partition=1).result(10) == 2
        assert one.partitions_for("grows") == [0, 1, 2] == bulk.partitions_for("grows")

        async def via_aio() -> int:
            async with client_aio.Producer(
                bootstrap_servers=bootstrap, **_snake(NO_AGE_REFRESH)
            ) as p:
                await p.send_and_wait("grows", b"before", partition=0)
                await asyncio.to_thread(admin.create_partitions, "grows", 4)
                return (await p.send_and_wait("grows", b"p3", partition=3)).partition

        assert asyncio.run(via_aio()) == 3
        ends = admin.list_offsets({TopicPartition("grows", p): -1 for p in range(4)})
        assert [ends[TopicPartition("grows", p)] for p in range(4)] == [3, 2, 1, 1]


def _snake(cfg: dict) -> dict:
    return {k.replace(".", "_"): v for k, v in cfg.items()}


def test_a_partition_that_never_appears_fails_after_max_block_ms(broker_server) -> None:
    bootstrap = broker_server.bootstrap
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic("fixed", partitions=2)
    with Producer(bootstrap_servers=bootstrap, max_block_ms=300, retry_backoff_ms=20) as p:
        assert p.send("fixed", b"ok", partition=1).result(10).partition == 1
        for send in (
            lambda: p.send("fixed", b"v", partition=5),
            lambda: p.send_many("fixed", [b"v"], partition=5),
        ):
            t0 = time.monotonic()
            with pytest.raises(
                GregorTimeoutError,
                match=r"partition 5 of topic 'fixed' with partition count 2 is not present "
                r"in metadata after 300 ms",
            ):
                returns_within(send, 60, "send() to a partition that never appears")
            assert time.monotonic() - t0 >= 0.25, "blocked for max.block.ms first"
        with pytest.raises(ConfigError, match="must be >= 0"):
            p.send("fixed", b"v", partition=-1)
        # the producer still works afterwards
        assert p.send("fixed", b"again", partition=0).result(10).offset == 0
