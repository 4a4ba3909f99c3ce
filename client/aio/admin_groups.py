"""Admin's consumer-group calls: `list_groups()` and `describe_group(group_id)`.

describe_group answers in one call what Kafka users stitch together from three APIs: the
group's members and assignment (ConsumerGroupDescribe at the coordinator), its committed
offsets (OffsetFetch) and each partition's log end offset (ListOffsets latest = the high
watermark), hence the lag = log end offset - committed offset. A partition the group has no
committed offset for has `committed_offset` and `lag` None.

Loop-owned: every function runs on the admin's event loop.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from client.aio.types import TopicPartition
from client.errors import ConfigError, GregorError, GregorTimeoutError, error_for_code
from client.protocol import ApiKey
from client.protocol.body import Body


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str  # empty, assigning, reconciling, stable


@dataclass(frozen=True, slots=True)
class GroupMemberDescription:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topics: list[str]
    assignment: list[TopicPartition]  # owned now
    target_assignment: list[TopicPartition]  # what the assignor wants it to own


@dataclass(frozen=True, slots=True)
class GroupPartitionLag:
    topic: str
    partition: int
    committed_offset: int | None
    log_end_offset: int
    lag: int | None
    member_id: str | None  # the member that owns it now, if any


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    coordinator: int
    members: list[GroupMemberDescription] = field(default_factory=list)
    partitions: list[GroupPartitionLag] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions if p.lag is not None)


def _tps(nested: list[Body]) -> list[TopicPartition]:
    return sorted(TopicPartition(t["topic"], p) for t in nested for p in t["partitions"])


async def list_groups(cluster: Any) -> list[GroupListing]:
    """Every group of the cluster: ListGroups to each broker (each lists the groups it
    coordinates), merged."""
    md = await cluster.refresh()
    out: dict[str, str] = {}
    for node in sorted(md.brokers):
        resp = await cluster.send(node, ApiKey.LIST_GROUPS, {})
        if resp["error_code"]:
            raise error_for_code(resp["error_code"])(f"ListGroups at broker {node}")
        for g in resp["groups"]:
            out[g["group_id"]] = g["group_state"]
    return [GroupListing(g, s) for g, s in sorted(out.items())]


def _error_of(api_key: int, resp: Body) -> tuple[int, str | None]:
    """The group-level error of an answer (retriable ones make _at_coordinator ask again)."""
    if api_key == ApiKey.CONSUMER_GROUP_DESCRIBE:
        g = resp["groups"][0]
        return g["error_code"], g.get("error_message")
    if api_key == ApiKey.DELETE_GROUPS:
        r = resp["results"][0]
        return r["error_code"], r.get("error_message")
    if api_key == ApiKey.OFFSET_COMMIT:
        for t in resp["topics"]:
            for p in t["partitions"]:
                if p["error_code"]:
                    return p["error_code"], p.get("error_message")
        return 0, None
    return resp.get("error_code", 0), resp.get("error_message")


async def _at_coordinator(
    cluster: Any, group_id: str, api_key: int, body: Body, timeout_ms: int, backoff_ms: int
) -> tuple[int, Body]:
    """Send to the group's coordinator, following it through moves and loads."""
    deadline = time.monotonic() + timeout_ms / 1000
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            found = await cluster.send_any(
                ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group_id]}
            )
            c = found["coordinators"][0]
            if c["error_code"]:
                raise error_for_code(c["error_code"])(c["error_message"] or "FindCoordinator")
            if c["node_id"] not in cluster.metadata.brokers:
                await cluster.refresh()
            resp = await cluster.send(c["node_id"], api_key, body)
            code, msg = _error_of(api_key, resp)
            if code:
                raise error_for_code(code)(msg or f"group {group_id}")
            return c["node_id"], resp
        except GregorError as exc:
            if not exc.retriable:
                raise
            last = exc
            await asyncio.sleep(backoff_ms / 1000)
    raise GregorTimeoutError(
        f"group {group_id}: no answer from its coordinator" + (f" ({last})" if last else "")
    )


