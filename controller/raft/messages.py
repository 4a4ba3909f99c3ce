"""Raft data types: log entries, snapshots, hard state and the messages nodes exchange.

Pure data: frozen dataclasses with `to_dict()` / `from_dict()` so a transport can carry them as
msgpack maps (bytes stay bytes, tuples become lists). Any thread may use them; they are immutable.

Message vocabulary (after etcd's raftpb, with Raft-paper names):

| message            | sender            | meaning                                                |
|--------------------|-------------------|--------------------------------------------------------|
| VoteRequest        | (pre-)candidate   | RequestVote; `pre_vote` asks "would you?" without a term bump |
| VoteResponse       | voter             | granted or not; for a pre-vote the term is the one asked about |
| AppendEntries      | leader            | entries after (prev_index, prev_term) and the leader's commit |
| AppendResponse     | follower/observer | success: log matches up to `match_index`; reject: `hint_index` |
| Heartbeat          | leader            | liveness + commit (clipped to what the follower is known to hold) |
| HeartbeatResponse  | follower/observer | liveness for CheckQuorum; prompts the leader to resume sending |
| InstallSnapshot    | leader            | the whole snapshot (state at `snapshot.index`)          |
| TimeoutNow         | leader            | leadership transfer: campaign now, skipping pre-vote    |

Indexes are 1-based Raft log indexes; index 0 / term 0 is the empty log. A Kafka-style offset of
an entry is `index - 1`, so a high watermark equals the commit index.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any, ClassVar


def _int(v: Any) -> int:
    if type(v) is not int or v < -(1 << 63) or v >= 1 << 64:
        raise TypeError(f"expected an integer, got {v!r:.50}")
    return v


def _bytes(v: Any) -> bytes:
    if not isinstance(v, bytes | bytearray | memoryview):
        raise TypeError(f"expected bytes, got {type(v).__name__}")
    return bytes(v)


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise TypeError(f"expected a bool, got {v!r:.50}")
    return v


class EntryKind(IntEnum):
    NORMAL = 0
    """Client data, handed to the state machine."""
    NOOP = 1
    """Appended by a new leader so entries of its term can commit; the state machine skips it."""
    CONFIG = 2
    """A membership (controller/raft/membership.py): in force once appended; the state machine
    skips it."""


@dataclass(frozen=True, slots=True)
class Entry:
    index: int
    term: int
    data: bytes = b""
    kind: EntryKind = EntryKind.NORMAL

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "term": self.term, "data": self.data, "kind": int(self.kind)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Entry:
        return cls(_int(d["index"]), _int(d["term"]), _bytes(d["data"]), EntryKind(_int(d["kind"])))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """State-machine state after applying every entry up to and including `index`; `config` is
    the membership in force at `index` (`Membership.encode()`; empty: the bootstrap voters)."""

    index: int = 0
    term: int = 0
    data: bytes = b""
    config: bytes = b""

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "term": self.term, "data": self.data, "config": self.config}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Snapshot:
        return cls(
            _int(d["index"]), _int(d["term"]), _bytes(d["data"]), _bytes(d.get("config", b""))
        )


@dataclass(frozen=True, slots=True)
class HardState:
    """What must survive a crash besides the log: current term, vote in it, commit index.
    (The commit index is persisted as an optimisation; Raft is safe if it is lost.)"""

    term: int = 0
    vote: int | None = None
    commit: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"term": self.term, "vote": self.vote, "commit": self.commit}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HardState:
        vote = d.get("vote")
        return cls(_int(d["term"]), None if vote is None else _int(vote), _int(d.get("commit", 0)))


@dataclass(frozen=True, slots=True)
class Message:
    """Base of every message: destination, source, sender's term."""

    to: int
    from_: int
    term: int

    TYPE: ClassVar[str] = "message"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.TYPE, "to": self.to, "from": self.from_}
        for f in fields(self):
            name = f.name
            if name in ("to", "from_"):
                continue
            value = getattr(self, name)
            if name == "entries":
                value = [e.to_dict() for e in value]
            elif name == "snapshot":
                value = value.to_dict()
            d[name] = value
        return d


@dataclass(frozen=True, slots=True)
class VoteRequest(Message):
    last_log_index: int = 0
    last_log_term: int = 0
    pre_vote: bool = False
    transfer: bool = False
    """Set for a campaign started by TimeoutNow: voters grant it even inside a leader lease."""

    TYPE: ClassVar[str] = "vote"


@dataclass(frozen=True, slots=True)
class VoteResponse(Message):
    granted: bool = False
    pre_vote: bool = False

    TYPE: ClassVar[str] = "vote_response"


@dataclass(frozen=True, slots=True)
class AppendEntries(Message):
    prev_index: int = 0
    prev_term: int = 0
    entries: tuple[Entry, ...] = field(default_factory=tuple)
    commit: int = 0

    TYPE: ClassVar[str] = "append"


@dataclass(frozen=True, slots=True)
class AppendResponse(Message):
    success: bool = True
    match_index: int = 0
    """On success: the follower's log equals the leader's up to here."""
    rejected_index: int = 0
    """On reject: the `prev_index` that did not match."""
    hint_index: int = 0
    """On reject: the leader should retry from `hint_index + 1` (or lower)."""

    TYPE: ClassVar[str] = "append_response"


@dataclass(frozen=True, slots=True)
class Heartbeat(Message):
    commit: int = 0

    TYPE: ClassVar[str] = "heartbeat"


@dataclass(frozen=True, slots=True)
class HeartbeatResponse(Message):
    TYPE: ClassVar[str] = "heartbeat_response"


@dataclass(frozen=True, slots=True)
class InstallSnapshot(Message):
    snapshot: Snapshot = field(default_factory=Snapshot)

    TYPE: ClassVar[str] = "snapshot"


@dataclass(frozen=True, slots=True)
class TimeoutNow(Message):
    TYPE: ClassVar[str] = "timeout_now"


MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.TYPE: cls
    for cls in (
        VoteRequest,
        VoteResponse,
        AppendEntries,
        AppendResponse,
        Heartbeat,
        HeartbeatResponse,
        InstallSnapshot,
        TimeoutNow,
    )
}


def message_from_dict(d: dict[str, Any]) -> Message:
    """Inverse of `Message.to_dict()`. Raises ValueError on an unknown type, a missing field or a
    value of the wrong type (a transport may hand it anything)."""
    try:
        cls = MESSAGE_TYPES[d["type"]]
        kwargs: dict[str, Any] = {"to": _int(d["to"]), "from_": _int(d["from"])}
        for f in fields(cls):
            name = f.name
            if name in ("to", "from_") or name not in d:
                continue
            value = d[name]
            if name == "entries":
                if not isinstance(value, list | tuple):
                    raise TypeError("entries must be a list")
                value = tuple(Entry.from_dict(e) for e in value)
            elif name == "snapshot":
                value = Snapshot.from_dict(value)
            elif f.type == "bool":
                value = _bool(value)
            else:
                value = _int(value)
            kwargs[name] = value
        if "term" not in kwargs:
            raise KeyError("term")
        return cls(**kwargs)
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"malformed raft message {d!r:.200}: {e!r}") from e
