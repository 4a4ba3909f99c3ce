"""Partition reassignment (KIP-455) as pure functions of a PartitionRegistration.

A reassignment in flight is part of the partition's registration in the metadata log:

    replicas          = target + removing   (the union: every replica fetches meanwhile)
    adding_replicas   = target - original
    removing_replicas = original - target

so it survives controller failover and broker restarts. It starts with the union (the adding
replicas become followers, catch up and join the ISR through the leader's ordinary
AlterPartition expansion), and completes in one PartitionChange once every target replica is
in the ISR: replicas = target, ISR = ISR ∩ target, adding/removing cleared, and a new leader
from the target's in-sync live replicas when the leader is being removed. The removed replicas
then see themselves out of the replicas, stop and delete their logs. Cancelling (a null target)
reverts to the original replicas. These are Kafka's PartitionReassignmentReplicas,
PartitionReassignmentRevert and PartitionChangeBuilder.completeReassignmentIfNeeded rules.

Each function returns the PartitionChange to write (None: nothing changes). Pure: no I/O;
the ReassignmentControlManager (reassignment_control.py) writes what they return.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.metadata.image import PartitionRegistration
from controller.metadata.records import NO_LEADER, PartitionChange


class ReassignmentRefused(ValueError):
    """The reassignment (or its cancellation) would leave the partition without an in-sync
    replica to lead it; the message says why."""


@dataclass(frozen=True)
class Assignment:
    """What a partition's registration will hold (the fields a PartitionChange can set)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def _elect(replicas: tuple[int, ...], isr: tuple[int, ...], live: set[int]) -> int:
    """The first of `replicas` that is in `isr` and live; NO_LEADER when none is."""
    for r in replicas:
        if r in isr and r in live:
            return r
    return NO_LEADER


def _with_leader(a: Assignment, current_leader: int, live: set[int]) -> Assignment | None:
    """`a` with a leader that is one of its replicas and in its ISR: the current one when it
    still is, else an elected one; None when it needs one and none is eligible."""
    if current_leader in a.replicas and current_leader in a.isr:
        return Assignment(a.replicas, a.isr, current_leader, a.adding, a.removing)
    if current_leader == NO_LEADER:  # offline: the ordinary election brings it back
        return Assignment(a.replicas, a.isr, NO_LEADER, a.adding, a.removing)
    leader = _elect(a.replicas, a.isr, live)
    if leader == NO_LEADER:
        return None
    return Assignment(a.replicas, a.isr, leader, a.adding, a.removing)


def maybe_complete(a: Assignment, current_leader: int, live: set[int]) -> Assignment:
    """`a` completed when every target replica is in its ISR (and, when the leader is being
    removed, a target replica can lead); else `a` unchanged."""
    if not a.adding and not a.removing:
        return a
    target = tuple(r for r in a.replicas if r not in a.removing)
    isr = tuple(r for r in a.isr if r not in a.removing)
    if not isr or any(r not in isr for r in target):
        return a
    done = _with_leader(Assignment(target, isr, current_leader, (), ()), current_leader, live)
    return a if done is None else done


def _change(
    topic_id: bytes, p: int, reg: PartitionRegistration, a: Assignment
) -> PartitionChange | None:
    ch = PartitionChange(
        topic_id,
        p,
        leader=None if a.leader == reg.leader else a.leader,
        isr=None if a.isr == reg.isr else a.isr,
        replicas=None if a.replicas == reg.replicas else a.replicas,
        adding_replicas=None if a.adding == reg.adding_replicas else a.adding,
        removing_replicas=None if a.removing == reg.removing_replicas else a.removing,
    )
    if ch == PartitionChange(topic_id, p):
        return None
    return ch


def _current(reg: PartitionRegistration, isr: tuple[int, ...] | None = None) -> Assignment:
    return Assignment(
        reg.replicas,
        reg.isr if isr is None else isr,
        reg.leader,
        reg.adding_replicas,
        reg.removing_replicas,
    )


def start(
    topic_id: bytes,
    p: int,
    reg: PartitionRegistration,
    target: tuple[int, ...],
    live: set[int],
) -> PartitionChange | None:
    """Reassign to `target` (replacing any reassignment in flight: the replicas it was adding
    that the new target leaves out are removed). Completes at once when every target replica
    is in the ISR already (a reorder, or a shrink of the replication factor)."""
    current = reg.replicas
    removing = tuple(r for r in current if r not in target)
    adding = tuple(r for r in target if r not in current)
    a = Assignment(tuple(target) + removing, reg.isr, reg.leader, adding, removing)
    if not adding and not removing:
        # a reorder: the replicas change order, nothing moves
        a = Assignment(tuple(target), reg.isr, reg.leader, (), ())
    else:
        a = maybe_complete(a, reg.leader, live)
    return _change(topic_id, p, reg, a)


def cancel(
    topic_id: bytes, p: int, reg: PartitionRegistration, live: set[int]
) -> PartitionChange | None:
    """Revert the reassignment in flight to the original replicas: the adding replicas leave
    the replicas and the ISR (they stop and delete their logs), the leader moves back to an
    original replica when an adding one leads. ReassignmentRefused when no original replica
    is in the ISR (cancelling would lose what only the new replicas hold)."""
    original = reg.original_replicas
    isr = tuple(r for r in reg.isr if r in original)
    if not isr:
        raise ReassignmentRefused(
            f"no original replica of {list(original)} is in the ISR {list(reg.isr)}: cancelling"
            " would leave the partition without its data; reassign it instead"
        )
    a = _with_leader(Assignment(original, isr, reg.leader, (), ()), reg.leader, live)
    if a is None:
        raise ReassignmentRefused(
            f"no original replica of {list(original)} in the ISR {list(isr)} is live to lead"
        )
    return _change(topic_id, p, reg, a)


def isr_change(
    topic_id: bytes,
    p: int,
    reg: PartitionRegistration,
    new_isr: tuple[int, ...],
    live: set[int],
) -> PartitionChange | None:
    """The change for an ISR change the leader asked for (AlterPartition): the new ISR, and
    the reassignment completed with it when it brings the last target replica in."""
    return _change(topic_id, p, reg, maybe_complete(_current(reg, new_isr), reg.leader, live))


def completion(
    topic_id: bytes, p: int, reg: PartitionRegistration, live: set[int]
) -> PartitionChange | None:
    """The change completing the reassignment in flight when it can complete now (the
    controller's periodic check: after a failover, or once a target replica can lead)."""
    if not reg.reassigning:
        return None
    return _change(topic_id, p, reg, maybe_complete(_current(reg), reg.leader, live))
