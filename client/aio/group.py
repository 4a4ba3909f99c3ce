"""A consumer's membership of its group (KIP-848): heartbeats, reconciliation, commits.

    g = GroupMember(config, cluster, fetcher)
    g.subscribe(["t"], on_assign, on_revoke, on_lost)  # starts the heartbeat task
    ev = await g.next_event()      # from poll(): a GroupEvent to run the callback of, or None
    ...run ev's callback in the caller's thread...
    await g.event_done(ev)         # then the coordinator hears about it at once
    await g.commit({tp: offset}) / await g.committed([tp])
    ev = await g.leave_prepare(); ...callback...; await g.leave()   # close()

The heartbeat task sends ConsumerGroupHeartbeat to the group's coordinator every
`heartbeat_interval_ms` the coordinator names (at once after a revocation or when the
subscription changed), and records the partitions the coordinator says the member should own
(`target`). It never touches the assignment itself: poll() does, in `next_event()`, so that
the callbacks run from poll() in the application's thread, in this order:

- revoke (partitions owned that are no longer in the target): fetching of them stops, their
  positions are committed (with enable.auto.commit), `on_revoke(partitions)` runs, then the
  member stops owning them and heartbeats at once: the coordinator gives them to their new
  owners only then;
- assign (target partitions not owned yet): their committed offsets are fetched, each
  position starts there, else per auto.offset.reset (logged once per partition with the offset
  chosen), then `on_assign(partitions)`;
- lost (FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: the coordinator removed the member, e.g. after
  its session timed out): the partitions are dropped without a commit (they may be someone
  else's now), `on_lost(partitions)` runs (`on_revoke` when no on_lost was given, as Kafka),
  then the member rejoins with epoch 0.

Loop-owned: every method runs on the consumer's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from types import SimpleNamespace
from typing import NamedTuple

from client.aio.cluster import ClusterClient
from client.aio.consumer_settings import MemberSettings
from client.aio.fetcher import Fetcher
from client.aio.retry_log import RetryLog
from client.aio.types import ConsumerGroupMetadata, TopicPartition
from client.errors import (
    ClientClosedError,
    ErrorCode,
    GregorError,
    GregorTimeoutError,
    UnstableOffsetCommitError,
    error_for_code,
)
from client.protocol import ApiKey
from client.protocol.body import Body

log = logging.getLogger(__name__)

Callback = Callable[[list[TopicPartition]], object]

_REJOIN = {int(ErrorCode.FENCED_MEMBER_EPOCH), int(ErrorCode.UNKNOWN_MEMBER_ID)}
_COORDINATOR_MOVED = {
    int(ErrorCode.NOT_COORDINATOR),
    int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
    int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
}


class GroupEvent(NamedTuple):
    kind: str  # "assign", "revoke" or "lost"
    partitions: tuple[TopicPartition, ...]
    callback: Callback | None


def _nested(tps: Iterable[TopicPartition]) -> list[Body]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def _flat(nested: list[Body]) -> set[TopicPartition]:
    return {TopicPartition(t["topic"], p) for t in nested for p in t["partitions"]}


class GroupMember:
    def __init__(self, config: SimpleNamespace, cluster: ClusterClient, fetcher: Fetcher) -> None:
        """`config`: the resolved consumer config, read once into `settings`."""
        self.settings = MemberSettings.from_config(config)
        self.group_id = self.settings.group_id
        self.cluster = cluster
        self.fetcher = fetcher
        self.member_id = uuid.uuid4().hex
        self.member_epoch = 0
        self.topics: list[str] = []
        self.pattern: str | None = None  # a regex subscription, matched by the coordinator
        self.owned: set[TopicPartition] = set()  # what the application owns (callbacks ran)
        self.target: set[TopicPartition] | None = None  # from the coordinator's last answer
        self.on_assign: Callback | None = None
        self.on_revoke: Callback | None = None
        self.on_lost: Callback | None = None
        self.coordinator: int | None = None
        self.interval_s = 0.0
        self.errors: list[BaseException] = []
        self._lost = False  # fenced: the lost event must run before rejoining
        self.last_poll = time.monotonic()
        self._left = False
        self._task: asyncio.Task[None] | None = None
        self._hb_now = asyncio.Event()
        self._commits: set[asyncio.Task[None]] = set()
        self._auto_commit_at = 0.0
        self._committed: dict[TopicPartition, int] = {}  # what this member last committed
        self._prefix = f"[group={self.group_id} member={self.member_id[:8]}]"
        # heartbeats, commits and offset fetches that keep failing (client/aio/retry_log.py)
        self.retry_log = RetryLog(log)

    # -- subscription and the heartbeat task -----------------------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: Callback | None,
        on_revoke: Callback | None,
        on_lost: Callback | None,
        pattern: str | None = None,
    ) -> None:
        self.topics = sorted(set(topics))
        self.pattern = pattern
        self.on_assign, self.on_revoke, self.on_lost = on_assign, on_revoke, on_lost
        self._left = False
        self.last_poll = time.monotonic()
        self._hb_now.set()
        self._auto_commit_at = time.monotonic() + self.settings.auto_commit_interval_ms / 1000

    async def _heartbeat_loop(self) -> None:
        backoff = self.settings.retry_backoff_ms / 1000
        while not self._left:
            wait = self.interval_s
            if self._lost:
                wait = 0.1  # rejoin only once poll() has run the lost event
            elif self.member_epoch > 0 and self._poll_overdue():
                await self._leave_on_poll_timeout()
                wait = 0.1
            elif self.topics or self.pattern:
                try:
                    await self._heartbeat_once()
                    wait = self.interval_s
                    self.retry_log.succeeded("heartbeat")
                except asyncio.CancelledError:
                    raise
                except GregorError as exc:
                    if not exc.retriable and not isinstance(exc, ClientClosedError):
                        log.error("%s heartbeat failed: %s", self._prefix, exc)
                        self.errors.append(exc)
                        return
                    self.retry_log.failed(
                        "heartbeat", f"{self._prefix} heartbeat to the group coordinator", exc
                    )
                    self.coordinator = None
                    wait = backoff
                except Exception as exc:  # a bug: surface it from poll()
                    log.exception("%s heartbeat task failed", self._prefix)
                    self.errors.append(exc)
                    return
            self._hb_now.clear()
            try:
                await asyncio.wait_for(self._hb_now.wait(), max(wait, 0.0))
            except TimeoutError:
                pass

    async def _find_coordinator(self) -> int:
        if self.coordinator is not None:
            return self.coordinator
        resp = await self.cluster.send_any(
            ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [self.group_id]}
        )
        c = resp["coordinators"][0]
        if c["error_code"]:
            raise error_for_code(c["error_code"])(
                c.get("error_message") or f"FindCoordinator {self.group_id}"
            )
        if c["node_id"] not in self.cluster.metadata.brokers:
            self.cluster.request_update()
            await self.cluster.maybe_refresh()
        self.coordinator = int(c["node_id"])
        log.info("%s coordinator is broker %d", self._prefix, self.coordinator)
        return self.coordinator

    def _poll_overdue(self) -> bool:
        return time.monotonic() - self.last_poll > self.settings.max_poll_interval_ms / 1000

    async def _leave_on_poll_timeout(self) -> None:
        """max.poll.interval.ms passed without a poll(): leave (epoch -1) so the partitions go
        to members that make progress. The member id and epoch stay as they were until the
        next poll() runs on_lost and rejoins, so a late commit is refused by the coordinator
        (UNKNOWN_MEMBER_ID), as Kafka's consumer does."""
        log.warning(
            "%s poll() not called for more than max.poll.interval.ms=%d: leaving the group;"
            " partitions %s are lost (the next poll() rejoins)",
            self._prefix, self.settings.max_poll_interval_ms, sorted(self.owned),
        )  # fmt: skip
        self._lost = True
        self.target = None
        self.fetcher.wake.set()
        if self.coordinator is not None:
            body = {"group_id": self.group_id, "member_id": self.member_id, "member_epoch": -1}
            try:
                await self._send(self.coordinator, ApiKey.CONSUMER_GROUP_HEARTBEAT, body)
            except GregorError as exc:
                log.warning("%s leave heartbeat failed (the session timeout will do): %s",
                            self._prefix, exc)  # fmt: skip

    async def _send(self, node: int, api_key: int, body: Body) -> Body:
        """To the coordinator over the client's coordinator connection (not behind fetches)."""
        conn = await self.cluster.coordinator_connection(node)
        resp = await conn.request(api_key, body)
        assert resp is not None  # (expect_response: an answer or an exception)
        return resp

    async def _heartbeat_once(self) -> None:
        node = await self._find_coordinator()
        cfg = self.settings
        epoch = self.member_epoch
        body = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": epoch,
            "instance_id": cfg.group_instance_id,
            "rebalance_timeout_ms": cfg.max_poll_interval_ms,
            "session_timeout_ms": -1 if cfg.session_timeout_ms is None else cfg.session_timeout_ms,
            "subscribed_topic_names": self.topics,
            "subscribed_topic_regex": self.pattern or "",
            "server_assignor": cfg.group_remote_assignor,
            "owned_topic_partitions": _nested(self.owned),
        }
        resp = await self._send(node, ApiKey.CONSUMER_GROUP_HEARTBEAT, body)
        code = resp["error_code"]
        if code in _REJOIN:
            log.warning(
                "%s heartbeat at epoch %d: %s; partitions %s are lost, rejoining",
                self._prefix, epoch, ErrorCode(code).name, sorted(self.owned),
            )  # fmt: skip
            self.target = None
            self._lost = True  # (the epoch goes to 0 once poll() ran the lost event)
            self.fetcher.wake.set()
            return
        if code == ErrorCode.UNRELEASED_INSTANCE_ID:
            # The previous process with this group.instance.id has not left (a crash): the
            # coordinator frees the id after its session timeout; join then.
            log.warning("%s %s; retrying", self._prefix, resp.get("error_message"))
            self.interval_s = max(self.interval_s, 0.5)
            return
        if code:
            if code in _COORDINATOR_MOVED:
                self.coordinator = None
            raise error_for_code(code)(resp.get("error_message") or "ConsumerGroupHeartbeat")
        if self._left:
            return
        if resp["member_epoch"] != self.member_epoch:
            log.info("%s epoch %d -> %d", self._prefix, self.member_epoch, resp["member_epoch"])
        self.member_epoch = resp["member_epoch"]
        self.interval_s = resp["heartbeat_interval_ms"] / 1000
        if resp["assignment"] is not None:
            target = _flat(resp["assignment"])
            if target != self.target:
                log.info("%s target assignment %s", self._prefix, sorted(target))
                self.target = target
                self.fetcher.wake.set()

    # -- reconciliation, from poll() --------------------------------------------------------------

    def raise_errors(self) -> None:
        if self.errors:
            raise self.errors.pop(0)

    async def next_event(self) -> GroupEvent | None:
        """The next callback poll() must run, with the work before it done; None: nothing.
        The first call starts the heartbeat task (after the consumer's first metadata)."""
        self.last_poll = time.monotonic()
        if self._task is None and not self._left and not self.errors:
            self._task = asyncio.ensure_future(self._heartbeat_loop())
        if self._lost:
            lost = tuple(sorted(self.owned))
            self.fetcher.assign([])
            return GroupEvent("lost", lost, self.on_lost or self.on_revoke)
        if self.target is None:
            return None
        revoke = self.owned - self.target
        if revoke:
            for tp in revoke:
                if tp in self.fetcher.states:
                    self.fetcher.pause(tp)
            if self.settings.enable_auto_commit:
                try:
                    await self.commit(self._positions(revoke))
                except GregorError as exc:
                    log.warning("%s commit before revoking %s failed: %s",
                                self._prefix, sorted(revoke), exc)  # fmt: skip
            return GroupEvent("revoke", tuple(sorted(revoke)), self.on_revoke)
        add = self.target - self.owned
        if add:
            try:
                await self._start_positions(add)
            except UnstableOffsetCommitError:
                # a transaction with offsets of these partitions is still being ended (for
                # up to its transaction.timeout.ms if its producer died): the next poll asks
                # again, as Kafka's consumer does
                return None
            return GroupEvent("assign", tuple(sorted(add)), self.on_assign)
        return None

    async def event_done(self, ev: GroupEvent) -> None:
        """After ev's callback ran (or raised): own the new state, tell the coordinator."""
        if ev.kind == "lost":
            self.owned.clear()
            self._committed.clear()
            self.member_epoch = 0  # rejoin
            self._lost = False
        elif ev.kind == "revoke":
            self.owned.difference_update(ev.partitions)
            for tp in ev.partitions:
                self._committed.pop(tp, None)
            self.fetcher.assign(sorted(self.owned))
        else:
            self.owned.update(ev.partitions)
        self._hb_now.set()

    async def _start_positions(self, add: set[TopicPartition]) -> None:
        if self.cluster.add_topics({tp.topic for tp in add}):  # (topics a regex matched)
            self.cluster.request_update()
        committed = await self.committed(add)
        self.fetcher.assign(sorted(self.owned | add))
        reset = []
        for tp in sorted(add):
            off = committed.get(tp)
            if off is not None:
                self.fetcher.seek(tp, off)
                self._committed[tp] = off
                log.info("%s %s-%d starts at its committed offset %d",
                         self._prefix, tp.topic, tp.partition, off)  # fmt: skip
            else:
                reset.append(tp)
        policy = self.settings.auto_offset_reset
        if not reset or policy == "none":
            return  # (none: poll() raises for the partitions without a position)
        got = await self.fetcher.list_offsets(dict.fromkeys(reset, -2 if policy == "earliest" else -1))  # fmt: skip
        for tp, (off, _ts) in got.items():
            self.fetcher.seek(tp, off)
            log.info(
                "%s %s-%d has no committed offset: starting at %d (auto.offset.reset=%s)",
                self._prefix, tp.topic, tp.partition, off, policy,
            )  # fmt: skip

    def _positions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        out = {}
        for tp in tps:
            st = self.fetcher.states.get(tp)
            if st is not None and st.position is not None:
                out[tp] = st.position
        return out

    # -- commits ---------------------------------------------------------------------------------

    async def maybe_auto_commit(self, tps: Iterable[TopicPartition]) -> None:
        """From poll(): every auto.commit.interval.ms, commit (in the background) the positions
        of `tps` (the owned partitions; with assign(), the assigned ones): the records poll()
        returned so far."""
        if not self.settings.enable_auto_commit or time.monotonic() < self._auto_commit_at:
            return
        self._auto_commit_at = time.monotonic() + self.settings.auto_commit_interval_ms / 1000
        if any(not t.done() for t in self._commits):
            return  # one auto-commit at a time
        changed = {
            tp: off for tp, off in self._positions(tps).items() if self._committed.get(tp) != off
        }
        if changed:
            self.commit_in_background(changed)

    def commit_in_background(self, offsets: Mapping[TopicPartition, int]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(self.commit(offsets))
        self._commits.add(task)
        task.add_done_callback(self._commit_finished)
        return task

    def _commit_finished(self, task: asyncio.Task[None]) -> None:
        self._commits.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("%s background commit failed: %s", self._prefix, task.exception())

    def positions(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._positions(tps)

    async def commit_positions(self, tps: Iterable[TopicPartition]) -> None:
        """Commit (and wait for) the positions of `tps` that changed since the last commit:
        close() of an assign()-mode consumer with enable.auto.commit."""
        changed = {
            tp: off for tp, off in self._positions(tps).items() if self._committed.get(tp) != off
        }
        try:
            await self.commit(changed)
        except GregorError as exc:
            log.warning("%s commit on close failed: %s", self._prefix, exc)

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit to the coordinator with this member's id and epoch, retried through
        coordinator moves and epoch bumps until request.timeout.ms."""
        if not offsets:
            return
        by_topic: dict[str, list[Body]] = {}
        for tp, off in sorted(offsets.items()):
            by_topic.setdefault(tp[0], []).append(
                {"partition": tp[1], "committed_offset": int(off)}
            )
        deadline = time.monotonic() + self.settings.request_timeout_ms / 1000
        last: BaseException | None = None
        while time.monotonic() < deadline:
            body = {
                "group_id": self.group_id,
                "member_id": self.member_id if self.member_epoch > 0 else "",
                "member_epoch": self.member_epoch if self.member_epoch > 0 else -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }
            try:
                node = await self._find_coordinator()
                resp = await self._send(node, ApiKey.OFFSET_COMMIT, body)
            except GregorError as exc:
                if not exc.retriable:
                    raise
                self.coordinator = None
                last = exc
                self.retry_log.failed("commit", f"{self._prefix} offset commit", exc)
                await asyncio.sleep(self.settings.retry_backoff_ms / 1000)
                continue
            codes = {p["error_code"] for t in resp["topics"] for p in t["partitions"]}
            code = max(codes, key=lambda c: c != 0) if codes else 0
            if not code:
                self.retry_log.succeeded("commit")
                for tp, off in offsets.items():
                    self._committed[TopicPartition(*tp)] = int(off)
                log.debug("%s committed %s", self._prefix, dict(offsets))
                return
            msg = next((p.get("error_message") for t in resp["topics"]
                        for p in t["partitions"] if p["error_code"]), None)  # fmt: skip
            err = error_for_code(code)(msg or f"OffsetCommit for group {self.group_id}")
            if code in _COORDINATOR_MOVED:
                self.coordinator = None
            elif code != ErrorCode.STALE_MEMBER_EPOCH or self.member_epoch <= 0 or self._lost:
                if not err.retriable:
                    if code in _REJOIN:  # the coordinator lost this member (e.g. it moved):
                        self._hb_now.set()  # heartbeat now, learn it and rejoin, not in 5 s
                    raise err
            # STALE_MEMBER_EPOCH: a heartbeat answer with the new epoch is on its way
            last = err
            if code != ErrorCode.STALE_MEMBER_EPOCH:
                self.retry_log.failed("commit", f"{self._prefix} offset commit", err)
            self._hb_now.set()
            await asyncio.sleep(self.settings.retry_backoff_ms / 1000)
        raise GregorTimeoutError(
            f"commit to group {self.group_id} timed out"
            + (f" (last error: {last})" if last else "")
        )

    def metadata(self) -> ConsumerGroupMetadata:
        """This member, as send_offsets_to_transaction needs it (not yet joined: -1, "")."""
        joined = self.member_epoch > 0
        return ConsumerGroupMetadata(
            self.group_id,
            self.member_epoch if joined else -1,
            self.member_id if joined else "",
            self.settings.group_instance_id,
        )

    async def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None: none committed)."""
        tps = [TopicPartition(*tp) for tp in tps]
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "group_id": self.group_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            # offsets of a transaction not yet ended: UNSTABLE_OFFSET_COMMIT, retried (Kafka)
            "require_stable": True,
        }
        deadline = time.monotonic() + self.settings.request_timeout_ms / 1000
        while True:
            try:
                node = await self._find_coordinator()
                resp = await self._send(node, ApiKey.OFFSET_FETCH, body)
                if resp["error_code"]:
                    if resp["error_code"] in _COORDINATOR_MOVED:
                        self.coordinator = None
                    raise error_for_code(resp["error_code"])(
                        resp.get("error_message") or "OffsetFetch"
                    )
                code = next((p["error_code"] for t in resp["topics"] for p in t["partitions"]
                             if p.get("error_code")), 0)  # fmt: skip
                if code:
                    raise error_for_code(code)(f"OffsetFetch for group {self.group_id}")
            except GregorError as exc:
                if not exc.retriable or time.monotonic() > deadline:
                    raise
                self.coordinator = None
                self.retry_log.failed(
                    "offset_fetch", f"{self._prefix} fetching committed offsets", exc
                )
                await asyncio.sleep(self.settings.retry_backoff_ms / 1000)
                continue
            self.retry_log.succeeded("offset_fetch")
            out: dict[TopicPartition, int | None] = dict.fromkeys(tps)
            for t in resp["topics"]:
                for p in t["partitions"]:
                    off = p["committed_offset"]
                    out[TopicPartition(t["name"], p["partition"])] = off if off >= 0 else None
            return out

    # -- leaving ---------------------------------------------------------------------------------

    async def close(self) -> None:
        """The consumer's close(), after leave() if it was subscribed: stop the heartbeat task
        and let background commits finish (each ends by request.timeout.ms), so no task of
        this member is left pending."""
        self._left = True
        await self._stop_tasks()

    async def _stop_tasks(self) -> None:
        """Cancel the heartbeat task and wait for background commits (each ends by
        request.timeout.ms), so no task of this member is left pending."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._commits:
            await asyncio.gather(*self._commits, return_exceptions=True)

    async def leave_prepare(self) -> GroupEvent | None:
        """close()/unsubscribe(): stop fetching, commit (auto-commit), and the revoke event of
        everything owned (None when nothing is)."""
        owned = tuple(sorted(self.owned))
        if self._lost:  # removed by the coordinator: nothing to commit, on_lost
            self.fetcher.assign([])
            return GroupEvent("lost", owned, self.on_lost or self.on_revoke) if owned else None
        for tp in owned:
            if tp in self.fetcher.states:
                self.fetcher.pause(tp)
        if self.settings.enable_auto_commit and owned and self.member_epoch > 0:
            try:
                await self.commit(self._positions(owned))
            except GregorError as exc:
                log.warning("%s commit on leaving failed: %s", self._prefix, exc)
        if not owned:
            return None
        return GroupEvent("revoke", owned, self.on_revoke)

    async def leave(self) -> None:
        """Send the leave heartbeat so the partitions move at once (member epoch -1), or, with
        a group.instance.id, are kept for this instance until its session timeout (-2)."""
        self._left = True
        self._hb_now.set()
        await self._stop_tasks()
        self.owned.clear()
        self.target = None
        self.fetcher.assign([])
        if self.member_epoch > 0 and self.coordinator is not None:
            static = self.settings.group_instance_id is not None
            body = {"group_id": self.group_id, "member_id": self.member_id,
                    "member_epoch": -2 if static else -1,
                    "instance_id": self.settings.group_instance_id}  # fmt: skip
            try:
                await self._send(self.coordinator, ApiKey.CONSUMER_GROUP_HEARTBEAT, body)
                log.info("%s left the group%s", self._prefix,
                         " (static: its partitions wait for it)" if static else "")  # fmt: skip
            except GregorError as exc:
                log.warning("%s leave heartbeat failed (the session timeout will do): %s",
                            self._prefix, exc)  # fmt: skip
        self.member_epoch = 0
        self.member_id = uuid.uuid4().hex  # a later subscribe() joins as a new member
        self.topics = []
        self.pattern = None
