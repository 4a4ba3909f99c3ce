"""Appending COMMIT/ABORT markers as partition leader: the one piece of code behind
WriteTxnMarkers (27, broker/handlers/write_txn_markers.py) and the coordinator's markers for
partitions this broker leads itself (broker/txn/markers.py `LocalMarkers`, no request to
itself).

    append_markers(rm, image, on_offsets_marker, specs, answer)
    # answer(codes): one {(topic, partition): error code} per spec, once every marker has its
    # answer (at once, or later on a flusher/timer thread)

Each marker is one control batch (client/records/control.py) per partition, appended with
acks=all semantics through the produce path (broker/replica: a DelayedProduce answers once the
high watermark passed the marker, or REQUEST_TIMED_OUT after MARKER_TIMEOUT_MS). Per
partition: not in the metadata → UNKNOWN_TOPIC_OR_PARTITION; in the metadata but not led here
→ NOT_LEADER_OR_FOLLOWER; an epoch older than the producer's → INVALID_PRODUCER_EPOCH; a
coordinator epoch older than the producer's last marker's → TRANSACTION_COORDINATOR_FENCED
(the log's checks). A marker appended to a `__consumer_offsets` partition is told to
`on_offsets_marker`, which commits or drops the producer's pending transactional offsets there
(TxnOffsetCommit).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.group.offsets_topic import OFFSETS_TOPIC
from client.errors import ErrorCode
from client.records.control import build_marker

if TYPE_CHECKING:
    from broker.replica import ReplicaManager
    from broker.replica.delayed import ProducePartitionStatus
    from controller.metadata.image import MetadataImage

    Statuses = dict[tuple[str, int], ProducePartitionStatus]

MARKER_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms default, which its markers wait

TP = tuple[str, int]
Codes = dict[TP, int]


@dataclass(frozen=True)
class MarkerSpec:
    """One producer's marker for some partitions (one entry of a WriteTxnMarkers request)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: Sequence[TP]


def append_markers(
    rm: ReplicaManager,
    image: MetadataImage,
    on_offsets_marker: Callable[[int, int, bool], None],
    specs: Sequence[MarkerSpec],
    answer: Callable[[list[Codes]], None],
) -> None:
    """Append every spec's marker to its partitions; `answer` the codes once all are known."""
    codes: list[Codes] = [{} for _ in specs]
    lock = threading.Lock()
    pending = [len(specs)]
    if not specs:
        answer(codes)
        return

    def done(i: int, results: Statuses) -> None:
        spec = specs[i]
        for tp, status in results.items():
            if tp[0] == OFFSETS_TOPIC and status.error_code == 0:
                on_offsets_marker(tp[1], spec.producer_id, spec.commit)
        with lock:
            for tp, status in results.items():
                code = status.error_code
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:  # in the metadata, not here
                    code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                codes[i][tp] = code
            pending[0] -= 1
            last = pending[0] == 0
        if last:
            answer(codes)

    def answer_of(i: int) -> Callable[[Statuses], None]:
        return lambda results: done(i, results)

    now = int(time.time() * 1000)
    for i, spec in enumerate(specs):
        batch = build_marker(
            spec.producer_id, spec.producer_epoch, spec.commit, spec.coordinator_epoch, now
        )
        entries: dict[TP, bytes] = {}
        for tp in spec.partitions:
            if image.partition(*tp) is None:
                codes[i][tp] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                entries[tp] = batch
        if not entries:
            done(i, {})
            continue
        results = rm.append_records(-1, MARKER_TIMEOUT_MS, entries, answer_of(i), control=True)
        if results is not None:
            done(i, results)


class ReplicaMarkers:
    """`LocalMarkers` (broker/txn/markers.py) over this broker's replica manager."""

    def __init__(
        self,
        rm: ReplicaManager,
        image: Callable[[], MetadataImage],
        on_offsets_marker: Callable[[int, int, bool], None],
    ) -> None:
        self._rm = rm
        self._image = image
        self._on_offsets_marker = on_offsets_marker

    def append(self, specs: Sequence[MarkerSpec], answer: Callable[[list[Codes]], None]) -> None:
        append_markers(self._rm, self._image(), self._on_offsets_marker, specs, answer)
