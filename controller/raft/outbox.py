"""`Outbox`: what a `RaftNode` owes its driver between two `ready()` calls (etcd-io/raft's
rawnode.go): the messages to send, a snapshot to install or to persist, the hard and soft state
last handed over (so a `Ready` carries them only when they changed), and the `Ready` handed out
and not yet `advance`d (no other call is allowed meanwhile).

Pure: no I/O. Called only from the thread that owns the node.
"""

from __future__ import annotations

from controller.raft.log import RaftLog
from controller.raft.messages import HardState, Message, Snapshot
from controller.raft.state import Ready, SoftState


class Outbox:
    def __init__(self, prefix: str, hard: HardState, soft: SoftState) -> None:
        self.prefix = prefix
        self.messages: list[Message] = []
        self.install: Snapshot | None = None  # received from the leader: the driver installs it
        self.compact: Snapshot | None = None  # taken by the state machine: the driver keeps it
        self._prev_hard = hard
        self._prev_soft = soft
        self._outstanding: Ready | None = None

    def send(self, m: Message) -> None:
        self.messages.append(m)

    def check_idle(self) -> None:
        if self._outstanding is not None:
            raise RuntimeError(f"{self.prefix} call between ready() and advance()")

    def has_ready(self, log: RaftLog, hard: HardState, soft: SoftState) -> bool:
        return bool(
            self.messages
            or log.stable_index < log.last_index
            or log.committed > log.applied
            or self.install is not None
            or self.compact is not None
            or hard != self._prev_hard
            or soft != self._prev_soft
        )

    def ready(self, log: RaftLog, hard: HardState, soft: SoftState, max_committed: int) -> Ready:
        self.check_idle()
        rd = Ready(
            soft_state=soft if soft != self._prev_soft else None,
            hard_state=hard if hard != self._prev_hard else None,
            snapshot_to_install=self.install,
            snapshot_to_persist=self.compact,
            entries_to_persist=log.unstable_entries(),
            messages=self.messages,
            committed_entries=log.next_committed(max_committed),
        )
        self.messages = []
        self._outstanding = rd
        return rd

    def advance(self, rd: Ready, log: RaftLog) -> None:
        if rd is not self._outstanding:
            raise RuntimeError(f"{self.prefix} advance() of a Ready that is not outstanding")
        self._outstanding = None
        if rd.entries_to_persist:
            log.stable_index = rd.entries_to_persist[-1].index
        if rd.hard_state is not None:
            self._prev_hard = rd.hard_state
        if rd.soft_state is not None:
            self._prev_soft = rd.soft_state
        if rd.committed_entries:
            log.applied = rd.committed_entries[-1].index
        self.install = None
        self.compact = None
