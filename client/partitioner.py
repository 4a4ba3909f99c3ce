"""Partitioning compatible with Kafka's default partitioner.

- Keyed records: `default_partition(key, n) = (murmur2(key) & 0x7fffffff) % n`, the same
  partition a Java/librdkafka "murmur2_random" producer picks for the same key bytes.
- Keyless records: sticky partitioning (KIP-480): stay on one partition until its batch is full,
  then move to another partition chosen at random, so keyless sends form full batches.

`murmur2` is pure Python: about a microsecond for a short key.
"""

from __future__ import annotations

import random
import struct

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
_CACHE_MAX_KEY = 1024
_WORDS: dict[int, struct.Struct] = {}  # unpackers by whole-word length, keys <= 1 KiB only


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's `Utils.murmur2`: the 32-bit murmur2 hash as a signed int (Java semantics)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    words = _WORDS.get(n4)
    if words is None:
        words = struct.Struct(f"<{n4 >> 2}I")  # little-endian 32-bit words
        if n4 <= _CACHE_MAX_KEY:
            _WORDS[n4] = words
    for k in words.unpack_from(data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rem = length & 3
    if rem:
        if rem == 3:
            h ^= data[n4 + 2] << 16
        if rem >= 2:
            h ^= data[n4 + 1] << 8
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(h: int) -> int:
    return h & 0x7FFFFFFF


def default_partition(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner gives `key` among `num_partitions`."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Chooses partitions for keyless records: sticky until `next_partition` is called.

    Not thread-safe on its own; the producer calls it under its accumulator lock.
    """

    __slots__ = ("_rng", "_current")

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._current: dict[str, int] = {}

    def partition(self, topic: str, num_partitions: int, available: list[int] | None = None) -> int:
        p = self._current.get(topic)
        if p is None or p >= num_partitions:
            p = self._choose(num_partitions, available, None)
            self._current[topic] = p
        return p

    def next_partition(
        self, topic: str, prev: int, num_partitions: int, available: list[int] | None = None
    ) -> int:
        """The sticky partition's batch filled up: pick another (if it was still `prev`)."""
        cur = self._current.get(topic)
        if cur is None or cur == prev:
            cur = self._choose(num_partitions, available, prev)
            self._current[topic] = cur
        return cur

    def _choose(self, n: int, available: list[int] | None, avoid: int | None) -> int:
        pool = available if available else range(n)
        if len(pool) == 1:
            return pool[0]
        while True:
            p = pool[self._rng.randrange(len(pool))]
            if p != avoid:
                return p
