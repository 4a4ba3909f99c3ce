"""What a leader knows about each follower and observer (after etcd's tracker.Progress).

    PROBE      next is a guess; send one AppendEntries per heartbeat until one is accepted
    REPLICATE  stream entries optimistically, at most `max_inflight` unacknowledged messages
    SNAPSHOT   an InstallSnapshot is outstanding; wait for it (or re-probe after a timeout)

Pure; owned by the RaftNode's thread.
"""

from __future__ import annotations

from collections import deque
from enum import Enum


class ProgressState(Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


class Progress:
    __slots__ = (
        "node_id",
        "is_voter",
        "match",
        "next",
        "state",
        "paused",
        "inflight",
        "max_inflight",
        "pending_snapshot",
        "snapshot_sent_tick",
        "recent_active",
        "last_contact_tick",
    )

    def __init__(self, node_id: int, is_voter: bool, next_index: int, max_inflight: int) -> None:
        self.node_id = node_id
        self.is_voter = is_voter
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.paused = False
        self.inflight: deque[int] = deque()
        self.max_inflight = max_inflight
        self.pending_snapshot = 0
        self.snapshot_sent_tick = 0
        self.recent_active = False
        self.last_contact_tick: int | None = None

    def __repr__(self) -> str:
        return (
            f"Progress({self.node_id} {self.state.value} match={self.match} next={self.next}"
            f" inflight={len(self.inflight)} paused={self.paused})"
        )

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            self.next = max(self.match + 1, self.pending_snapshot + 1)
            self.pending_snapshot = 0
        else:
            self.next = self.match + 1
        self.state = ProgressState.PROBE
        self.paused = False
        self.inflight.clear()

    def become_replicate(self) -> None:
        self.state = ProgressState.REPLICATE
        self.next = self.match + 1
        self.paused = False
        self.inflight.clear()

    def become_snapshot(self, index: int, tick: int) -> None:
        self.state = ProgressState.SNAPSHOT
        self.pending_snapshot = index
        self.snapshot_sent_tick = tick
        self.inflight.clear()

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.paused
        if self.state is ProgressState.REPLICATE:
            return len(self.inflight) >= self.max_inflight
        return True

    def sent_entries(self, last_index: int) -> None:
        """Record an AppendEntries carrying entries up to `last_index` (or none)."""
        if self.state is ProgressState.REPLICATE:
            if last_index >= self.next:
                self.next = last_index + 1
                self.inflight.append(last_index)
        elif self.state is ProgressState.PROBE:
            self.paused = True

    def maybe_update(self, match: int) -> bool:
        """An acknowledgement up to `match`. Returns True if it taught us something new."""
        updated = match > self.match
        if updated:
            self.match = match
            self.paused = False
        self.next = max(self.next, match + 1)
        while self.inflight and self.inflight[0] <= match:
            self.inflight.popleft()
        return updated

    def maybe_decrease(self, rejected: int, hint: int) -> bool:
        """A rejected append at `rejected`. Returns False for a stale rejection."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.become_probe()
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, hint + 1), self.match + 1)
        self.paused = False
        return True
