"""OffsetLookup: ListOffsets for a set of partitions, asked of each partition's leader, with
retries (the consumer's fetcher, its seek_to_*/offsets_for_times, and the admin client).

A partition without a leader waits for its topic's metadata; retriable errors are retried
after retry.backoff.ms until request.timeout.ms (GregorTimeoutError naming the partitions and
the last error), reported through the owner's `RetryLog`. `isolation_level` 1
(read_committed) asks for the last stable offset as the end. Loop-owned.
"""

from __future__ import annotations

import asyncio
import time

from client.aio.cluster import ClusterClient
from client.aio.retry_log import RetryLog
from client.aio.types import TopicPartition
from client.errors import GregorError, GregorTimeoutError, error_for_code
from client.protocol import ApiKey
from client.protocol.body import Body


class OffsetLookup:
    def __init__(
        self,
        cluster: ClusterClient,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        isolation_level: int,
        retry_log: RetryLog,
    ) -> None:
        self.cluster = cluster
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._isolation_level = isolation_level
        self.retry_log = retry_log

    async def list_offsets(
        self, query: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """{tp: timestamp(-2|-1|ms)} -> {tp: (offset, timestamp)} from each partition's leader."""
        out: dict[TopicPartition, tuple[int, int]] = {}
        pending = dict(query)
        deadline = time.monotonic() + self._request_timeout_ms / 1000
        while pending:
            md = await self.cluster.maybe_refresh()
            by_node: dict[int, dict[str, list[Body]]] = {}
            for tp, ts in pending.items():
                leader = md.leader_for(tp)
                if leader < 0:
                    if tp.topic not in md.topics:
                        await self.cluster.wait_for_partitions(
                            tp.topic, max(1, (deadline - time.monotonic()) * 1000)
                        )
                        md = self.cluster.metadata
                        leader = md.leader_for(tp)
                    if leader < 0:
                        self.cluster.request_update()
                        continue
                by_node.setdefault(leader, {}).setdefault(tp.topic, []).append(
                    {"partition": tp.partition, "timestamp": ts}
                )
            retry: list[BaseException] = []
            for node, topics in by_node.items():
                body = {
                    "replica_id": -1,
                    "isolation_level": self._isolation_level,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                }
                try:
                    resp = await self.cluster.send(node, ApiKey.LIST_OFFSETS, body)
                except GregorError as exc:
                    if not exc.retriable:
                        raise
                    retry.append(exc)
                    continue
                for t in resp["topics"]:  # type: ignore[index]
                    for p in t["partitions"]:
                        tp = TopicPartition(t["name"], p["partition"])
                        code = p["error_code"]
                        if code:
                            err = error_for_code(code)(f"ListOffsets {tp.topic}-{tp.partition}")
                            if not err.retriable:
                                raise err
                            retry.append(err)
                            self.cluster.request_update()
                            continue
                        out[tp] = (p["offset"], p["timestamp"])
                        pending.pop(tp, None)
            if pending:
                if retry:
                    self.retry_log.failed(
                        "list_offsets", f"ListOffsets for {len(pending)} partition(s)", retry[-1]
                    )
                if time.monotonic() > deadline:
                    raise GregorTimeoutError(
                        f"ListOffsets for {sorted(pending)} timed out"
                        + (f" (last error: {retry[-1]})" if retry else "")
                    )
                self.cluster.request_update()
                await asyncio.sleep(self._retry_backoff_ms / 1000)
        if self.retry_log.failing:
            self.retry_log.succeeded("list_offsets")
        return out
