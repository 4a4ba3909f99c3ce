"""Committed offsets: the records stored in `__consumer_offsets` and the in-memory table.

Record layout (msgpack, inside ordinary record batches; docs/decisions.md):

    key   = [1, group_id, topic, partition]                 (1: offset commit, key version 1)
    value = {"offset": int, "leader_epoch": int, "metadata": str | None,
             "commit_timestamp": int}                        (None: tombstone, offset deleted)

The table keeps, per group and partition, the latest committed value and the log offset of the
record that carried it: a record only replaces a value written at a lower log offset, so commits
acknowledged out of order (two flusher callbacks) and replays while loading give one answer.

Offsets committed inside a transaction (TxnOffsetCommit) are the same records in a
transactional batch of the producer (its id and epoch). They are held apart, per producer id,
as *pending* until the transaction's marker lands on the partition: COMMIT makes them the
group's committed offsets (each still replacing only a value written at a lower log offset, as
Kafka's `completePendingTxnOffsetCommit`), ABORT drops them. OffsetFetch does not show pending
offsets; with require_stable it answers UNSTABLE_OFFSET_COMMIT for a partition that has one.
Not thread-safe: the coordinator holds its lock around every call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import msgpack

from client.records import build_batch

OFFSET_COMMIT_KEY = 1


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    commit_timestamp: int = 0
    log_offset: int = -1  # where the record sits in __consumer_offsets


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    key: bytes = msgpack.packb([OFFSET_COMMIT_KEY, group_id, topic, partition])
    return key


def offset_value(offset: int, leader_epoch: int, metadata: str | None, now_ms: int) -> bytes:
    value: bytes = msgpack.packb(
        {
            "offset": offset,
            "leader_epoch": leader_epoch,
            "metadata": metadata,
            "commit_timestamp": now_ms,
        }
    )
    return value


def commit_batch(
    group_id: str,
    commits: list[tuple[str, int, int, int, str | None]],
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> bytes:
    """One record batch for [(topic, partition, offset, leader_epoch, metadata)]; with a
    `producer_id`, a transactional batch of that producer (TxnOffsetCommit; no sequence)."""
    now = int(time.time() * 1000)
    return build_batch(
        [
            (offset_key(group_id, t, p), offset_value(off, epoch, meta, now))
            for t, p, off, epoch, meta in commits
        ],
        timestamp_ms=now,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=producer_id >= 0,
    )


def tombstone_batch(group_id: str, tps: list[tuple[str, int]]) -> bytes:
    """One record batch of tombstones (value null): the offsets of `tps` are deleted."""
    now = int(time.time() * 1000)
    return build_batch([(offset_key(group_id, t, p), None) for t, p in tps], timestamp_ms=now)


class OffsetTable:
    def __init__(self) -> None:
        self.groups: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        # producer id -> group -> (topic, partition) -> offset committed in its open transaction
        self.pending: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}

    def put_pending(
        self, producer_id: int, group_id: str, tp: tuple[str, int], value: CommittedOffset
    ) -> None:
        g = self.pending.setdefault(producer_id, {}).setdefault(group_id, {})
        old = g.get(tp)
        if old is None or old.log_offset < value.log_offset:
            g[tp] = value

    def complete_txn(self, producer_id: int, commit: bool) -> int:
        """The marker of `producer_id`'s transaction landed: its pending offsets become the
        committed ones (COMMIT) or are dropped (ABORT). Returns how many there were."""
        groups = self.pending.pop(producer_id, {})
        n = 0
        for group_id, tps in groups.items():
            n += len(tps)
            if commit:
                for tp, value in tps.items():
                    self.put(group_id, tp, value)
        return n

    def get(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        return self.groups.get(group_id, {})

    def put(self, group_id: str, tp: tuple[str, int], value: CommittedOffset) -> None:
        g = self.groups.setdefault(group_id, {})
        old = g.get(tp)
        if old is None or old.log_offset < value.log_offset:
            g[tp] = value

    def delete(self, group_id: str, tp: tuple[str, int]) -> None:
        """A tombstone: the committed offset goes, and so do offsets of `tp` pending in open
        transactions (written before it), as Kafka's deleteAllOffsets."""
        g = self.groups.get(group_id)
        if g is not None:
            g.pop(tp, None)
            if not g:
                del self.groups[group_id]
        for pid in list(self.pending):
            groups = self.pending[pid]
            pending = groups.get(group_id)
            if pending is not None and tp in pending:
                del pending[tp]
                if not pending:
                    del groups[group_id]
                if not groups:
                    del self.pending[pid]

    def pending_tps(self, group_id: str) -> set[tuple[str, int]]:
        return {tp for groups in self.pending.values() for tp in groups.get(group_id, ())}

    def replay(
        self, key: bytes | None, value: bytes | None, log_offset: int, producer_id: int = -1
    ) -> bool:
        """Apply one record read back from the log (`producer_id` >= 0: of a transactional
        batch, so pending until its marker). False for a record this version does not
        know (skipped, so a newer broker's records do not stop an older one from loading)."""
        if key is None:
            return False
        k: Any = msgpack.unpackb(key)
        if not isinstance(k, list) or not k or k[0] != OFFSET_COMMIT_KEY or len(k) != 4:
            return False
        group_id, topic, partition = str(k[1]), str(k[2]), int(k[3])
        if value is None:
            self.delete(group_id, (topic, partition))
            return True
        v: Any = msgpack.unpackb(value)
        committed = CommittedOffset(
            int(v["offset"]),
            int(v.get("leader_epoch", -1)),
            v.get("metadata"),
            int(v.get("commit_timestamp", 0)),
            log_offset,
        )
        if producer_id >= 0:
            self.put_pending(producer_id, group_id, (topic, partition), committed)
        else:
            self.put(group_id, (topic, partition), committed)
        return True
