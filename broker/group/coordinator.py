"""GroupCoordinator: the consumer groups of the `__consumer_offsets` partitions this broker leads.

    gc = GroupCoordinator(node_id, replica_manager, settings, image=lambda: publisher.image)
    publisher.subscribe(gc.on_metadata)      # become / stop being coordinator of partitions
    gc.start() ... gc.shutdown()             # the "group-coordinator" thread: loads, expiry

It is three owners over one lock:
- `gc.shards` (broker/group/shards.py over broker/coordination/shards.py): which offsets
  partitions ("shards") this broker leads, their loading from the log, and the lock that guards
  every shard's groups and offsets;
- `gc.writes` (broker/group/offset_writes.py): OffsetCommit, OffsetFetch, DeleteGroups and
  OffsetDelete, appended with acks=all in the order they were validated;
- the coordinator itself: KIP-848 membership (ConsumerGroupHeartbeat, expiry), FindCoordinator,
  ListGroups and describe.
Membership is held in memory only (docs/decisions.md): after a failover the members of a group
rejoin (UNKNOWN_MEMBER_ID) and the committed offsets are where they were.

Threads: the public methods are called from I/O threads (handlers), the metadata publisher and
the flusher/timer threads (commit callbacks).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from broker.group.assignors import ASSIGNORS, TP
from broker.group.offset_writes import OffsetWrites
from broker.group.offsets_topic import GroupSettings, OffsetsTopic, TopicRegex
from broker.group.shards import GroupShards
from broker.group.state import ConsumerGroup, GroupError
from broker.group.views import describe_body, nested
from client.errors import ErrorCode
from client.protocol.body import Body

log = logging.getLogger(__name__)

UNRELEASED_HEARTBEAT_MS = 250  # the interval told to a member waiting for released partitions


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


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
        self.settings = settings
        self._image = image
        self._clock = clock
        self.shards = GroupShards(node_id, replica_manager, settings, image, on_tick=self._expire)
        self.writes = OffsetWrites(self.shards, replica_manager, settings)
        self.offsets_topic = OffsetsTopic(node_id, settings, image)
        self.topic_regex = TopicRegex()
        self._prefix = f"[broker={node_id} group-coordinator]"

    # -- lifecycle, leadership -------------------------------------------------------------------

    def start(self) -> None:
        self.shards.start()

    def shutdown(self) -> None:
        self.shards.shutdown()

    def on_metadata(self, image: Any, delta: Any) -> None:
        """Publisher subscriber (after the ReplicaManager applied the image)."""
        self.shards.on_metadata(image, delta)

    def num_partitions(self) -> int:
        return self.shards.num_partitions()

    def find(self, group_id: str, controller: Any) -> tuple[int, int, str, int, str | None]:
        """FindCoordinator: (error code, node id, host, port, message); offsets_topic.py."""
        return self.offsets_topic.find(group_id, controller)

    # -- offsets: OffsetWrites -------------------------------------------------------------------

    def commit(self, body: Body, respond: Callable[[Body], None]) -> None:
        self.writes.commit(body, respond)

    def txn_commit(self, body: Body, respond: Callable[[Body], None]) -> None:
        self.writes.txn_commit(body, respond)

    def fetch_offsets(
        self, group_id: str, topics: list[Body] | None, require_stable: bool = False
    ) -> list[Body]:
        return self.writes.fetch_offsets(group_id, topics, require_stable)

    def on_txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """WriteTxnMarkers appended `producer_id`'s COMMIT/ABORT marker to offsets partition
        `partition` (a flusher/timer or I/O thread): its pending offsets are decided."""
        with self.shards.lock:
            n = self.shards.complete_txn(partition, producer_id, commit)
        if n:
            log.debug("%s %s-%d: %d transactional offsets of producer %d %s", self._prefix,
                      "__consumer_offsets", partition, n, producer_id,
                      "committed" if commit else "aborted")  # fmt: skip

    def delete_group(self, group_id: str, answer: Callable[[int, str | None], None]) -> None:
        self.writes.delete_group(group_id, answer)

    def delete_offsets(
        self, group_id: str, tps: list[TP], answer: Callable[[dict[TP, int], int], None]
    ) -> None:
        self.writes.delete_offsets(group_id, tps, answer)

    # -- ConsumerGroupHeartbeat ------------------------------------------------------------------

    def heartbeat(self, body: Body, client_id: str | None, client_host: str) -> Body:
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
        with self.shards.lock:
            shard = self.shards.get(group_id)
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
        with self.shards.lock:
            for shard in self.shards.all():
                for group in shard.groups.values():
                    for m, why in group.expired(now):
                        group.remove(m.member_id)
                        log.info(
                            "%s group %s: member %s removed (%s); its partitions %s are free;"
                            " group epoch %d",
                            self._prefix, group.group_id, m.member_id, why,
                            sorted(m.assigned), group.group_epoch,
                        )  # fmt: skip

    # -- ListGroups / ConsumerGroupDescribe -------------------------------------------------------

    def list_groups(self) -> list[Body]:
        with self.shards.lock:
            out = {}
            for shard in self.shards.loaded():
                for gid in shard.offsets.groups:
                    out[gid] = "empty"
                for gid, g in shard.groups.items():
                    out[gid] = g.state
        return [{"group_id": g, "group_state": s} for g, s in sorted(out.items())]

    def snapshot(self) -> list[tuple[str, str, int, dict[tuple[str, int], int]]]:
        """Metrics (broker/group_metrics.py): every group of the loaded shards as (group id,
        state, members, {(topic, partition): committed offset}), copied under the lock."""
        out = []
        with self.shards.lock:
            for shard in self.shards.loaded():
                for gid in set(shard.offsets.groups) | set(shard.groups):
                    g = shard.groups.get(gid)
                    committed = {tp: c.offset for tp, c in shard.offsets.get(gid).items()}
                    if g is None:
                        out.append((gid, "empty", 0, committed))
                    else:
                        out.append((gid, g.state, len(g.members), committed))
        return out

    def describe(self, group_id: str) -> Body:
        with self.shards.lock:
            shard = self.shards.get(group_id)
            g = shard.groups.get(group_id)
            if g is None and group_id not in shard.offsets.groups:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} not found")
            return describe_body(group_id, g)


def _counts(image: Any, topics: list[str]) -> dict[str, int]:
    return {t: len(image.topics[t].partitions) for t in topics if t in image.topics}
