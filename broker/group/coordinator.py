"""GroupCoordinator: the consumer groups of the `__consumer_offsets` partitions this broker leads.

    gc = GroupCoordinator(node_id, replica_manager, settings, image=lambda: publisher.image)
    publisher.subscribe(gc.on_metadata)      # become / stop being coordinator of partitions
    gc.start() ... gc.shutdown()             # the "group-coordinator" thread: loads, expiry

A group lives in partition `partition_for(group_id)` ("its shard"). While this broker leads that
partition the shard holds the group's membership (broker/group/state.py) and committed offsets
(broker/group/offsets.py). Becoming leader of an offsets partition schedules a load: the thread
reads the partition from its log start to its end and rebuilds the committed offsets; requests
for its groups answer COORDINATOR_LOAD_IN_PROGRESS until then, NOT_COORDINATOR on any broker
that does not lead it. Membership is held in memory only (docs/decisions.md): after a failover
the members of a group rejoin (UNKNOWN_MEMBER_ID) and the committed offsets are where they were.

A commit is one record batch appended to the shard's partition through the ReplicaManager with
acks=all and answered from the DelayedProduce callback once replicated; the table is updated
then, so OffsetFetch never shows an offset that a failover could lose.

Threads: the public methods are called from I/O threads (handlers), the metadata publisher and
the flusher/timer threads (commit callbacks); one lock guards every shard.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.group.assignors import ASSIGNORS, TP
from broker.group.offsets import CommittedOffset, OffsetTable, commit_batch, tombstone_batch
from broker.group.offsets_topic import (
    OFFSETS_TOPIC,
    GroupSettings,
    OffsetsTopic,
    TopicRegex,
    partition_for,
)
from broker.group.state import ConsumerGroup, GroupError
from broker.group.views import describe_body, nested
from client.errors import ErrorCode
from client.records import decode_records

log = logging.getLogger(__name__)

MAX_METADATA_BYTES = 4096  # Kafka's offset.metadata.max.bytes default
_LOAD_READ_BYTES = 1024 * 1024
UNRELEASED_HEARTBEAT_MS = 250  # the interval told to a member waiting for released partitions


@dataclass
class Shard:
    partition: int
    leader_epoch: int
    loaded: bool = False
    groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    offsets: OffsetTable = field(default_factory=OffsetTable)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


_WRITE_ERRORS = {
    int(ErrorCode.NOT_LEADER_OR_FOLLOWER): ErrorCode.NOT_COORDINATOR,
    int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION): ErrorCode.NOT_COORDINATOR,
    int(ErrorCode.KAFKA_STORAGE_ERROR): ErrorCode.NOT_COORDINATOR,
    int(ErrorCode.NOT_ENOUGH_REPLICAS): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    int(ErrorCode.REQUEST_TIMED_OUT): ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


class GroupCoordinator:
    def __init__(
        self,
        node_id: int,
        replica_manager: Any,
        settings: GroupSettings,
        image: Callable[[], Any],
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.settings = settings
        self._image = image
        self._clock = clock
        self._lock = threading.Lock()
        # Held from a write's validation to its append (never while waiting for replication),
        # so __consumer_offsets holds writes in the order they were validated: a commit accepted
        # before a rebalance cannot land after the next owner's. Taken before `_lock`, never
        # inside it; the write's completion takes only `_lock`.
        self._append_order = threading.Lock()
        self._shards: dict[int, Shard] = {}
        self._loads: list[tuple[int, int]] = []
        self._wake = threading.Condition(self._lock)
        self._stop = False
        self._thread: threading.Thread | None = None
        self.offsets_topic = OffsetsTopic(node_id, settings, image)
        self.topic_regex = TopicRegex()
        self._prefix = f"[broker={node_id} group-coordinator]"

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="group-coordinator", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        with self._lock:
            self._stop = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stop:
                    return
                if not self._loads:
                    self._wake.wait(0.1)
                loads, self._loads = self._loads, []
            for p, epoch in loads:
                try:
                    self._load(p, epoch)
                except Exception:
                    log.exception("%s loading %s-%d failed", self._prefix, OFFSETS_TOPIC, p)
                    with self._lock:
                        self._loads.append((p, epoch))  # retried on the next round
            self._expire()

    # -- leadership and loading -----------------------------------------------------------------

    def on_metadata(self, image: Any, delta: Any) -> None:
        """Publisher subscriber (after the ReplicaManager applied the image)."""
        topic = image.topics.get(OFFSETS_TOPIC)
        parts = topic.partitions if topic is not None else {}
        with self._lock:
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

    def _load(self, p: int, epoch: int) -> None:
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
            for r in decode_records(got.data):
                if r.offset >= offset:
                    try:
                        table.replay(r.key, r.value, r.offset)
                    except Exception as exc:  # not ours: skipped, the rest still loads
                        skipped += 1
                        if skipped == 1:
                            log.warning("%s %s-%d offset %d: unreadable record skipped (%s)",
                                        self._prefix, OFFSETS_TOPIC, p, r.offset, exc)  # fmt: skip
                    records += 1
            offset = got.next_offset
        with self._lock:
            shard = self._shards.get(p)
            if shard is None or shard.leader_epoch != epoch:
                return
            shard.offsets = table
            shard.loaded = True
        log.info(
            "%s coordinator of %s-%d (leader epoch %d): loaded %d records, %d groups with"
            " offsets, in %.0f ms",
            self._prefix, OFFSETS_TOPIC, p, epoch, records, len(table.groups),
            (time.monotonic() - start) * 1000,
        )  # fmt: skip

    def _shard(self, group_id: str) -> Shard:
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

    def num_partitions(self) -> int:
        topic = self._image().topics.get(OFFSETS_TOPIC)
        return len(topic.partitions) if topic is not None else self.settings.offsets_partitions

    def find(self, group_id: str, controller: Any) -> tuple[int, int, str, int, str | None]:
        """FindCoordinator: (error code, node id, host, port, message); offsets_topic.py."""
        return self.offsets_topic.find(group_id, controller)

    # -- ConsumerGroupHeartbeat ------------------------------------------------------------------

    def heartbeat(self, body: dict, client_id: str | None, client_host: str) -> dict:
        group_id, member_id = body["group_id"], body["member_id"]
        assignor = body["server_assignor"]
        if assignor is not None and assignor not in ASSIGNORS:
            raise GroupError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"assignor {assignor!r} is not one of {', '.join(ASSIGNORS)}",
            )
        owned = body["owned_topic_partitions"]
        owned_set = (
            frozenset((t["topic"], p) for t in owned for p in t["partitions"])
            if owned is not None else None
        )  # fmt: skip
        if body["subscribed_topic_regex"]:
            self.topic_regex.compiled(body["subscribed_topic_regex"])  # INVALID_REQUEST if bad
        s = self.settings
        session = body["session_timeout_ms"]
        if session < 0:
            session = s.session_timeout_ms
        elif not s.min_session_timeout_ms <= session <= s.max_session_timeout_ms:
            raise GroupError(
                ErrorCode.INVALID_SESSION_TIMEOUT,
                f"session timeout {session} ms outside [group.min.session.timeout.ms"
                f" {s.min_session_timeout_ms}, group.max.session.timeout.ms"
                f" {s.max_session_timeout_ms}]",
            )
        with self._lock:
            shard = self._shard(group_id)
            group = shard.groups.get(group_id)
            if group is None:
                if body["member_epoch"] != 0:
                    raise GroupError(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"member {member_id} is not in group {group_id}",
                    )
                group = shard.groups[group_id] = ConsumerGroup(group_id, assignor or "uniform")
            if (
                body["member_epoch"] == 0
                and member_id not in group.members
                and len(group.members) >= s.max_size
            ):
                raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED, f"group.max.size={s.max_size}")
            image = self._image()
            before = group.group_epoch
            result = group.heartbeat(
                member_id,
                body["member_epoch"],
                now_ms=self._clock(),
                subscribed=body["subscribed_topic_names"],
                owned=owned_set,
                regex=body["subscribed_topic_regex"],
                resolve=lambda rx: self.topic_regex.matching(image, rx),
                assignor=assignor,
                session_timeout_ms=session,
                rebalance_timeout_ms=body["rebalance_timeout_ms"]
                if body["rebalance_timeout_ms"] > 0 else 300_000,
                partition_counts=lambda ts: _counts(image, ts),
                client_id=client_id or "",
                client_host=client_host,
                instance_id=body["instance_id"],
            )  # fmt: skip
            interval = s.heartbeat_interval_ms
            m = group.members.get(member_id)
            if m is not None and group.target.get(member_id, frozenset()) - m.assigned:
                # Partitions of its target are still owned by others: heartbeat again soon to
                # get them once released, rather than one full interval later.
                interval = min(interval, UNRELEASED_HEARTBEAT_MS)
            if group.group_epoch != before:
                log.info(
                    "%s group %s epoch %d (%d members) after a heartbeat of %s (epoch %d)",
                    self._prefix, group_id, group.group_epoch, len(group.members), member_id,
                    body["member_epoch"],
                )  # fmt: skip
        return {
            "error_code": 0,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval_ms": interval,
            "assignment": None if result.assignment is None else nested(result.assignment),
        }

    def _expire(self) -> None:
        now = self._clock()
        with self._lock:
            for shard in self._shards.values():
                for group in shard.groups.values():
                    for m, why in group.expired(now):
                        group.remove(m.member_id)
                        log.info(
                            "%s group %s: member %s removed (%s); its partitions %s are free;"
                            " group epoch %d",
                            self._prefix, group.group_id, m.member_id, why,
                            sorted(m.assigned), group.group_epoch,
                        )  # fmt: skip

    # -- offsets ---------------------------------------------------------------------------------

    def commit(self, body: dict, respond: Callable[[dict], None]) -> None:
        """Validate, append (acks=all) and answer through `respond` (now or from a flusher or
        timer thread once the record is replicated)."""
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
        with self._append_order:
            self._commit_validated(body, commits, early, respond)

    def _commit_validated(
        self,
        body: dict,
        commits: list[tuple[str, int, int, int, str | None]],
        early: dict[TP, int],
        respond: Callable[[dict], None],
    ) -> None:
        """Validate the committer and append, under `_append_order`."""
        group_id = body["group_id"]
        try:
            with self._lock:
                shard = self._shard(group_id)
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
    ) -> None:
        """Append `batch` to the shard's partition with acks=all. Once replicated,
        `applied(base offset)` runs under the lock (if this broker still leads the partition),
        then `answer(0, None)`; a failed write answers the coordinator error it maps to."""
        tp = (OFFSETS_TOPIC, shard.partition)

        def done(statuses: Mapping[Any, Any]) -> None:
            st = statuses[tp]
            code = int(st.error_code)
            if code == 0:
                with self._lock:
                    if self._shards.get(shard.partition) is shard:
                        applied(st.base_offset)
                answer(0, None)
                return
            answer(int(_WRITE_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)), st.error_message)

        res = self.replica_manager.append_records(
            -1, self.settings.commit_timeout_ms, {tp: batch}, done
        )
        if res is not None:
            done(res)

    # -- DeleteGroups / OffsetDelete ------------------------------------------------------------

    def delete_group(self, group_id: str, answer: Callable[[int, str | None], None]) -> None:
        """DeleteGroups for one group: tombstones for its committed offsets, then forgotten.
        NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND when unknown."""
        with self._append_order:
            self._delete_group_validated(group_id, answer)

    def _delete_group_validated(
        self, group_id: str, answer: Callable[[int, str | None], None]
    ) -> None:
        try:
            with self._lock:
                shard = self._shard(group_id)
                g = shard.groups.get(group_id)
                if g is not None and g.members:
                    raise GroupError(
                        ErrorCode.NON_EMPTY_GROUP,
                        f"group {group_id} has {len(g.members)} members",
                    )
                tps = sorted(shard.offsets.get(group_id))
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
        with self._append_order:
            self._delete_offsets_validated(group_id, tps, answer)

    def _delete_offsets_validated(
        self, group_id: str, tps: list[TP], answer: Callable[[dict[TP, int], int], None]
    ) -> None:
        try:
            with self._lock:
                shard = self._shard(group_id)
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
            answer({**codes, **{tp: code for tp in todo}}, 0)

        self._write(shard, tombstone_batch(group_id, todo), applied, written)

    def fetch_offsets(self, group_id: str, topics: list[dict] | None) -> list[dict]:
        with self._lock:
            table = dict(self._shard(group_id).offsets.get(group_id))
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
                    "error_code": 0,
                })  # fmt: skip
            out.append({"name": t, "partitions": rows})
        return out

    # -- ListGroups / ConsumerGroupDescribe -------------------------------------------------------

    def list_groups(self) -> list[dict]:
        with self._lock:
            out = {}
            for shard in self._shards.values():
                if not shard.loaded:
                    continue
                for gid in shard.offsets.groups:
                    out[gid] = "empty"
                for gid, g in shard.groups.items():
                    out[gid] = g.state
        return [{"group_id": g, "group_state": s} for g, s in sorted(out.items())]

    def snapshot(self) -> list[tuple[str, str, int, dict[tuple[str, int], int]]]:
        """Metrics (broker/group_metrics.py): every group of the loaded shards as (group id,
        state, members, {(topic, partition): committed offset}), copied under the lock."""
        out = []
        with self._lock:
            for shard in self._shards.values():
                if not shard.loaded:
                    continue
                for gid in set(shard.offsets.groups) | set(shard.groups):
                    g = shard.groups.get(gid)
                    committed = {tp: c.offset for tp, c in shard.offsets.get(gid).items()}
                    if g is None:
                        out.append((gid, "empty", 0, committed))
                    else:
                        out.append((gid, g.state, len(g.members), committed))
        return out

    def describe(self, group_id: str) -> dict:
        with self._lock:
            shard = self._shard(group_id)
            g = shard.groups.get(group_id)
            if g is None and group_id not in shard.offsets.groups:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
            return describe_body(group_id, g)


def _counts(image: Any, topics: list[str]) -> dict[str, int]:
    return {t: len(image.topics[t].partitions) for t in topics if t in image.topics}


def _commit_response(body: dict, early: dict[TP, int], code: int, message: str | None) -> dict:
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
