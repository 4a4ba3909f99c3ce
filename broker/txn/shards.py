"""The transaction coordinator's shard: the transactional ids of one `__transaction_state`
partition this broker leads, and their loader.

Which partitions this broker leads, their loading and the lock are the internal-topic table's
(broker/coordination/shards.py); the coordinator (broker/txn/coordinator.py) gives it `TxnShard`
and `read_txns`: the partition read from its start, the last record of each id wins (a
tombstone removes the id). The coordinator epoch is the partition's leader epoch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from broker.coordination.shards import Loaded
from broker.txn.log_format import decode_key, decode_value
from broker.txn.state import PREPARED, TxnMetadata
from client.records import decode_records

log = logging.getLogger(__name__)


@dataclass
class TxnEntry:
    md: TxnMetadata | None  # None while the id's first record is being written
    pending: bool = False


@dataclass
class TxnShard:
    partition: int
    leader_epoch: int
    loaded: bool = False
    txns: dict[str, TxnEntry] = field(default_factory=dict)

    @property
    def coordinator_epoch(self) -> int:
        """Kafka's name for it in markers: the partition's leader epoch."""
        return self.leader_epoch

    def contents(self) -> str:
        return f"{len(self.txns)} transactional ids"


def read_txns(chunks: Iterator[tuple[int, bytes]], where: str) -> Loaded[TxnShard]:
    """Every transactional id's latest metadata in a `__transaction_state` partition (a loader
    of CoordinatorShards)."""
    txns: dict[str, TxnMetadata] = {}
    records = skipped = 0
    for offset, data in chunks:
        for r in decode_records(data):
            if r.offset < offset or r.key is None:
                continue
            records += 1
            try:
                tid = decode_key(r.key)
                if r.value is None:
                    txns.pop(tid, None)
                else:
                    txns[tid] = decode_value(tid, r.value)
            except (ValueError, UnicodeDecodeError) as exc:  # not ours: skipped
                skipped += 1
                if skipped == 1:
                    log.warning("%s offset %d: unreadable record skipped (%s)",
                                where, r.offset, exc)  # fmt: skip

    def install(shard: TxnShard) -> None:
        shard.txns = {tid: TxnEntry(md) for tid, md in txns.items()}

    prepared = sum(1 for md in txns.values() if md.state in PREPARED)
    return Loaded(
        install,
        lambda: f"{records} records, {len(txns)} transactional ids ({prepared} to complete)",
    )
