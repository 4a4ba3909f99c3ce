"""RecordFilter: which fetched records a consumer may return, by its isolation level (KIP-98).

- read_uncommitted (isolation level 0): every record up to the high watermark;
- read_committed (1): up to the last stable offset (the first offset of a transaction still
  open), which stands in for the high watermark in positions and lags, and not the records of
  aborted transactions: a Fetch answer names them (`aborted_transactions`, the producer and the
  first offset of each) and the decoder drops each such producer's transactional batches from
  there until its ABORT marker (client/records/reader.py, as Kafka's Fetcher);
- either: control records (transaction markers) are never returned, nor the records of a batch
  that come before the offset asked (a batch may begin before it).

Fetch and ListOffsets requests carry `isolation_level`. Loop-owned, as the fetcher.
"""

from __future__ import annotations

from client.aio.types import ConsumerRecord, TopicPartition
from client.protocol.body import Body
from client.records import decode_partition_records


class RecordFilter:
    __slots__ = ("isolation_level", "_check_crcs")

    def __init__(self, read_committed: bool, check_crcs: bool) -> None:
        self.isolation_level = 1 if read_committed else 0
        self._check_crcs = check_crcs

    def readable_end(self, p: Body) -> int:
        """The end of what may be read from a Fetch answer's partition `p`: its high
        watermark, or under read_committed its last stable offset when it gives one."""
        if self.isolation_level and p.get("last_stable_offset", -1) >= 0:
            return int(p["last_stable_offset"])
        return int(p["high_watermark"])

    def aborted(self, p: Body) -> list[Body] | None:
        """The aborted transactions of `p` whose records are dropped (read_committed)."""
        return p.get("aborted_transactions") if self.isolation_level else None

    def decode(
        self, tp: TopicPartition, data: bytes, offset: int, aborted: list[Body] | None
    ) -> tuple[list[ConsumerRecord], int]:
        """The records of `data` (whole batches fetched at `offset`) but control records and
        those of `aborted` transactions, and the index of the first at or past `offset`.
        Raises GregorError (CorruptRecordError, ...) when the bytes are corrupt."""
        records = decode_partition_records(data, tp.topic, tp.partition, self._check_crcs, aborted)
        start = 0
        while start < len(records) and records[start].offset < offset:
            start += 1
        return records, start
