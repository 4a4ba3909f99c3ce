"""Atomic batches: the records of one controller call apply together or not at all.

The active controller writes every call's records as `[BatchBegin(count=n), r1, ..., rn]`
(QuorumController._write). Raft commits entry by entry, and a request larger than one
AppendEntries travels in several messages, so a leader that dies mid-way can leave a new leader
with — and committing — only a prefix of a batch (a torn write on a crashing follower can do
the same). Readers of the committed log therefore assemble batches:

- a record outside any batch (logs written before batches existed) is ready at once;
- `BatchBegin(n)` opens a batch; the batch is ready when its n records have arrived;
- a `BatchBegin` arriving while a batch is still open means that batch was cut short (the next
  controller wrote on top of it): its records are dropped, never applied.

Every controller writes a BatchBegin first, so a cut batch is always followed by one. The
offsets of dropped records stay in the log (readers skip them); an image's offset is the last
record of the last complete batch, so snapshots always fall on batch boundaries.

Pure, one owner thread per assembler (MetadataLoader, QuorumController.load).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from controller.metadata.delta import MetadataDelta
from controller.metadata.image import MetadataImage
from controller.metadata.records import BatchBegin

_log = logging.getLogger(__name__)


class BatchAssembler:
    def __init__(self) -> None:
        self._open: list[tuple[int, Any]] = []  # BatchBegin + the records so far
        self._expected = 0  # records the open batch still needs
        self.dropped = 0  # records of cut-short batches, ever

    @property
    def open_records(self) -> int:
        return len(self._open)

    def reset(self) -> None:
        """Forget an open batch (the reader restarts from a snapshot)."""
        self._open, self._expected = [], 0

    def feed(self, offset: int, record: Any) -> list[tuple[int, Any]]:
        """The (offset, record) pairs that are ready to apply after this one, in order."""
        if isinstance(record, BatchBegin):
            if self._open:
                self.dropped += len(self._open)
                _log.warning(
                    "metadata batch at offset %d cut short after %d of %d records: dropped",
                    self._open[0][0],
                    len(self._open) - 1,
                    len(self._open) - 1 + self._expected,
                )
            self._open, self._expected = [(offset, record)], max(0, record.count)
        elif self._open:
            self._open.append((offset, record))
            self._expected -= 1
        else:
            return [(offset, record)]
        if self._expected == 0:
            ready, self._open = self._open, []
            return ready
        return []


def replay_committed(
    image: MetadataImage,
    records: Iterable[tuple[int, Any]],
    assembler: BatchAssembler | None = None,
) -> MetadataImage:
    """Replay committed (offset, record) pairs onto `image`, complete batches only."""
    assembler = assembler or BatchAssembler()
    delta = MetadataDelta(image)
    for offset, record in records:
        for o, r in assembler.feed(offset, record):
            delta.replay(r, o)
    return delta.apply()
