"""The decoded record types: `Record` (what decode_batch/decode_records return) and
`ConsumerRecord` (what a consumer's poll() returns; decoded in one pass by
client.records.reader.decode_partition_records).

ConsumerRecord lives here, below client.aio, so the batch reader can build it directly
(client.records never imports client.aio); client.aio.types and `client` re-export it.

Immutable values; any thread may use them.
"""

from __future__ import annotations

from typing import NamedTuple


class Record(NamedTuple):
    """A decoded record: absolute offset and timestamp (ms); headers None when absent."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] | None


class ConsumerRecord(NamedTuple):
    """A fetched record. headers: a tuple of (key str, value bytes) pairs, () when none."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
