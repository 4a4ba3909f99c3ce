"""OffsetWrites: committed offsets in, out and deleted, for the groups of a GroupShards table.

    writes = OffsetWrites(shards, replica_manager, settings)
    writes.commit(body, respond)                 # OffsetCommit
    writes.txn_commit(body, respond)             # TxnOffsetCommit: pending until the marker
    writes.fetch_offsets(group_id, topics)       # OffsetFetch
    writes.delete_group(group_id, answer)        # DeleteGroups, one group
    writes.delete_offsets(group_id, tps, answer) # OffsetDelete

A write is one record batch appended to the group's shard partition through the ReplicaManager
with acks=all and answered from the DelayedProduce callback once replicated; the shard's table is
updated then, so OffsetFetch never shows an offset that a failover could lose.

Writes reach the log in the order they were validated: `append_order` is held from a write's
validation to its append (never while waiting for replication), so a commit accepted before a
rebalance cannot land after the next owner's. It is taken before the shard table's lock, never
inside it; a write's completion takes only the table's lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from broker.group.assignors import TP
from broker.group.offsets import CommittedOffset, commit_batch, tombstone_batch
from broker.group.offsets_topic import OFFSETS_TOPIC, GroupSettings
from broker.group.shards import GroupShards, Shard
from broker.group.state import GroupError
from client.errors import ErrorCode
from client.protocol.body import Body

log = logging.getLogger(__name__)

MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes default

_WRITE_ERRORS = {
    int(ErrorCode.NOT_LEADER_OR_FOLLOWER): ErrorCode.NOT_COORDINATOR,
    int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION): ErrorCode.NOT_COORDINATOR,
    int(ErrorCode.KAFKA_STORAGE_ERROR): ErrorCode.NOT_COORDINATOR,
    int(ErrorCode.NOT_ENOUGH_REPLICAS): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    int(ErrorCode.REQUEST_TIMED_OUT): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    # TxnOffsetCommit of a producer whose epoch a newer one fenced (KIP-588's name)
    int(ErrorCode.INVALID_PRODUCER_EPOCH): ErrorCode.PRODUCER_FENCED,
}


class OffsetWrites:
    def __init__(self, shards: GroupShards, replica_manager: Any, settings: GroupSettings) -> None:
        self.shards = shards
        self.replica_manager = replica_manager
        self.settings = settings
        self.append_order = threading.Lock()
        self._prefix = f"[broker={shards.node_id} group-coordinator]"

    # -- OffsetCommit ----------------------------------------------------------------------------

    def commit(self, body: Body, respond: Callable[[Body], None]) -> None:
        """Validate, append (acks=all) and answer through `respond` (now or from a flusher or
        timer thread once the record is replicated)."""
        commits, early = _parse_commits(body)
        with self.append_order:
            self._commit_validated(body, commits, early, respond)

    def _commit_validated(
        self,
        body: Body,
        commits: list[tuple[str, int, int, int, str | None]],
        early: dict[TP, int],
        respond: Callable[[Body], None],
    ) -> None:
        """Validate the committer and append, under `append_order`."""
        group_id = body["group_id"]
        try:
            with self.shards.lock:
                shard = self.shards.get(group_id)
                group = shard.groups.get(group_id)
                if group is not None:
                    group.check_commit(body["member_id"], body["member_epoch"])
                elif body["member_id"] or body["member_epoch"] >= 0:
                    raise GroupError(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"group {group_id} has no member {body['member_id']}",
                    )
        except GroupError as exc:
            respond(_commit_response(body, {}, exc.code, exc.message))
            return
        if not commits:
            respond(_commit_response(body, early, 0, None))
            return

        def applied(base_offset: int) -> None:
            for i, (t, p, off, epoch, meta) in enumerate(commits):
                shard.offsets.put(
                    group_id, (t, p), CommittedOffset(off, epoch, meta, 0, base_offset + i)
                )

        self._write(
            shard,
            commit_batch(group_id, commits),
            applied,
            lambda code, msg: respond(_commit_response(body, early, code, msg)),
        )

    def _write(
        self,
        shard: Shard,
        batch: bytes,
        applied: Callable[[int], None],
        answer: Callable[[int, str | None], None],
        coordinator: bool = False,
    ) -> None:
        """Append `batch` to the shard's partition with acks=all (`coordinator`: a
        transactional batch of TxnOffsetCommit, broker/replica). Once replicated,
        `applied(base offset)` runs under the lock (if this broker still leads the partition),
        then `answer(0, None)`; a failed write answers the coordinator error it maps to."""
        tp = (OFFSETS_TOPIC, shard.partition)

        def done(statuses: Mapping[Any, Any]) -> None:
            st = statuses[tp]
            code = int(st.error_code)
            if code == 0:
                with self.shards.lock:
                    if self.shards.is_current(shard):
                        applied(st.base_offset)
                answer(0, None)
                return
            answer(int(_WRITE_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)), st.error_message)

        kw = {"coordinator": True} if coordinator else {}
        res = self.replica_manager.append_records(
            -1, self.settings.commit_timeout_ms, {tp: batch}, done, **kw
        )
        if res is not None:
            done(res)

    # -- TxnOffsetCommit -------------------------------------------------------------------------

    def txn_commit(self, body: Body, respond: Callable[[Body], None]) -> None:
        """TxnOffsetCommit: the offsets, as a transactional batch of the producer (its id and
        epoch; the log refuses an older epoch), appended with acks=all; once replicated they
        are pending in the shard's table until the transaction's marker lands (offsets.py).
        The committer is checked as Kafka's TxnOffsetCommit v3 (KIP-447): a request without
        member id and generation (-1) is not checked; otherwise the member must be in the group
        at that epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
        commits, early = _parse_commits(body)
        with self.append_order:
            self._txn_commit_validated(body, commits, early, respond)

    def _txn_commit_validated(
        self,
        body: Body,
        commits: list[tuple[str, int, int, int, str | None]],
        early: dict[TP, int],
        respond: Callable[[Body], None],
    ) -> None:
        group_id, member_id, generation = body["group_id"], body["member_id"], body["generation_id"]
        pid, epoch = body["producer_id"], body["producer_epoch"]
        try:
            with self.shards.lock:
                shard = self.shards.get(group_id)
                group = shard.groups.get(group_id)
                unchecked = not member_id and generation < 0 and body["group_instance_id"] is None
                if group is not None and not unchecked:
                    group.check_commit(member_id, generation)
                elif group is None and not unchecked:
                    raise GroupError(
                        ErrorCode.UNKNOWN_MEMBER_ID, f"group {group_id} has no member {member_id}"
                    )
        except GroupError as exc:
            respond(_txn_commit_response(body, {}, exc.code))
            return
        if not commits:
            respond(_txn_commit_response(body, early, 0))
            return

        def applied(base_offset: int) -> None:
            for i, (t, p, off, lepoch, meta) in enumerate(commits):
                shard.offsets.put_pending(
                    pid, group_id, (t, p), CommittedOffset(off, lepoch, meta, 0, base_offset + i)
                )

        def answer(code: int, _msg: str | None) -> None:
            respond(_txn_commit_response(body, early, code))

        self._write(
            shard, commit_batch(group_id, commits, pid, epoch), applied, answer, coordinator=True
        )

    # -- DeleteGroups / OffsetDelete ------------------------------------------------------------

    def delete_group(self, group_id: str, answer: Callable[[int, str | None], None]) -> None:
        """DeleteGroups for one group: tombstones for its committed offsets, then forgotten.
        NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND when unknown."""
        with self.append_order:
            self._delete_group_validated(group_id, answer)

    def _delete_group_validated(
        self, group_id: str, answer: Callable[[int, str | None], None]
    ) -> None:
        try:
            with self.shards.lock:
                shard = self.shards.get(group_id)
                g = shard.groups.get(group_id)
                if g is not None and g.members:
                    raise GroupError(
                        ErrorCode.NON_EMPTY_GROUP,
                        f"group {group_id} has {len(g.members)} members",
                    )
                # (offsets pending in open transactions get a tombstone too, as Kafka)
                tps = sorted(set(shard.offsets.get(group_id)) | shard.offsets.pending_tps(group_id))
                if g is None and not tps:
                    raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
                if not tps:
                    shard.groups.pop(group_id, None)
        except GroupError as exc:
            answer(exc.code, exc.message)
            return
        if not tps:
            answer(0, None)
            return

        def applied(_base: int) -> None:
            for tp in tps:
                shard.offsets.delete(group_id, tp)
            g2 = shard.groups.get(group_id)
            if g2 is not None and not g2.members:
                del shard.groups[group_id]
            log.info("%s group %s deleted (%d committed offsets)", self._prefix, group_id,
                     len(tps))  # fmt: skip

        self._write(shard, tombstone_batch(group_id, tps), applied, answer)

    def delete_offsets(
        self, group_id: str, tps: list[TP], answer: Callable[[dict[TP, int], int], None]
    ) -> None:
        """OffsetDelete: tombstones for `tps`; a partition of a topic a member subscribes to
        gets GROUP_SUBSCRIBED_TO_TOPIC. `answer(per-partition codes, group code)`."""
        with self.append_order:
            self._delete_offsets_validated(group_id, tps, answer)

    def _delete_offsets_validated(
        self, group_id: str, tps: list[TP], answer: Callable[[dict[TP, int], int], None]
    ) -> None:
        try:
            with self.shards.lock:
                shard = self.shards.get(group_id)
                g = shard.groups.get(group_id)
                if g is None and group_id not in shard.offsets.groups:
                    raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
                subscribed = {t for m in (g.members.values() if g else ()) for t in m.subscribed}
        except GroupError as exc:
            answer({}, exc.code)
            return
        codes = {tp: int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC) for tp in tps if tp[0] in subscribed}
        todo = [tp for tp in tps if tp not in codes]
        if not todo:
            answer(codes, 0)
            return

        def applied(_base: int) -> None:
            for tp in todo:
                shard.offsets.delete(group_id, tp)

        def written(code: int, _msg: str | None) -> None:
            answer({**codes, **dict.fromkeys(todo, code)}, 0)

        self._write(shard, tombstone_batch(group_id, todo), applied, written)

    # -- OffsetFetch -----------------------------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, topics: list[Body] | None, require_stable: bool = False
    ) -> list[Body]:
        """Committed offsets; pending transactional ones are not shown, and with
        `require_stable` a partition that has one answers UNSTABLE_OFFSET_COMMIT (retriable:
        the transaction is being ended), as Kafka."""
        with self.shards.lock:
            offsets = self.shards.get(group_id).offsets
            table = dict(offsets.get(group_id))
            unstable = offsets.pending_tps(group_id) if require_stable else set()
        wanted: dict[str, list[int]] = {}
        if topics is None:
            for t, p in sorted(table):
                wanted.setdefault(t, []).append(p)
        else:
            for req in topics:
                wanted.setdefault(req["name"], []).extend(req["partitions"])
        out = []
        for t, parts in wanted.items():
            rows = []
            for p in parts:
                c = table.get((t, p))
                rows.append({
                    "partition": p,
                    "committed_offset": -1 if c is None else c.offset,
                    "committed_leader_epoch": -1 if c is None else c.leader_epoch,
                    "metadata": None if c is None else c.metadata,
                    "error_code": int(ErrorCode.UNSTABLE_OFFSET_COMMIT)
                    if (t, p) in unstable else 0,
                })  # fmt: skip
            out.append({"name": t, "partitions": rows})
        return out


