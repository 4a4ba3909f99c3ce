"""OffsetMap: key -> latest offset, bounded in memory (Kafka's SkimpyOffsetMap).

The cleaner fills it from the dirty part of a log (every keyed record, in offset order) and
then keeps a record only when no later offset of its key is in the map. Keys are stored as
their 16-byte MD5 digest, never whole (a collision would need 2^64 keys, as in Kafka).

Memory: `log.cleaner.dedupe.buffer.size` bytes hold `capacity` entries, at ENTRY_BYTES per
entry: what one entry of a Python dict keyed by a 16-byte bytes object to an int costs (the
bytes object 49, the int 32, the dict slot and index ~30 at the 2/3 load a dict keeps, rounded
up). `put` refuses a new key once the map is full; the cleaner then stops its pass there and
cleans the rest in a later pass.

Not thread-safe: one cleaner thread owns one map and reuses it for every pass.
"""

from __future__ import annotations

import hashlib

ENTRY_BYTES = 112
DIGEST_BYTES = 16


def key_digest(key: bytes) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


class OffsetMap:
    def __init__(self, buffer_bytes: int) -> None:
        if buffer_bytes < ENTRY_BYTES:
            raise ValueError(f"dedupe buffer of {buffer_bytes} bytes holds no entry")
        self.capacity = buffer_bytes // ENTRY_BYTES
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1  # the largest offset put

    def __len__(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.capacity

    def put(self, digest: bytes, offset: int) -> bool:
        """Record `offset` as the latest of the key with `digest`; False (nothing changed)
        when the key is new and the map is full."""
        m = self._map
        if digest not in m and len(m) >= self.capacity:
            return False
        m[digest] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset
        return True

    def get(self, digest: bytes) -> int:
        """The latest offset of the key, or -1."""
        return self._map.get(digest, -1)

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1
