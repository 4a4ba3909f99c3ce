"""The consumer's fetcher: pipelined Fetch requests per leader and a bounded buffer of
fetched-but-unpolled records.

    positions {tp: next offset to return}      fetch_offsets {tp: next offset to fetch}
    poll() <── drain() decodes <── buffer of fetched bytes (bounded by fetch.buffer.bytes) <── Fetch per leader

Prefetching: a new Fetch for a leader is issued as soon as its previous one is answered and
the buffer has room, so the next records arrive while the user processes the current ones.
The fetch offset runs ahead of the position; seek() and pause() drop buffered data of that
partition (a generation counter discards answers of fetches sent before the seek).

Retriable failures (a broker that does not answer, a partition without a leader, errors such
as NOT_LEADER_OR_FOLLOWER) are retried after retry.backoff.ms, and reported through
`RetryLog` (client/aio/retry_log.py): a WARNING when a broker's fetches or a partition's
start failing, at most one per 10 s while it lasts, an INFO when it works again.

Which of the fetched records are returned (read_committed's last stable offset and aborted
transactions, control records) is the `RecordFilter`'s (client/aio/record_filter.py).

Loop-owned: every method runs on the consumer's event loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from types import SimpleNamespace
from typing import Any

from client.aio.cluster import ClusterClient, ClusterMetadata
from client.aio.consumer_settings import FetchSettings
from client.aio.offset_lookup import OffsetLookup
from client.aio.record_filter import RecordFilter
from client.aio.retry_log import RetryLog
from client.aio.types import ConsumerRecord, TopicPartition
from client.errors import (
    ErrorCode,
    GregorError,
    LogTruncationError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    error_for_code,
)
from client.metrics import ConsumerMetrics
from client.protocol import ApiKey
from client.protocol.body import Body
from client.records import next_offset_and_epoch

log = logging.getLogger(__name__)
_new = tuple.__new__


_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
    }
)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("fetch task failed", exc_info=task.exception())


# A buffered Fetch answer of one partition: [tp, generation, records (None until decoded),
# next index, bytes, undecoded data, requested offset, end offset]; a list, changed in place
Chunk = list[Any]


class PartitionState:
    __slots__ = (
        "position",
        "fetch_offset",
        "paused",
        "generation",
        "high_watermark",
        "log_start_offset",
        "needs_reset",
        "retry_at",
        "fetch_bytes",
        "fetch_epoch",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetch_offset: int | None = None
        self.paused = False
        self.generation = 0
        self.high_watermark = -1
        self.log_start_offset = -1
        self.needs_reset = True
        self.retry_at = 0.0
        self.fetch_bytes = 0  # > 0: a larger partition_max_bytes after an oversized batch
        # Leader epoch of the last batch fetched, sent as last_fetched_epoch so the leader can
        # say where its log diverges from what was read (-1: unknown, after a seek or reset)
        self.fetch_epoch = -1


class Fetcher:
    def __init__(self, config: SimpleNamespace, cluster: ClusterClient) -> None:
        """`config`: the resolved consumer config, read once into `settings`."""
        self.settings = settings = FetchSettings.from_config(config)
        self.cluster = cluster
        self.states: dict[TopicPartition, PartitionState] = {}
        # Buffered chunks: [tp, generation, records (None until decoded), next index, bytes,
        # undecoded data, requested offset]
        self.buffer: collections.deque[Chunk] = collections.deque()
        self.buffered_bytes = 0
        self.errors: list[BaseException] = []
        self.wake = asyncio.Event()
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._closed = False
        self.filter = RecordFilter(settings.read_committed, settings.check_crcs)
        self.retry_log = RetryLog(log)
        self.metrics = ConsumerMetrics()  # Consumer.metrics(): per fetch and per poll
        self.lookup = OffsetLookup(
            cluster,
            settings.request_timeout_ms,
            settings.retry_backoff_ms,
            self.filter.isolation_level,
            self.retry_log,
        )

    def lags(self) -> dict[str, int]:
        """{"topic-partition": high watermark - position} of the partitions where both are
        known (metrics); read_committed: last stable offset - position, as Kafka's consumer."""
        out = {}
        for tp, st in list(self.states.items()):
            if st.position is not None and st.high_watermark >= 0:
                out[f"{tp.topic}-{tp.partition}"] = max(0, st.high_watermark - st.position)
        return out

    # -- assignment ----------------------------------------------------------------------------

    def assign(self, tps: list[TopicPartition]) -> None:
        new = {}
        for tp in tps:
            new[tp] = self.states.get(tp) or PartitionState()
        self.states = new
        self.buffer = collections.deque(c for c in self.buffer if c[0] in new)
        self._recount()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        st = self.states[tp]
        st.position = st.fetch_offset = offset
        st.needs_reset = False
        self._drop(tp)
        st.retry_at = 0.0

    def request_reset(self, tp: TopicPartition) -> None:
        st = self.states[tp]
        st.needs_reset = True
        st.position = st.fetch_offset = None
        self._drop(tp)

    def pause(self, tp: TopicPartition) -> None:
        st = self.states[tp]
        st.paused = True
        self._drop(tp)

    def resume(self, tp: TopicPartition) -> None:
        self.states[tp].paused = False
        self.wake.set()

    def _drop(self, tp: TopicPartition) -> None:
        st = self.states[tp]
        st.generation += 1
        st.fetch_epoch = -1  # (the epoch at the position is not known)
        if st.position is not None:
            st.fetch_offset = st.position
        self.buffer = collections.deque(c for c in self.buffer if c[0] != tp)
        self._recount()
        self.wake.set()

    def _recount(self) -> None:
        self.buffered_bytes = sum(c[4] for c in self.buffer)

    # -- offsets -------------------------------------------------------------------------------

    async def list_offsets(
        self, query: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """{tp: timestamp(-2|-1|ms)} -> {tp: (offset, timestamp)} from each partition's leader
        (client/aio/offset_lookup.py)."""
        return await self.lookup.list_offsets(query)

    async def reset_positions(self) -> None:
        """Resolve unknown positions per auto.offset.reset."""
        need = [tp for tp, st in self.states.items() if st.needs_reset]
        if not need:
            return
        policy = self.settings.auto_offset_reset
        if policy == "none":
            raise OffsetOutOfRangeError(
                f"no position for {need[0].topic}-{need[0].partition} and auto.offset.reset=none"
            )
        ts = -2 if policy == "earliest" else -1
        got = await self.list_offsets(dict.fromkeys(need, ts))
        for tp, (offset, _ts) in got.items():
            st = self.states.get(tp)
            if st is not None and st.needs_reset:
                st.position = st.fetch_offset = offset
                st.needs_reset = False

    # -- fetching ------------------------------------------------------------------------------

    def send_fetches(self) -> None:
        """Issue a Fetch to every leader without one in flight, if the buffer has room."""
        if self._closed or self.buffered_bytes >= self.settings.fetch_buffer_bytes:
            return
        md = self.cluster.metadata
        now = time.monotonic()
        by_node: dict[int, list[tuple[TopicPartition, int, int]]] = {}
        buffered_tps = {c[0] for c in self.buffer}
        for tp, st in self.states.items():
            if st.paused or st.fetch_offset is None or st.retry_at > now:
                continue
            if (
                tp in buffered_tps
                and self.buffered_bytes >= self.settings.max_partition_fetch_bytes * 2
            ):
                continue
            leader = md.leader_for(tp)
            if leader < 0:
                self.cluster.request_update()
                self._no_leader(tp, md)
                continue
            if leader in self._in_flight:
                continue
            by_node.setdefault(leader, []).append((tp, st.fetch_offset, st.generation))
        for node, parts in by_node.items():
            task = asyncio.ensure_future(self._fetch(node, parts))
            self._in_flight[node] = task
            task.add_done_callback(_log_failure)

    def _no_leader(self, tp: TopicPartition, md: ClusterMetadata) -> None:
        """An assigned partition that cannot be fetched for want of a leader: a warning once
        the metadata says so (offline, or the topic's error), not while it is still asked."""
        code = md.topic_errors.get(tp.topic)
        if code is not None:
            why = str(error_for_code(code)(f"topic {tp.topic!r}"))
        elif tp.topic in md.topics:
            why = "no leader in the metadata (partition offline)"
        else:
            return
        # (a leader election or a topic being created: routine for a moment)
        self.retry_log.failed(tp, f"fetch of {tp.topic}-{tp.partition}", why, grace_s=2.0)

    async def _fetch(self, node: int, parts: list[tuple[TopicPartition, int, int]]) -> None:
        try:
            await self._fetch_once(node, parts)
        finally:
            self._done(node)
            self.wake.set()

    def _done(self, node: int) -> None:
        """Forget the current task's fetch to `node` (before waking poll(), so it can fetch
        again); a task already replaced by the next pipelined fetch is left alone."""
        if self._in_flight.get(node) is asyncio.current_task():
            del self._in_flight[node]

    async def _fetch_once(self, node: int, parts: list[tuple[TopicPartition, int, int]]) -> None:
        cfg = self.settings
        md = self.cluster.metadata
        topics: dict[str, list[Body]] = {}
        for tp, offset, _gen in parts:
            st = self.states.get(tp)
            grown = st.fetch_bytes if st is not None else 0
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "fetch_offset": offset,
                    "partition_max_bytes": grown or cfg.max_partition_fetch_bytes,
                    # KIP-320: a leader of another epoch answers FENCED/UNKNOWN_LEADER_EPOCH
                    # (metadata is refreshed), and one whose log diverges from what was
                    # read says where (truncation detection, _diverged)
                    "current_leader_epoch": md.leader_epoch_for(tp),
                    "last_fetched_epoch": st.fetch_epoch if st is not None else -1,
                }
            )
        body = {
            "replica_id": -1,
            "max_wait_ms": cfg.fetch_max_wait_ms,
            "min_bytes": cfg.fetch_min_bytes,
            "max_bytes": cfg.fetch_max_bytes,
            "isolation_level": self.filter.isolation_level,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        sent_at = time.monotonic()
        try:
            resp = await self.cluster.send(
                node, ApiKey.FETCH, body, timeout_ms=cfg.request_timeout_ms + cfg.fetch_max_wait_ms
            )
        except GregorError as exc:
            if not exc.retriable:
                self.errors.append(exc)
            else:
                self.retry_log.failed(
                    ("broker", node), f"fetch from broker {node} ({len(parts)} partitions)", exc
                )
                self.cluster.request_update()
                backoff = time.monotonic() + cfg.retry_backoff_ms / 1000
                for tp, _o, _g in parts:
                    st = self.states.get(tp)
                    if st is not None:
                        st.retry_at = backoff
            self.wake.set()
            return
        assert resp is not None
        if resp["error_code"]:
            self.errors.append(error_for_code(resp["error_code"])(f"Fetch from broker {node}"))
            self.wake.set()
            return
        failing = self.retry_log.failing
        if failing and ("broker", node) in failing:
            self.retry_log.succeeded(("broker", node))
        sent = {tp: (offset, gen) for tp, offset, gen in parts}
        fetched = []
        for t in resp["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition"])
                if failing and tp in failing and not p["error_code"]:
                    self.retry_log.succeeded(tp)
                got = self._on_partition(tp, p, sent.get(tp), node)
                if got is not None:
                    fetched.append(got)
        # Pipelining: the next Fetch goes out at once, so the broker reads and sends the next
        # chunk while the caller decodes and processes this one (no await in between).
        self._done(node)
        self.send_fetches()
        m = self.metrics
        m.fetches.record(time.monotonic() - sent_at)
        m.throttle.record(resp.get("throttle_time_ms", 0))
        m.bytes.record(sum(len(got[1]) for got in fetched))
        for tp, data, offset, end, aborted in fetched:
            self._buffer_records(tp, data, offset, end, aborted)
        self.wake.set()

    def _on_partition(
        self, tp: TopicPartition, p: Body, sent: tuple[int, int] | None, node: int = -1
    ) -> tuple[TopicPartition, bytes, int, int, list[Body] | None] | None:
        """Handle one partition of a Fetch answer without decoding its records: errors,
        watermarks, and the next fetch offset (from the batch headers). Returns (tp, records
        bytes, requested offset, offset after the last batch, the aborted transactions when
        read_committed) to decode, or None. The bytes count as buffered from here."""
        st = self.states.get(tp)
        if st is None or sent is None or st.generation != sent[1] or st.fetch_offset != sent[0]:
            return None  # unassigned, sought or paused since the fetch was sent
        code = p["error_code"]
        if code:
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                if self.settings.auto_offset_reset == "none":
                    self.errors.append(
                        OffsetOutOfRangeError(
                            f"{tp.topic}-{tp.partition}: offset {sent[0]} out of range"
                        )
                    )
                else:
                    log.info(
                        "%s-%d: offset %d out of range; resetting (%s)",
                        tp.topic,
                        tp.partition,
                        sent[0],
                        self.settings.auto_offset_reset,
                    )
                    self.request_reset(tp)
                return None
            if code in _METADATA_ERRORS:
                self.cluster.request_update()
            exc = error_for_code(code)(f"Fetch {tp.topic}-{tp.partition}")
            if exc.retriable:
                st.retry_at = time.monotonic() + self.settings.retry_backoff_ms / 1000
                self.retry_log.failed(
                    tp, f"fetch of {tp.topic}-{tp.partition} (broker {node})", exc
                )
            else:
                self.errors.append(exc)
            return None
        st.high_watermark = self.filter.readable_end(p)  # (read_committed: the LSO)
        st.log_start_offset = p["log_start_offset"]
        if p.get("diverging_end_offset", -1) >= 0:
            self._diverged(tp, st, p["diverging_epoch"], p["diverging_end_offset"])
            return None
        data = p["records"]
        if not data:
            return None
        offset = sent[0]
        try:
            got = next_offset_and_epoch(data)
        except GregorError as exc:
            self.errors.append(exc)
            return None
        end = None if got is None else got[0]
        if got is not None:
            st.fetch_epoch = got[1]
        if end is None:
            # Only part of one batch fit in partition_max_bytes: ask for more next time.
            size = max(st.fetch_bytes or self.settings.max_partition_fetch_bytes, len(data)) * 2
            if size > self.settings.fetch_max_bytes:
                self.errors.append(
                    MessageTooLargeError(
                        f"{tp.topic}-{tp.partition}: the batch at offset {offset} is larger "
                        f"than fetch.max.bytes={self.settings.fetch_max_bytes}"
                    )
                )
            else:
                st.fetch_bytes = size
            return None
        st.fetch_bytes = 0
        st.fetch_offset = max(offset, end)
        self.buffered_bytes += len(data)
        return tp, data, offset, end, self.filter.aborted(p)

    def _diverged(self, tp: TopicPartition, st: PartitionState, epoch: int, end: int) -> None:
        """The leader's log diverges from what this consumer fetched at offset `end` (the end of
        `epoch` there): only after an unclean election can records below the HW go. Buffered
        records past it are dropped; when the position itself is past it (records the user
        consumed are gone) the consumer raises LogTruncationError under
        auto.offset.reset=none, else logs a warning and goes on from `end` (Kafka's rule)."""
        name = f"{tp.topic}-{tp.partition}"
        position = st.position if st.position is not None else end
        if end >= position:
            log.info(
                "%s: the leader's log diverges at %d, past the position: refetching", name, end
            )
            self._drop(tp)
            return
        if self.settings.auto_offset_reset == "none":
            self.errors.append(
                LogTruncationError(
                    f"{name}: truncation detected: the position {position} is past the offset "
                    f"{end} where the leader's log diverges (end of epoch {epoch}); records "
                    f"{end}..{position - 1} that were consumed are gone: seek() to go on",
                    tp,
                    end,
                )
            )
            self._drop(tp)
            st.retry_at = float("inf")  # until the user seeks
            return
        log.warning(
            "%s: truncation detected: the position %d is past the offset %d where the leader's "
            "log diverges (end of epoch %d); records %d..%d that were consumed are gone; "
            "going on from %d",
            name,
            position,
            end,
            epoch,
            end,
            position - 1,
            end,
        )
        self.seek(tp, end)

    def _buffer_records(
        self,
        tp: TopicPartition,
        data: bytes,
        offset: int,
        end: int,
        aborted: list[Body] | None = None,
    ) -> None:
        """Queue what _on_partition accepted, undecoded: drain() decodes a chunk when it first
        takes records from it, on the thread that polls (see drain). `end`: the offset after
        its last batch, where the position goes once the chunk is consumed (past the offsets
        a compacted log no longer holds, docs/storage.md "Compaction")."""
        self.buffer.append(
            [tp, self.states[tp].generation, None, 0, len(data), data, offset, end, aborted]
        )

    def _decode(self, chunk: Chunk) -> bool:
        """Decode a buffered chunk in place ([tp, gen, records, next index, bytes, data,
        requested offset, end, aborted transactions]), keeping what the RecordFilter lets
        through. False when the bytes are corrupt: the error is queued for poll() to raise
        and the partition is fetched again from its position (the error repeats until the user
        seeks past it), dropping whatever was fetched after these bytes."""
        tp = chunk[0]
        try:
            records, start = self.filter.decode(tp, chunk[5], chunk[6], chunk[8])
        except GregorError as exc:
            self.errors.append(exc)
            self._drop(tp)
            return False
        chunk[2], chunk[3], chunk[5] = records, start, None
        return True

    def drain(self, max_records: int) -> list[ConsumerRecord]:
        """Up to `max_records` buffered records, advancing positions.

        Chunks are decoded here rather than when their Fetch answer arrives: with the blocking
        facade, poll() waits for this call, so the loop thread decodes while the caller is
        blocked and only receives bytes while the caller works through the records, instead
        of the two threads contending for the GIL (docs/client.md, "Consumer speed")."""
        out: list[ConsumerRecord] = []
        kd = self.settings.key_deserializer
        vd = self.settings.value_deserializer
        while self.buffer and len(out) < max_records:
            chunk = self.buffer[0]
            tp, gen, records, idx, nbytes = chunk[:5]
            st = self.states.get(tp)
            if st is None or st.generation != gen or st.paused:
                self.buffer.popleft()
                self.buffered_bytes -= nbytes
                continue
            if records is None:
                if not self._decode(chunk):
                    continue  # _drop removed this partition's chunks
                records, idx = chunk[2], chunk[3]
            take = min(len(records) - idx, max_records - len(out))
            if take <= 0:  # every record is before the requested offset, or none is left
                self.buffer.popleft()
                self.buffered_bytes -= nbytes
                if st.position is not None and chunk[7] > st.position:
                    st.position = chunk[7]  # compacted-away offsets: the position moves on
                continue
            if kd is None and vd is None:
                out += records if take == len(records) else records[idx : idx + take]
            else:
                for t, p, o, ts, k, v, h in records[idx : idx + take]:
                    if kd is not None and k is not None:
                        k = kd(k)
                    if vd is not None and v is not None:
                        v = vd(v)
                    out.append(_new(ConsumerRecord, (t, p, o, ts, k, v, h)))
            idx += take
            st.position = records[idx - 1].offset + 1
            if idx >= len(records):
                self.buffer.popleft()
                self.buffered_bytes -= nbytes
                if chunk[7] > st.position:  # the chunk ends with compacted-away offsets
                    st.position = chunk[7]
            else:
                chunk[3] = idx
        if out:
            self.metrics.records.record(len(out))
        return out

    def raise_errors(self) -> None:
        if self.errors:
            exc = self.errors.pop(0)
            self.errors.clear()
            raise exc

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._in_flight.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
