"""The records of `__transaction_state`, in Kafka's TransactionLog format (version 0), and the
partition of a transactional id.

    key   = version int16 (0) | transactional_id string
    value = version int16 (0) | producer_id int64 | producer_epoch int16
            | transaction_timeout_ms int32 | state int8
            | partitions array (int32 count, -1 null) of [topic string, partition ids array of int32]
            | last_update_timestamp_ms int64 | start_timestamp_ms int64
    (string: int16 length then UTF-8; a null value is a tombstone: the id is forgotten)

State bytes are Kafka's (TransactionState.id): Empty 0, Ongoing 1, PrepareCommit 2,
PrepareAbort 3, CompleteCommit 4, CompleteAbort 5, Dead 6, PrepareEpochFence 7. A record of a
key or value version this code does not know is skipped while loading (ValueError here).

Pure functions; any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from broker.txn.state import TxnMetadata, TxnState

TRANSACTION_STATE_TOPIC = "__transaction_state"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, state
_TAIL = struct.Struct(">qq")  # last update, start


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, int32 arithmetic)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Utils.abs(transactionalId.hashCode) % partitions, as Kafka (MIN_VALUE -> 0)."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(2**31) else abs(h)) % num_partitions


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    if len(b) > 0x7FFF:
        raise ValueError(f"string of {len(b)} bytes does not fit an int16 length")
    return _I16.pack(len(b)) + b


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, st: struct.Struct) -> tuple[int, ...]:
        if self.pos + st.size > len(self.data):
            raise ValueError("record ends early")
        out = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return out

    def string(self) -> str:
        (n,) = self.take(_I16)
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"bad string length {n}")
        s = self.data[self.pos : self.pos + n].decode("utf-8")
        self.pos += n
        return s


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(0) + _string(transactional_id)


def decode_key(key: bytes) -> str:
    r = _Reader(key)
    (version,) = r.take(_I16)
    if version != 0:
        raise ValueError(f"transaction log key version {version}")
    return r.string()


def encode_value(md: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(md.partitions):
        by_topic.setdefault(t, []).append(p)
    out = [
        _HEAD.pack(0, md.producer_id, md.producer_epoch, md.timeout_ms, int(md.state)),
        _I32.pack(len(by_topic)),
    ]
    for t, ps in by_topic.items():
        out.append(_string(t))
        out.append(_I32.pack(len(ps)))
        out.extend(_I32.pack(p) for p in ps)
    out.append(_TAIL.pack(md.update_ms, md.start_ms))
    return b"".join(out)


def decode_value(transactional_id: str, value: bytes) -> TxnMetadata:
    r = _Reader(value)
    version, pid, epoch, timeout, state = r.take(_HEAD)
    if version != 0:
        raise ValueError(f"transaction log value version {version}")
    (n,) = r.take(_I32)
    parts: list[tuple[str, int]] = []
    for _ in range(max(n, 0)):
        topic = r.string()
        (k,) = r.take(_I32)
        for _ in range(max(k, 0)):
            parts.append((topic, r.take(_I32)[0]))
    update, start = r.take(_TAIL)
    return TxnMetadata(
        transactional_id, pid, epoch, timeout, TxnState(state), frozenset(parts), start, update
    )


def records_of(entries: Iterable[TxnMetadata]) -> list[tuple[bytes, bytes]]:
    """(key, value) pairs for a record batch."""
    return [(encode_key(md.transactional_id), encode_value(md)) for md in entries]
