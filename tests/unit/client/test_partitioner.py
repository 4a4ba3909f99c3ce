"""murmur2 and the default partitioner against Kafka's own test vectors; sticky partitioning."""

from __future__ import annotations

import random

import pytest

from client.partitioner import StickyPartitioner, default_partition, murmur2

# org.apache.kafka.common.utils.UtilsTest#testMurmur2, plus the vectors Akka's Murmur2Spec
# took from Kafka's implementation.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"1": -1993445489,
    b"12": 126087238,
    b"123": -267702483,
    b"1234": -1614185708,
    b"12345": -1188365604,
}


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items(), ids=lambda v: repr(v))
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert murmur2(bytearray(key)) == expected
    assert murmur2(memoryview(key)) == expected


@pytest.mark.parametrize(("key", "expected"), KAFKA_VECTORS.items(), ids=lambda v: repr(v))
def test_default_partition_is_to_positive_mod_n(key: bytes, expected: int) -> None:
    for n in (1, 3, 7, 64):
        assert default_partition(key, n) == (expected & 0x7FFFFFFF) % n


def test_default_partition_known_values() -> None:
    # Computed by hand from the vectors above: toPositive(h) % 4.
    assert default_partition(b"21", 4) == (-973932308 & 0x7FFFFFFF) % 4
    assert default_partition(b"foobar", 10) == (-790332482 & 0x7FFFFFFF) % 10
    with pytest.raises(ValueError):
        default_partition(b"x", 0)


def test_long_keys_are_hashed_without_caching_forever() -> None:
    key = bytes(range(256)) * 20
    assert murmur2(key) == murmur2(bytearray(key))


def test_sticky_partition_stays_until_batch_full() -> None:
    seed = 1234
    print("seed", seed)
    sp = StickyPartitioner(random.Random(seed))
    first = sp.partition("t", 8)
    assert all(sp.partition("t", 8) == first for _ in range(100))
    second = sp.next_partition("t", first, 8)
    assert second != first
    assert sp.partition("t", 8) == second
    # A stale "batch full" for the old partition does not move it again.
    assert sp.next_partition("t", first, 8) == second


def test_sticky_partitioner_uses_available_partitions() -> None:
    sp = StickyPartitioner(random.Random(7))
    seen = set()
    p = sp.partition("t", 6, available=[1, 4])
    for _ in range(50):
        seen.add(p)
        p = sp.next_partition("t", p, 6, available=[1, 4])
    assert seen == {1, 4}


def test_sticky_single_partition() -> None:
    sp = StickyPartitioner(random.Random(1))
    assert sp.partition("t", 1) == 0
    assert sp.next_partition("t", 0, 1) == 0
