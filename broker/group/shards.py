"""GroupShards: the `__consumer_offsets` partitions this broker leads, and their loading.

    shards = GroupShards(node_id, replica_manager, settings, image, on_tick=expire)
    publisher.subscribe(shards.on_metadata)   # become / stop being coordinator of partitions
    shards.start() ... shards.shutdown()      # the "group-coordinator" thread: loads, on_tick

A group lives in partition `partition_for(group_id)` ("its shard"). While this broker leads that
partition the shard holds the group's membership (broker/group/state.py) and committed offsets
(broker/group/offsets.py). Which partitions this broker leads, their loading and the lock are the
internal-topic table's (broker/coordination/shards.py); this module gives it the group's shard,
its loader (`read_offsets`: the partition read from its log start to its end rebuilds the
committed offsets) and the lookup by group id: `get` answers COORDINATOR_LOAD_IN_PROGRESS until
the shard is loaded, NOT_COORDINATOR on any broker that does not lead it. `lock` guards every
shard and what it holds; its users take it around `get` and whatever they do to the shard.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from broker.coordination.shards import CoordinatorShards, Loaded
from broker.group.offsets import OffsetTable
from broker.group.offsets_topic import OFFSETS_TOPIC, GroupSettings, partition_for
from broker.group.state import ConsumerGroup, GroupError
from client.errors import ErrorCode
from client.records import decode_records, iter_batches
from client.records.control import parse_marker
from client.records.header import CONTROL_BIT, TRANSACTIONAL_BIT

log = logging.getLogger(__name__)


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

    def contents(self) -> str:
        return f"{len(self.groups)} groups"


def read_offsets(chunks: Iterator[tuple[int, bytes]], where: str) -> Loaded[Shard]:
    """The committed offsets of an offsets partition, replayed from its batches (a loader of
    CoordinatorShards); installing them applies the markers that landed meanwhile."""
    table = OffsetTable()
    records = skipped = 0
    for offset, data in chunks:
        for h, mv in iter_batches(data):
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
                            log.warning("%s offset %d: unreadable record skipped (%s)",
                                        where, r.offset, exc)  # fmt: skip
                    records += 1

    def install(shard: Shard) -> None:
        for pid, commit in shard.early_markers:
            table.complete_txn(pid, commit)
        shard.early_markers.clear()
        shard.offsets = table

    return Loaded(install, lambda: f"{records} records, {len(table.groups)} groups with offsets")


class GroupShards(CoordinatorShards[Shard]):
    """The table of `__consumer_offsets` shards, looked up by group id."""

    def __init__(
        self,
        node_id: int,
        replica_manager: Any,
        settings: GroupSettings,
        image: Callable[[], Any],
        on_tick: Callable[[], None],
    ) -> None:
        super().__init__(
            node_id, OFFSETS_TOPIC, replica_manager, image, settings.offsets_partitions,
            new_shard=Shard, loader=read_offsets, on_tick=lambda loaded: on_tick(),
            name="group-coordinator",
        )  # fmt: skip

    def get(self, group_id: str) -> Shard:
        """The loaded shard of `group_id` (lock held), else GroupError."""
        if not group_id:
            raise GroupError(ErrorCode.INVALID_GROUP_ID, "group id is empty")
        p = partition_for(group_id, self.num_partitions())
        shard = self.at(p)
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
        shard = self.at(partition)
        if shard is None:
            return 0
        if not shard.loaded:
            shard.early_markers.append((producer_id, commit))
            return 0
        return shard.offsets.complete_txn(producer_id, commit)
