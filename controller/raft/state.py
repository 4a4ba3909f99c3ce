"""Values the Raft core exchanges with its driver: what to load at start (`StorageState`), what to
do next (`Ready`), and what to report (`SoftState`, `QuorumState`). Pure, immutable data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from controller.raft.messages import Entry, HardState, Message, Snapshot


class Rng(Protocol):
    """The part of `random.Random` the core uses. Pass a seeded instance; the core never imports
    `random` (so a simulation replays exactly)."""

    def random(self) -> float: ...

    def randint(self, a: int, b: int) -> int: ...


class Role(Enum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre_candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"
    OBSERVER = "observer"


@dataclass(frozen=True, slots=True)
class StorageState:
    """What the storage driver recovered from disk: hard state, latest snapshot (index 0 when
    none) and the entries after it, in order."""

    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot = field(default_factory=Snapshot)
    entries: tuple[Entry, ...] = ()


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state worth telling the driver about when it changes (not persisted)."""

    role: Role
    leader_id: int | None
    term: int


@dataclass(frozen=True, slots=True)
class Ready:
    """One batch of work for the driver. Handle it in this order, then call `advance(ready)`:

    1. persist: `snapshot_to_install` or `snapshot_to_persist` (if any), then
       `entries_to_persist` (first drop every stored entry with index >= entries[0].index),
       then `hard_state` (if not None) — and fsync all of it;
    2. send `messages` (only now: votes and acknowledgements depend on step 1);
    3. apply: load `snapshot_to_install` into the state machine (if any), then apply
       `committed_entries` in order (skip `EntryKind.NOOP`);
    4. `advance(ready)`.

    No other call into the node (step, tick, propose, ...) may happen between `ready()` and
    `advance()`; buffer incoming messages (boundedly) until then.
    """

    soft_state: SoftState | None
    hard_state: HardState | None
    snapshot_to_install: Snapshot | None
    """Received from the leader: replaces the whole log and the state machine's state."""
    snapshot_to_persist: Snapshot | None
    """Made locally by `compact()`: store it, then drop stored entries with index <= its index."""
    entries_to_persist: list[Entry]
    messages: list[Message]
    committed_entries: list[Entry]

    def must_sync(self) -> bool:
        return bool(
            self.hard_state
            or self.entries_to_persist
            or self.snapshot_to_install
            or self.snapshot_to_persist
        )


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One replica as seen by the leader (for DescribeQuorum). `last_contact_tick` is the
    leader's tick count at its last response (None: never heard from in this term)."""

    node_id: int
    match_index: int
    last_contact_tick: int | None


@dataclass(frozen=True, slots=True)
class QuorumState:
    """`describe_quorum()`: replica lists are filled only on the leader. `high_watermark` is the
    commit index (offsets are index - 1, so it is the exclusive end of committed offsets)."""

    node_id: int
    role: Role
    leader_id: int | None
    term: int
    commit_index: int
    high_watermark: int
    now_tick: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]
