"""RaftMetadataLog: the MetadataLog of a controller quorum, driving a RaftNode on an event loop.

The driver follows docs/raft.md's order for every Ready: persist (RaftStorage, fsync) → send
(`send(to, message_dict)`, fire and forget) → apply (committed entries; NOOPs skipped) → advance.
A metadata record's offset is its Raft index - 1, so NOOP entries leave gaps in the offsets.

Leadership: `is_leader()` is true once this node leads AND has applied the NOOP of its term (so
every earlier entry is committed and applied); then `on_activate` callbacks run (the controller
reloads its image). Losing leadership runs `on_deactivate` callbacks (fail pending calls).

Membership: `change_membership(op, node_id, endpoint)` takes one step of adding or removing a
controller (controller/raft/membership.py); `on_membership` callbacks run (on the loop) whenever
the membership in force changes, so the owner can connect to new members.

Threading: everything except `committed_offset()` must run on the owning event loop's thread
(the controller thread). fsync happens inline on that thread: metadata writes are small and rare.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from client.errors import CorruptRecordError, NotControllerError, OffsetOutOfRangeError
from client.protocol.body import Body
from controller.metadata.records import ClusterId, decode_record
from controller.metadata.snapshot import load_snapshot
from controller.quorum.log import Listener, MetadataLog, notify_listeners
from controller.raft.core import RaftNode
from controller.raft.errors import LogCompacted, NotLeader, ProposalDropped
from controller.raft.membership import Membership
from controller.raft.messages import EntryKind, message_from_dict
from controller.raft.state import Role
from controller.raft.storage import RaftStorage

_log = logging.getLogger(__name__)

Send = Callable[[int, Body], None]

# Entries per AppendEntries. A CreateTopics of 100 topics x 10 partitions is one proposal of
# 1,100 records; with 64 per message the commit (and every voter's MetadataLoader, which copies
# the image per commit step) advanced in ~18 steps per proposal, 512 makes it ~3.
MAX_ENTRIES_PER_MSG = 512


class RaftMetadataLog(MetadataLog):
    def __init__(
        self,
        node_id: int,
        voters: list[int],
        directory: str,
        send: Send,
        *,
        tick_ms: int = 50,
        election_timeout_ticks: int = 10,
        rng: Any = None,
        on_fatal: Callable[[BaseException], None] | None = None,
        max_uncommitted_entries: int = 10_000,
        endpoints: dict[int, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`voters`: the bootstrap voters (in force until the log holds a membership);
        `endpoints`: their "host:port" (for the membership entries); `clock`: seconds, for
        the commit latency."""
        self.node_id = node_id
        self.tick_ms = tick_ms
        self._send = send
        self.storage = RaftStorage(directory)
        state = self.storage.load()
        self.node = RaftNode(
            node_id,
            voters,
            endpoints=endpoints,
            storage_state=state,
            rng=rng or random.Random(),
            election_timeout_ticks=election_timeout_ticks,
            heartbeat_ticks=1,
            max_entries_per_msg=MAX_ENTRIES_PER_MSG,
            max_uncommitted_entries=max_uncommitted_entries,
        )
        self._listeners: list[Listener] = []
        self.on_activate: list[Callable[[], None]] = []
        self.on_deactivate: list[Callable[[], None]] = []
        self.on_membership: list[Callable[[Membership], None]] = []
        self._membership = self.node.config
        self._active = False
        self._noop_index: int | None = None  # index of this term's NOOP while leader
        self._applied = self.node.snapshot.index  # state machine position (Raft index)
        self._committed_offset = self._applied - 1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.on_fatal = on_fatal
        self.failed: BaseException | None = None
        # metrics (controller/metrics.py QuorumMetrics): how often the leader this node knows
        # changed to another known one, and while leading, each proposal's (last index,
        # appended at) until it commits, then `on_commit_latency(seconds)` (set before start)
        self._clock = clock
        self.leader_changes = 0
        self._known_leader = self.node.leader_id
        self._proposed: deque[tuple[int, float]] = deque()
        self.on_commit_latency: Callable[[float], None] | None = None
        _log.info(
            "[controller=%d] raft log loaded: term %d, last index %d, snapshot %d",
            node_id,
            self.node.term,
            self.node.last_index,
            self.node.snapshot.index,
        )

    # -- driver --------------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start ticking on `loop` (call on that loop's thread)."""
        self._loop = loop
        self._timer = loop.call_later(self.tick_ms / 1000.0, self._tick)

    def _tick(self) -> None:
        if self._closed:
            return
        try:
            self.node.tick()
            self._drain()
        except Exception:
            _log.exception("[controller=%d] raft tick failed", self.node_id)
        assert self._loop is not None
        self._timer = self._loop.call_later(self.tick_ms / 1000.0, self._tick)

    def receive(self, message: Body) -> None:
        """A Raft message from the network (on the loop thread). ValueError if malformed."""
        if self._closed:
            return
        self.node.step(message_from_dict(message))
        self._drain()

    def _drain(self) -> None:
        node = self.node
        while node.has_ready():
            rd = node.ready()
            try:
                self.storage.persist(rd)
            except Exception as e:  # fsync/write failed: this voter can promise nothing any more
                self._fail(e)
                raise NotControllerError(f"controller {self.node_id} storage failed: {e}") from e
            for m in rd.messages:
                try:
                    self._send(m.to, m.to_dict())
                except Exception:  # a send failure is a lost message; Raft retries
                    _log.exception("[controller=%d] send to %d failed", self.node_id, m.to)
            if rd.soft_state is not None:
                self._on_soft_state(rd.soft_state.role)
            if rd.snapshot_to_install is not None:
                self._applied = rd.snapshot_to_install.index
                self._committed_offset = self._applied - 1
                _log.info(
                    "[controller=%d] installed snapshot at index %d", self.node_id, self._applied
                )
            installed = rd.snapshot_to_install is not None
            batch = []
            for entry in rd.committed_entries:
                if entry.kind is EntryKind.NORMAL:
                    batch.append((entry.index - 1, entry.data))
                self._applied = entry.index
            node.advance(rd)
            if rd.committed_entries:
                self._committed_offset = self._applied - 1
                if self._proposed:
                    self._observe_commits()
            if batch or installed:
                # an empty batch means "reset to the snapshot": listeners re-read the log
                notify_listeners(self._listeners, batch)
            self._maybe_activate()
        leader = node.leader_id
        if leader is not None and leader != self._known_leader:  # (none known: an election)
            self.leader_changes += 1  # (the first leader this process learns of counts too)
            self._known_leader = leader
        if node.config is not self._membership:
            self._membership = node.config
            for cb in list(self.on_membership):
                cb(node.config)

    def _observe_commits(self) -> None:
        """Proposals committed (they were appended while leading): their append-to-commit
        latency."""
        now = self._clock()
        proposed, applied, observe = self._proposed, self._applied, self.on_commit_latency
        while proposed and proposed[0][0] <= applied:
            _, at = proposed.popleft()
            if observe is not None:
                observe(now - at)

    def _fail(self, exc: BaseException) -> None:
        """Storage failed: stop taking part (as Kafka halts), tell the owner via on_fatal."""
        _log.critical("[controller=%d] raft storage failed, stopping: %s", self.node_id, exc)
        self.failed = exc
        was_active, self._active = self._active, False
        self.close()
        if was_active:
            for cb in list(self.on_deactivate):
                cb()
        if self.on_fatal is not None:
            self.on_fatal(exc)

    def _on_soft_state(self, role: Role) -> None:
        if role is Role.LEADER:
            self._noop_index = self.node.last_index  # the NOOP appended on becoming leader
            _log.info("[controller=%d] became raft leader in term %d", self.node_id, self.node.term)
        else:
            self._noop_index = None
            self._proposed.clear()  # what commits later was not committed by this leader
            if self._active:
                self._active = False
                _log.info(
                    "[controller=%d] no longer the active controller (%s, term %d)",
                    self.node_id,
                    role.value,
                    self.node.term,
                )
                for cb in list(self.on_deactivate):
                    cb()

    def _maybe_activate(self) -> None:
        if (
            not self._active
            and self._noop_index is not None
            and self.node.role is Role.LEADER
            and self._applied >= self._noop_index
        ):
            self._active = True
            _log.info(
                "[controller=%d] active controller in term %d (committed offset %d)",
                self.node_id,
                self.node.term,
                self._committed_offset,
            )
            for cb in list(self.on_activate):
                cb()

    def cluster_id_on_disk(self) -> str | None:
        """The ClusterId record this voter holds (in its snapshot, else the first among its
        log's entries, committed or not), None when it holds none. What a restarting voter
        compares with its own id before it takes part: a voter stores the quorum's id only
        once the record committed, so a stored id always matches its own log's record. Reads
        what `load` left in memory; call before `start`."""
        node = self.node
        if node.snapshot.data:
            cid = load_snapshot(node.snapshot.data).cluster_id
            if cid is not None:
                return cid
        for entry in node.log.entries:
            if entry.kind is not EntryKind.NORMAL:
                continue
            try:
                rec = decode_record(entry.data)
            except CorruptRecordError:
                continue
            if isinstance(rec, ClusterId):
                return rec.cluster_id
        return None

    # -- MetadataLog ---------------------------------------------------------------------------
    def is_leader(self) -> bool:
        return self._active

    def append(self, records: list[bytes]) -> int:
        if not self._active or self._closed:
            raise NotControllerError(
                f"controller {self.node_id} is not active (leader {self.node.leader_id})"
            )
        try:
            index = self.node.propose(list(records))
        except (NotLeader, ProposalDropped) as e:
            raise NotControllerError(str(e)) from e
        if self.on_commit_latency is not None:  # (bounded by max_uncommitted_entries)
            self._proposed.append((index, self._clock()))
        self._drain()
        return index - 1

    def committed_offset(self) -> int:
        return self._committed_offset

    def uncommitted(self) -> tuple[int, int] | None:
        node = self.node
        return node.last_index - node.log.committed, node.max_uncommitted

    def end_offset(self) -> int:
        return self.node.last_index - 1

    def read(self, from_offset: int, max_records: int = 10_000) -> list[tuple[int, bytes]]:
        """Applied records from `from_offset`: `max_records` of them whenever that many follow
        (NOOP entries are skipped without counting), fewer only at the end. An observer
        (RemoteMetadataLog) takes a short answer for "caught up" and moves its position to the
        high watermark, so one cut short by NOOPs would make it skip records."""
        index = max(from_offset, 0) + 1
        out: list[tuple[int, bytes]] = []
        while len(out) < max_records and index <= self._applied:
            try:
                entries = self.node.committed_entries_from(index, max_records - len(out))
            except LogCompacted as e:
                raise OffsetOutOfRangeError(
                    f"offset {from_offset} is compacted into the snapshot at {e.snapshot_index - 1}"
                ) from e
            if not entries:
                break
            out.extend(
                (e.index - 1, e.data)
                for e in entries
                if e.kind is EntryKind.NORMAL and e.index <= self._applied
            )
            index = entries[-1].index + 1
        return out

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    def log_start_offset(self) -> int:
        return self.node.snapshot.index

    def latest_snapshot(self) -> tuple[int, bytes] | None:
        s = self.node.snapshot
        return (s.index - 1, s.data) if s.index > 0 else None

    def write_snapshot(self, offset: int, data: bytes) -> None:
        if self._closed:  # like receive(): a closed log takes no more input
            _log.debug("[controller=%d] snapshot at %d after close ignored", self.node_id, offset)
            return
        self.node.compact(offset + 1, data)
        self._drain()

    def transfer_leadership(self) -> int | None:
        """Controlled shutdown: hand leadership to the most caught-up other voter (TimeoutNow once
        it has the whole log; proposals are refused meanwhile). Returns the target, or None when
        this node does not lead or has no other voter. Loop thread only."""
        if self._closed or self.node.role is not Role.LEADER:
            return None
        others = [r for r in self.node.describe_quorum().voters if r.node_id != self.node_id]
        if not others:
            return None
        target = max(others, key=lambda r: (r.match_index, -r.node_id)).node_id
        try:
            self.node.transfer_leadership(target)
        except (NotLeader, ValueError) as e:
            _log.warning("[controller=%d] leadership transfer refused: %s", self.node_id, e)
            return None
        self._drain()
        return target

    def change_membership(self, op: str, node_id: int, endpoint: str = "") -> bool:
        """One step of a membership change on the leader: `op` "add" (learner, catch-up,
        promotion), "remove" (demote a voter, then drop it as a learner). True once `node_id` is
        a voter ("add") or no member ("remove") in a committed membership; call again (a tick
        later) until then. NotControllerError when this node does not lead; MembershipError
        (a ValueError) for an impossible change. Loop thread only."""
        if self._closed:
            raise NotControllerError(f"controller {self.node_id} is closed")
        node = self.node
        try:
            if op == "add":
                done = node.add_voter(node_id, endpoint)
            elif op == "remove":
                done = node.remove_voter(node_id) and node.remove_learner(node_id)
            else:
                raise ValueError(f"unknown membership operation {op!r}")
        except NotLeader as e:
            raise NotControllerError(
                f"controller {self.node_id} is not the leader (leader {e.leader_id})"
            ) from e
        finally:
            self._drain()
        return done

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        try:
            self.storage.close()
        except OSError as e:
            _log.warning("[controller=%d] closing raft storage: %s", self.node_id, e)