def _commit_response(body: Body, early: dict[TP, int], code: int, message: str | None) -> Body:
    return {
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition": p["partition"],
                        "error_code": early.get((t["name"], p["partition"]), code),
                        "error_message": message,
                    }
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
    }


def _txn_commit_response(body: Body, early: dict[TP, int], code: int) -> Body:
    return {
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition": p["partition"],
                        "error_code": early.get((t["name"], p["partition"]), code),
                    }
                    for p in t["partitions"]
                ],
            }
            for t in body["topics"]
        ]
    }


def _parse_commits(
    body: Body,
) -> tuple[list[tuple[str, int, int, int, str | None]], dict[TP, int]]:
    """An OffsetCommit's or TxnOffsetCommit's partitions: (topic, partition, offset, leader
    epoch, metadata) to commit, and {tp: error code} for those refused before any check of
    the committer (metadata over MAX_METADATA_BYTES)."""
    commits: list[tuple[str, int, int, int, str | None]] = []
    early: dict[TP, int] = {}
    for t in body["topics"]:
        for p in t["partitions"]:
            meta = p["committed_metadata"]
            if meta is not None and len(meta.encode()) > MAX_METADATA_BYTES:
                early[(t["name"], p["partition"])] = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            commits.append((t["name"], p["partition"], p["committed_offset"],
                            p["committed_leader_epoch"], meta))  # fmt: skip
    return commits, early
