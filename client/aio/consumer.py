"""Asyncio Consumer: assign/subscribe, poll with prefetching, seek, offsets, pause/resume.

    c = Consumer(bootstrap_servers="localhost:9092", auto_offset_reset="earliest")
    await c.start()
    c.subscribe(["t"])                # no group_id: ALL partitions of the topics
    records = await c.poll(timeout_ms=1000)

With `group_id`, `subscribe(topics, on_assign, on_revoke, on_lost)` joins the group (KIP-848:
the coordinator assigns; client/aio/group.py heartbeats and reconciles) and poll() runs the
callbacks; `commit()`/`committed()` talk to the group's coordinator; enable.auto.commit commits
from poll() and close(). Without one, `subscribe()` assigns every partition of the subscribed
topics (growing with new partitions on metadata refresh) and nothing is committed.

Loop-owned: every method runs on the consumer's event loop (the sync facade hops there).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from client.aio.cluster import ClusterClient
from client.aio.config import resolve_config
from client.aio.fetcher import Fetcher
from client.aio.group import Callback, GroupEvent, GroupMember
from client.aio.retry_log import RetryLog
from client.aio.types import ConsumerGroupMetadata, ConsumerRecord, TopicPartition
from client.errors import ClientClosedError, ConfigError, GregorError

log = logging.getLogger(__name__)


class Consumer:
    def __init__(
        self, *topics: str, config: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if topics and isinstance(topics[0], Mapping):
            config, topics = topics[0], topics[1:]  # Consumer({"bootstrap.servers": ...})
        self.config = cfg = resolve_config("consumer", config, kwargs)
        self.group_id = cfg.group_id
        self._cluster = ClusterClient(cfg)
        self._fetcher = Fetcher(cfg, self._cluster)
        self._group: GroupMember | None = (
            GroupMember(cfg, self._cluster, self._fetcher) if cfg.group_id else None
        )
        self._subscription: list[str] | None = None
        self._pattern: str | None = None
        self._leaving: asyncio.Task[None] | None = None
        self._retry_log = RetryLog(log)
        self._started = False
        self._closed = False
        if topics:
            self.subscribe(list(topics))

    async def start(self) -> None:
        if self._closed:
            raise ClientClosedError("consumer is closed")
        if not self._started:
            await self._cluster.refresh()
            self._started = True

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Leave the group at once (after the auto-commit and on_revoke), then close."""
        if self._closed:
            return
        if self._leaving is not None:
            await asyncio.gather(self._leaving, return_exceptions=True)
        try:
            await self._leave_group()
        finally:  # (an on_revoke that raised still lets the consumer close)
            self._closed = True
            if self._group is not None:
                await self._group.close()
            await self._fetcher.close()
            await self._cluster.close()

    async def _leave_prepare(self) -> GroupEvent | None:
        """close(), step 1: commit and the revoke event of what the member owns (with assign()
        and a group_id: the auto-commit only)."""
        if self._group is None:
            return None
        if self._subscription is None:
            if self.config.enable_auto_commit and self._fetcher.states:
                await self._group.commit_positions(list(self._fetcher.states))
            return None
        return await self._group.leave_prepare()

    async def _leave_finish(self) -> None:
        """close(), step 2 (after on_revoke ran): the leave heartbeat."""
        if self._group is not None and self._subscription is not None:
            self._subscription = None
            await self._group.leave()

    # -- assignment ----------------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._check_open()
        if self._group is not None and self._subscription is not None:
            raise ConfigError("assign() after subscribe() with a group: unsubscribe() first")
        tps = [TopicPartition(*tp) for tp in partitions]
        self._subscription = None
        self._cluster.add_topics({tp.topic for tp in tps})
        self._fetcher.assign(tps)

    def subscribe(
        self,
        topics: Iterable[str] | re.Pattern[str],
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
    ) -> None:
        """Subscribe to `topics` (a list of names) or a compiled pattern (`re.compile(...)`,
        with a group_id only: the coordinator matches it in full against the topic names,
        topics created later included). With a group_id the group's coordinator assigns
        partitions; the callbacks get lists of TopicPartition and run from poll(). Without
        one, every partition of each topic is read (the callbacks are refused: there are no
        rebalances)."""
        self._check_open()
        pattern: str | None = None
        if isinstance(topics, re.Pattern):
            if self._group is None:
                raise ConfigError("subscribing to a pattern needs a group_id")
            pattern = str(topics.pattern)
            names: list[str] = []
        elif isinstance(topics, str):
            raise ConfigError(
                "subscribe() takes a list of topic names, or re.compile(pattern) for a regex"
            )
        else:
            names = list(topics)
            if not names:
                raise ConfigError("subscribe() needs at least one topic (unsubscribe() to stop)")
        if self._group is None and (on_assign or on_revoke or on_lost):
            raise ConfigError("on_assign/on_revoke/on_lost need a group_id")
        self._subscription = names
        self._pattern = pattern
        self._cluster.add_topics(names)
        self._cluster.request_update()
        if self._group is not None:
            self._group.subscribe(names, on_assign, on_revoke, on_lost, pattern)
        else:
            self._fetcher.assign([])

    def unsubscribe(self) -> None:
        """Stop reading. In a group this leaves it, in a task of this loop: the auto-commit,
        on_revoke, then the leave heartbeat (close() waits for it)."""
        if self._group is not None and self._subscription is not None:
            self._leaving = asyncio.ensure_future(self._leave_group())
            return
        self._subscription = None
        self._fetcher.assign([])

    async def _leave_group(self) -> None:
        ev = await self._leave_prepare()
        try:
            if ev is not None:
                self._run_callback(ev)
        finally:
            await self._leave_finish()

    def subscription(self) -> set[str]:
        """The topic names subscribed to; with a pattern, the topics of the current
        assignment (the coordinator resolves the pattern)."""
        if self._pattern is not None and self._subscription is not None:
            return set(self._subscription) | {tp.topic for tp in self._fetcher.states}
        return set(self._subscription or ())

    def metrics(self) -> dict[str, dict[str, float]]:
        """kafka-python's `consumer.metrics()`: {"consumer-fetch-manager-metrics": {name:
        value}} with records and bytes consumed per second, fetch rate and latency (ms) over the
        last 30-60 s, and the lag (high watermark - position) per assigned partition and its
        max (client/metrics.py; docs/client.md, "Metrics"). On the loop thread."""
        return self._fetcher.metrics.snapshot(self._fetcher.lags())

    def assignment(self) -> set[TopicPartition]:
        return set(self._fetcher.states)

    async def _update_subscription(self) -> None:
        if self._subscription is None or self._group is not None:
            return
        md = await self._cluster.maybe_refresh()
        want = [
            TopicPartition(t, p) for t in self._subscription for p in (md.partitions_for(t) or [])
        ]
        if set(want) != set(self._fetcher.states):
            self._fetcher.assign(want)

    # -- polling -------------------------------------------------------------------------------

    async def poll(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records fetched since the last poll (up to max_poll_records), waiting up to
        `timeout_ms` for some to arrive. In a group, runs the assignment callbacks first and
        auto-commits. Raises fetch errors (e.g. OffsetOutOfRangeError when
        auto.offset.reset=none)."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            got = await self._poll((deadline - time.monotonic()) * 1000, max_records)
            if isinstance(got, GroupEvent):
                await self._run_event(got)
                continue
            return got

    async def _run_event(self, ev: GroupEvent) -> None:
        assert self._group is not None
        try:
            self._run_callback(ev)
        finally:
            await self._group.event_done(ev)

    @staticmethod
    def _run_callback(ev: GroupEvent) -> None:
        if ev.callback is not None:
            ev.callback(list(ev.partitions))

    async def _poll(
        self, timeout_ms: float, max_records: int | None
    ) -> list[ConsumerRecord] | GroupEvent:
        """poll() up to a group event: the sync facade runs its callback in the caller's
        thread, then `_event_done(ev)`."""
        self._check_open()
        await self.start()
        limit = max_records or self.config.max_poll_records
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        f = self._fetcher
        g = self._group if self._subscription is not None else None
        while True:
            f.raise_errors()
            if g is not None:
                g.raise_errors()
                ev = await g.next_event()
                if ev is not None:
                    return ev
                await g.maybe_auto_commit(g.owned)
            elif self._group is not None and f.states:  # assign() with a group_id
                await self._group.maybe_auto_commit(list(f.states))
            if self._subscription is not None or self._cluster.stale:
                try:
                    await self._update_subscription()
                    if self._cluster.stale:
                        await self._cluster.maybe_refresh()
                    if self._retry_log.failing:
                        self._retry_log.succeeded("metadata")
                except GregorError as exc:
                    if not exc.retriable:
                        raise
                    self._retry_log.failed("metadata", "metadata refresh", exc)
            await f.reset_positions()
            out = f.drain(limit)
            f.send_fetches()  # prefetch while the caller processes `out`
            if out:
                return out
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return out
            f.wake.clear()
            f.send_fetches()
            try:
                # Capped so back-offs and metadata changes are looked at again soon.
                await asyncio.wait_for(f.wake.wait(), min(remaining, 0.1))
            except TimeoutError:
                pass

    async def _event_done(self, ev: GroupEvent) -> None:
        assert self._group is not None
        await self._group.event_done(ev)

    # -- commits (groups) ----------------------------------------------------------------------

    def _member(self) -> GroupMember:
        self._check_open()
        if self._group is None:
            raise ConfigError("committing needs a group_id")
        return self._group

    async def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, asynchronous: bool = False
    ) -> asyncio.Task[None] | None:
        """Commit `offsets` ({tp: next offset to read}), default the positions of every
        assigned partition (the records poll() returned). With assign() (no subscription) the
        commit goes to the group without membership, which the coordinator accepts while the
        group has no members. asynchronous=True returns the background task at once
        (failures are logged)."""
        g = self._member()
        await self.start()
        todo = g.positions(list(self._fetcher.states)) if offsets is None else {
            TopicPartition(*tp): int(off) for tp, off in offsets.items()
        }  # fmt: skip
        if asynchronous:
            return g.commit_in_background(todo)
        await g.commit(todo)
        return None

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This consumer's group membership (group id, member epoch, member id, instance id),
        for Producer.send_offsets_to_transaction: the group's coordinator refuses the offsets
        if the member was fenced or left (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
        return self._member().metadata()

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None: nothing committed)."""
        g = self._member()
        await self.start()
        return await g.committed(partitions)

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        if not hasattr(self, "_pending") or not self._pending:
            self._pending: list[ConsumerRecord] = []
            while not self._pending:
                if self._closed:
                    raise StopAsyncIteration
                self._pending = (await self.poll(timeout_ms=1000))[::-1]
        return self._pending.pop()

    # -- positions -----------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check_assigned(tp)
        if offset < 0:
            raise ConfigError(f"seek offset must be >= 0, got {offset}")
        self._fetcher.seek(TopicPartition(*tp), offset)

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        await self._seek_to(tps, -2)

    async def seek_to_end(self, *tps: TopicPartition) -> None:
        await self._seek_to(tps, -1)

    async def _seek_to(self, tps: tuple[TopicPartition, ...], ts: int) -> None:
        await self.start()
        targets = [TopicPartition(*tp) for tp in tps] or list(self._fetcher.states)
        for tp in targets:
            self._check_assigned(tp)
        got = await self._fetcher.list_offsets(dict.fromkeys(targets, ts))
        for tp, (offset, _ts) in got.items():
            self._fetcher.seek(tp, offset)

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record poll() returns for `tp` (resolving a reset if needed)."""
        tp = TopicPartition(*tp)
        self._check_assigned(tp)
        await self.start()
        await self._fetcher.reset_positions()
        pos = self._fetcher.states[tp].position
        assert pos is not None
        return pos

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._offsets(tps, -2)

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark of each partition (the offset the next record will get)."""
        return await self._offsets(tps, -1)

    async def _offsets(self, tps: Iterable[TopicPartition], ts: int) -> dict[TopicPartition, int]:
        await self.start()
        got = await self._fetcher.list_offsets({TopicPartition(*tp): ts for tp in tps})
        return {tp: off for tp, (off, _ts) in got.items()}

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """The earliest offset whose timestamp is >= the given ms, or None past the end."""
        await self.start()
        for ts in timestamps.values():
            if ts < 0:
                raise ConfigError(f"offsets_for_times needs timestamps >= 0, got {ts}")
        got = await self._fetcher.list_offsets(
            {TopicPartition(*tp): ts for tp, ts in timestamps.items()}
        )
        return {tp: (off if off >= 0 else None) for tp, (off, _ts) in got.items()}

    def pause(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._check_assigned(tp)
            self._fetcher.pause(TopicPartition(*tp))

    def resume(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._check_assigned(tp)
            self._fetcher.resume(TopicPartition(*tp))

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._fetcher.states.items() if st.paused}

    async def topics(self) -> list[str]:
        await self.start()
        md = await self._cluster.refresh(all_topics=True)
        return sorted(md.topics)

    async def partitions_for_topic(self, topic: str) -> list[int]:
        await self.start()
        md = await self._cluster.wait_for_partitions(topic, self.config.request_timeout_ms)
        return md.partitions_for(topic) or []

    def _check_assigned(self, tp: TopicPartition) -> None:
        self._check_open()
        if TopicPartition(*tp) not in self._fetcher.states:
            raise ConfigError(f"{tp[0]}-{tp[1]} is not assigned to this consumer")

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("consumer is closed")
