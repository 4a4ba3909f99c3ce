"""Admin's `delete_records({TopicPartition: offset}) -> {TopicPartition: low_watermark}`
(Kafka's `Admin.deleteRecords`): DeleteRecords (21) sent to each partition's leader.

Offset -1 means the partition's last stable offset: its high watermark, or the first
offset of a transaction not yet decided, which DeleteRecords never passes. The answer for a partition is its low
watermark: the log start offset every in-sync replica has reached (>= the offset asked).
A partition's leader moving (NOT_LEADER_OR_FOLLOWER, connection loss, a leader that has not
applied the topic yet) is retried against the new leader, with fresh metadata, until
`timeout_ms`; a partition the metadata does not know raises UnknownTopicOrPartitionError at
once; any other per-partition error raises its exception class naming the partition
(OffsetOutOfRangeError for an offset above the high watermark or the last stable
offset, PolicyViolationError for a
compacted-only topic, RequestTimedOutError when the replicas did not follow in time: the
leader's log start has moved all the same).

Loop-owned: runs on the admin's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from client.aio.types import TopicPartition
from client.errors import (
    ConfigError,
    ErrorCode,
    GregorError,
    GregorTimeoutError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from client.protocol import ApiKey
from client.protocol.body import Body

if TYPE_CHECKING:
    from client.aio.cluster import ClusterClient

# per-partition codes that mean "ask the (new) leader again"
_RETRY = {
    int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),  # a leader that has not applied the topic yet
    int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
    int(ErrorCode.LEADER_NOT_AVAILABLE),
    int(ErrorCode.KAFKA_STORAGE_ERROR),
}


def check_offsets(offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for tp, offset in offsets.items():
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < -1:
            raise ConfigError(
                f"delete_records offset for {tp[0]}-{tp[1]} must be an int >= -1 (-1 = the "
                f"high watermark), not {offset!r}"
            )
        out[TopicPartition(*tp)] = offset
    return out


async def delete_records(
    cluster: ClusterClient, offsets: Mapping[TopicPartition, int], timeout_ms: int, backoff_ms: int
) -> dict[TopicPartition, int]:
    pending = check_offsets(offsets)
    out: dict[TopicPartition, int] = {}
    deadline = time.monotonic() + timeout_ms / 1000
    last: BaseException | None = None
    while pending:
        md = await cluster.fetch_topics({tp.topic for tp in pending})
        for tp in pending:
            parts = md.partitions_for(tp.topic)
            if parts is None or tp.partition not in parts:
                raise UnknownTopicOrPartitionError(
                    f"DeleteRecords: unknown partition {tp.topic}-{tp.partition}"
                )
        by_node: dict[int, dict[str, list[Body]]] = {}
        for tp, offset in pending.items():
            leader = md.leader_for(tp)
            if leader >= 0:
                by_node.setdefault(leader, {}).setdefault(tp.topic, []).append(
                    {"partition": tp.partition, "offset": offset}
                )
        wait_ms = max(1, int((deadline - time.monotonic()) * 1000))
        for node, topics in by_node.items():
            body = {
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout_ms": wait_ms,
            }
            try:
                resp = await cluster.send(
                    node, ApiKey.DELETE_RECORDS, body, timeout_ms=wait_ms + 5000
                )
            except GregorError as exc:
                if not exc.retriable:
                    raise
                last = exc
                continue
            assert resp is not None
            for t in resp["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition"])
                    code = int(p["error_code"])
                    if code in _RETRY:
                        last = error_for_code(code)(p["error_message"] or f"DeleteRecords {tp}")
                        continue
                    if code:
                        what = p["error_message"] or "DeleteRecords"
                        raise error_for_code(code)(f"{tp.topic}-{tp.partition}: {what}")
                    out[tp] = int(p["low_watermark"])
                    pending.pop(tp, None)
        if pending:
            if time.monotonic() > deadline:
                raise GregorTimeoutError(
                    f"DeleteRecords for {sorted(pending)} timed out"
                    + (f" (last error: {last})" if last else "")
                )
            await asyncio.sleep(backoff_ms / 1000)
    return out
