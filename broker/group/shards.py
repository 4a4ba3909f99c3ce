"""ShardTable: the `__consumer_offsets` partitions this broker leads, and their loading.

    shards = ShardTable(node_id, replica_manager, settings, image, on_tick=expire)
    publisher.subscribe(shards.on_metadata)   # become / stop being coordinator of partitions
    shards.start() ... shards.shutdown()      # the "group-coordinator" thread: loads, on_tick

A group lives in partition `partition_for(group_id)` ("its shard"). While this broker leads that
partition the shard holds the group's membership (broker/group/state.py) and committed offsets
(broker/group/offsets.py). Becoming leader of an offsets partition schedules a load: the thread
reads the partition from its log start to its end and rebuilds the committed offsets; `get`
answers COORDINATOR_LOAD_IN_PROGRESS until then, NOT_COORDINATOR on any broker that does not lead
it. `lock` guards every shard and what it holds; its users take it around `get` and whatever
they do to the shard.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from broker.group.offsets import OffsetTable
from broker.group.offsets_topic import OFFSETS_TOPIC, GroupSettings, partition_for
from broker.group.state import ConsumerGroup, GroupError
from client.errors import ErrorCode
from client.records import decode_records, iter_batches
from client.records.control import parse_marker
from client.records.header import CONTROL_BIT, TRANSACTIONAL_BIT

log = logging.getLogger(__name__)

_LOAD_READ_BYTES = 1024 * 1024


@dataclass
class Shard:
    partition: int
    leader_epoch: int
    loaded: bool = False
    groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    offsets: OffsetTable = field(default_factory=OffsetTable)
    # transaction markers (producer id, commit) that landed while the shard was loading,
    # applied once the load read the log (the marker may sit past the end it read)
    early_markers: list[tuple[int, bool]] = field(default_factory=list)


class ShardTable:
    def __init__(
        self,
        node_id: int,
        replica_manager: Any,
        settings: GroupSettings,
        image: Callable[[], Any],
        on_tick: Callable[[], None],
    ) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.settings = settings
        self._image = image
        self._on_tick = on_tick
        self.lock = threading.Lock()
        self._shards: dict[int, Shard] = {}
        self._loads: list[tuple[int, int]] = []
        self._wake = threading.Condition(self.lock)
        self._stop = False
        self._thread: threading.Thread | None = None
        self._prefix = f"[broker={node_id} group-coordinator]"

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="group-coordinator", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        with self.lock:
            self._stop = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _run(self) -> None:
        while True:
            with self.lock:
                if self._stop:
                    return
                if not self._loads:
                    self._wake.wait(0.1)
                loads, self._loads = self._loads, []
            for p, epoch in loads:
                try:
                    self.load(p, epoch)
                except Exception:
                    log.exception("%s loading %s-%d failed", self._prefix, OFFSETS_TOPIC, p)
                    with self.lock:
                        self._loads.append((p, epoch))  # retried on the next round
            self._on_tick()

    # -- leadership and loading -----------------------------------------------------------------

    def on_metadata(self, image: Any, delta: Any) -> None:
        """Publisher subscriber (after the ReplicaManager applied the image)."""
        topic = image.topics.get(OFFSETS_TOPIC)
        parts = topic.partitions if topic is not None else {}
        with self.lock:
            for p, reg in parts.items():
                shard = self._shards.get(p)
                if reg.leader == self.node_id:
                    if shard is None or shard.leader_epoch != reg.leader_epoch:
                        self._shards[p] = Shard(p, reg.leader_epoch)
                        self._loads.append((p, reg.leader_epoch))
                        self._wake.notify_all()
                elif shard is not None:
                    del self._shards[p]
                    log.info(
                        "%s no longer coordinator of %s-%d (%d groups dropped)",
                        self._prefix, OFFSETS_TOPIC, p, len(shard.groups),
                    )  # fmt: skip
            for p in [p for p in self._shards if p not in parts]:
                del self._shards[p]

    def load(self, p: int, epoch: int) -> None:
        """Rebuild partition `p`'s committed offsets from its log, if this broker still leads it
        at `epoch`; the shard is then loaded. Runs on the table's thread (tests call it)."""
        start = time.monotonic()
        part = self.replica_manager.get_partition(OFFSETS_TOPIC, p)
        if part is None or not part.is_leader or part.leader_epoch != epoch:
            return
        table = OffsetTable()
        offset, end = part.log.log_start_offset, part.log.end_offset
        records = skipped = 0
        while offset < end:
            got = part.log.read(offset, _LOAD_READ_BYTES)
            if not got.data:
                break
            for h, mv in iter_batches(got.data):
                if h.next_offset <= offset:
                    continue
                if h.attributes & CONTROL_BIT:  # a transaction's marker: its offsets decided
                    table.complete_txn(h.producer_id, parse_marker(h, mv).commit)
                    continue
                pid = h.producer_id if h.attributes & TRANSACTIONAL_BIT else -1
                for r in decode_records(mv):
                    if r.offset >= offset:
                        try:
                            table.replay(r.key, r.value, r.offset, pid)
                        except Exception as exc:  # not ours: skipped, the rest still loads
                            skipped += 1
                            if skipped == 1:
                                log.warning("%s %s-%d offset %d: unreadable record skipped (%s)",
                                            self._prefix, OFFSETS_TOPIC, p, r.offset,
                                            exc)  # fmt: skip
                        records += 1
            offset = got.next_offset
        with self.lock:
            shard = self._shards.get(p)
            if shard is None or shard.leader_epoch != epoch:
                return
            for pid, commit in shard.early_markers:
                table.complete_txn(pid, commit)
            shard.early_markers.clear()
            shard.offsets = table
            shard.loaded = True
        log.info(
            "%s coordinator of %s-%d (leader epoch %d): loaded %d records, %d groups with"
            " offsets, in %.0f ms",
            self._prefix, OFFSETS_TOPIC, p, epoch, records, len(table.groups),
            (time.monotonic() - start) * 1000,
        )  # fmt: skip

    # -- lookups (lock held) ----------------------------------------------------------------------

    def get(self, group_id: str) -> Shard:
        """The loaded shard of `group_id` (lock held), else GroupError."""
        if not group_id:
            raise GroupError(ErrorCode.INVALID_GROUP_ID, "group id is empty")
        p = partition_for(group_id, self.num_partitions())
        shard = self._shards.get(p)
        if shard is None:
            raise GroupError(
                ErrorCode.NOT_COORDINATOR,
                f"broker {self.node_id} is not the coordinator of group {group_id}",
            )
        if not shard.loaded:
            raise GroupError(
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                f"{OFFSETS_TOPIC}-{p} is being loaded",
            )
        return shard

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> int:
        """A COMMIT/ABORT marker of `producer_id` landed on offsets partition `partition`
        (lock held): its pending offsets there are decided. A shard still loading applies it
        after its load; a partition this broker does not lead has nothing to decide."""
        shard = self._shards.get(partition)
        if shard is None:
            return 0
        if not shard.loaded:
            shard.early_markers.append((producer_id, commit))
            return 0
        return shard.offsets.complete_txn(producer_id, commit)

    def is_current(self, shard: Shard) -> bool:
        """Whether `shard` is still the one this broker coordinates (lock held): false once
        leadership of its partition moved, even if it came back at a later epoch."""
        return self._shards.get(shard.partition) is shard

    def all(self) -> Iterator[Shard]:
        """Every shard (lock held)."""
        return iter(list(self._shards.values()))

    def loaded(self) -> Iterator[Shard]:
        """The loaded shards (lock held)."""
        return (s for s in self.all() if s.loaded)

    def num_partitions(self) -> int:
        topic = self._image().topics.get(OFFSETS_TOPIC)
        return len(topic.partitions) if topic is not None else self.settings.offsets_partitions