async def describe_group(
    cluster: Any, offsets: Any, group_id: str, timeout_ms: int, backoff_ms: int
) -> GroupDescription:
    node, resp = await _at_coordinator(
        cluster, group_id, ApiKey.CONSUMER_GROUP_DESCRIBE, {"group_ids": [group_id]},
        timeout_ms, backoff_ms,
    )  # fmt: skip
    g = resp["groups"][0]
    _node, fetched = await _at_coordinator(
        cluster, group_id, ApiKey.OFFSET_FETCH, {"group_id": group_id, "topics": None},
        timeout_ms, backoff_ms,
    )  # fmt: skip
    members = [
        GroupMemberDescription(
            m["member_id"],
            m["member_epoch"],
            m["client_id"],
            m["client_host"],
            list(m["subscribed_topic_names"]),
            _tps(m["assignment"]),
            _tps(m["target_assignment"]),
        )
        for m in g["members"]
    ]
    owner = {tp: m.member_id for m in members for tp in m.assignment}
    committed = {
        TopicPartition(t["name"], p["partition"]): p["committed_offset"]
        for t in fetched["topics"]
        for p in t["partitions"]
        if p["committed_offset"] >= 0
    }
    tps = sorted(set(committed) | set(owner))
    ends = await offsets.list_offsets(dict.fromkeys(tps, -1)) if tps else {}
    partitions = []
    for tp in tps:
        end = ends[tp][0]
        c = committed.get(tp)
        partitions.append(
            GroupPartitionLag(
                tp.topic,
                tp.partition,
                c,
                end,
                None if c is None else max(0, end - c),
                owner.get(tp),
            )
        )
    return GroupDescription(
        group_id, g["group_state"], g["group_epoch"], g["assignment_epoch"], g["assignor_name"],
        node, members, partitions,
    )  # fmt: skip


async def delete_group(cluster: Any, group_id: str, timeout_ms: int, backoff_ms: int) -> None:
    """DeleteGroups: NonEmptyGroupError while it has members, GroupIdNotFoundError if unknown."""
    await _at_coordinator(
        cluster, group_id, ApiKey.DELETE_GROUPS, {"groups_names": [group_id]},
        timeout_ms, backoff_ms,
    )  # fmt: skip


async def alter_group_offsets(
    cluster: Any, group_id: str, offsets: dict[TopicPartition, int], timeout_ms: int,
    backoff_ms: int,
) -> None:  # fmt: skip
    """Set committed offsets of a group without members (UnknownMemberIdError while it has
    some: its members own the positions), as Kafka's alterConsumerGroupOffsets."""
    for tp, off in offsets.items():
        if off < 0:
            raise ConfigError(f"offset for {tp[0]}-{tp[1]} must be >= 0, got {off}")
    by_topic: dict[str, list[Body]] = {}
    for tp, off in sorted(offsets.items()):
        by_topic.setdefault(tp[0], []).append({"partition": tp[1], "committed_offset": off})
    body = {
        "group_id": group_id, "member_id": "", "member_epoch": -1,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }  # fmt: skip
    await _at_coordinator(cluster, group_id, ApiKey.OFFSET_COMMIT, body, timeout_ms, backoff_ms)


async def delete_group_offsets(
    cluster: Any, group_id: str, tps: list[TopicPartition], timeout_ms: int, backoff_ms: int
) -> None:
    """OffsetDelete; GroupSubscribedToTopicError for a topic a member subscribes to."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    body = {"group_id": group_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}  # fmt: skip
    _node, resp = await _at_coordinator(
        cluster, group_id, ApiKey.OFFSET_DELETE, body, timeout_ms, backoff_ms
    )
    for t in resp["topics"]:
        for p in t["partitions"]:
            if p["error_code"]:
                raise error_for_code(p["error_code"])(f"{t['name']}-{p['partition']}")
