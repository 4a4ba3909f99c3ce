"""Leader election and ISR changes as pure functions of a MetadataImage.

Each returns the PartitionChange records to write; the QuorumController writes them. Leaders
come from the ISR only (in replica order, so the preferred replica wins), unless unclean leader
election is enabled for the topic, in which case any live replica may lead with ISR = [it].
When the last ISR member is fenced it stays in the ISR (it holds the committed data) and the
partition goes offline (leader -1) until it or, uncleanly, another replica returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from client.errors import ErrorCode
from client.protocol.body import Body
from controller.metadata.image import MetadataImage, PartitionRegistration
from controller.metadata.records import NO_LEADER, PartitionChange


def choose_leader(
    reg: PartitionRegistration, isr: tuple[int, ...], live: set[int], unclean: bool
) -> tuple[int, tuple[int, ...]]:
    """(leader, isr) for a partition that needs a leader chosen among `live` brokers."""
    for r in reg.replicas:
        if r in isr and r in live:
            return r, isr
    if unclean:
        for r in reg.replicas:
            if r in live:
                return r, (r,)
    return NO_LEADER, isr


def _change(
    topic_id: bytes, p: int, reg: PartitionRegistration, leader: int, isr: tuple[int, ...]
) -> PartitionChange | None:
    if leader == reg.leader and isr == reg.isr:
        return None
    return PartitionChange(
        topic_id,
        p,
        leader=None if leader == reg.leader else leader,
        isr=None if isr == reg.isr else isr,
    )


def remove_broker_changes(
    image: MetadataImage, broker_id: int, live: set[int], unclean_for: Callable[[str], bool]
) -> list[PartitionChange]:
    """Take `broker_id` out of every ISR and leadership (fencing, controlled shutdown).

    `live` are the brokers that may lead afterwards (without broker_id).
    """
    out: list[PartitionChange] = []
    for t in image.topics.values():
        for p, reg in t.partitions.items():
            ch = _remove_from(t.topic_id, p, reg, broker_id, live, unclean_for(t.name))
            if ch is not None:
                out.append(ch)
    return out


def _remove_from(
    topic_id: bytes,
    p: int,
    reg: PartitionRegistration,
    broker_id: int,
    live: set[int],
    unclean: bool,
) -> PartitionChange | None:
    if broker_id not in reg.isr and reg.leader != broker_id:
        return None
    isr = tuple(b for b in reg.isr if b != broker_id) or reg.isr
    leader = reg.leader
    if leader in (broker_id, NO_LEADER):
        leader, isr = choose_leader(reg, isr, live - {broker_id}, unclean)
    return _change(topic_id, p, reg, leader, isr)


def failed_replica_changes(
    image: MetadataImage,
    broker_id: int,
    failed: Iterable[tuple[str, int]],
    healed: Iterable[tuple[str, int]],
    live_for: Callable[[tuple[str, int]], set[int]],
    unclean_for: Callable[[str], bool],
) -> list[PartitionChange]:
    """A broker reported replicas it could not create or open (`failed`): take it out of
    their ISR and leadership, as if fenced for those partitions only (the last ISR member
    stays in the ISR, leaderless). `healed` are replicas it reported before and serves now:
    a leaderless one of them gets a leader again. `live_for(tp)`: who may lead tp (the live
    brokers not reporting it failed). Touches only the partitions named, whatever the size
    of the cluster."""
    out: list[PartitionChange] = []
    for tp in failed:
        t = image.topics.get(tp[0])
        reg = None if t is None else t.partitions.get(tp[1])
        if t is None or reg is None:
            continue
        ch = _remove_from(t.topic_id, tp[1], reg, broker_id, live_for(tp), unclean_for(t.name))
        if ch is not None:
            out.append(ch)
    for tp in healed:
        t = image.topics.get(tp[0])
        reg = None if t is None else t.partitions.get(tp[1])
        if t is None or reg is None or reg.leader != NO_LEADER:
            continue
        leader, isr = choose_leader(reg, reg.isr, live_for(tp), unclean_for(t.name))
        ch = _change(t.topic_id, tp[1], reg, leader, isr)
        if ch is not None:
            out.append(ch)
    return out


def elect_offline_changes(
    image: MetadataImage,
    live: set[int],
    unclean_for: Callable[[str], bool],
    only_topics: Iterable[str] | None = None,
) -> list[PartitionChange]:
    """Elect leaders for offline partitions (leader -1) now that `live` brokers can lead."""
    names = image.topics.keys() if only_topics is None else only_topics
    out: list[PartitionChange] = []
    for name in names:
        t = image.topics.get(name)
        if t is None:
            continue
        for p, reg in t.partitions.items():
            if reg.leader != NO_LEADER:
                continue
            leader, isr = choose_leader(reg, reg.isr, live, unclean_for(t.name))
            ch = _change(t.topic_id, p, reg, leader, isr)
            if ch is not None:
                out.append(ch)
    return out


def preferred_leader_changes(
    image: MetadataImage, live: set[int], only: set[tuple[str, int]] | None = None
) -> list[PartitionChange]:
    """Move leadership back to the preferred (first) replica where it is live and in the ISR."""
    out: list[PartitionChange] = []
    for t in image.topics.values():
        for p, reg in t.partitions.items():
            if only is not None and (t.name, p) not in only:
                continue
            preferred = reg.replicas[0]
            if reg.leader != preferred and preferred in live and preferred in reg.isr:
                out.append(PartitionChange(t.topic_id, p, leader=preferred))
    return out


def imbalanced_partitions(image: MetadataImage, percentage: int) -> list[tuple[str, int]]:
    """Kafka's auto-rebalance trigger: for each broker, the share of the partitions it is the
    preferred (first) replica of but does not lead; where that share is above `percentage` %,
    those partitions (to be given a preferred-leader election)."""
    preferred_of: dict[int, list[tuple[str, int, bool]]] = {}
    for t in image.topics.values():
        for p, reg in t.partitions.items():
            if reg.replicas:
                preferred_of.setdefault(reg.replicas[0], []).append(
                    (t.name, p, reg.leader == reg.replicas[0])
                )
    out: list[tuple[str, int]] = []
    for parts in preferred_of.values():
        not_led = [(name, p) for name, p, led in parts if not led]
        if not_led and len(not_led) * 100 > percentage * len(parts):
            out.extend(not_led)
    return sorted(out)


def unclean_leader_changes(
    image: MetadataImage, live: set[int], only: set[tuple[str, int]] | None = None
) -> list[PartitionChange]:
    """ElectLeaders (unclean): an offline partition (no leader, no live ISR member) gets its
    first live replica as leader with ISR = [it], whatever the topic's
    unclean.leader.election.enable says (the operator asked for it)."""
    out: list[PartitionChange] = []
    for t in image.topics.values():
        for p, reg in t.partitions.items():
            if reg.leader != NO_LEADER or (only is not None and (t.name, p) not in only):
                continue
            leader, isr = choose_leader(reg, reg.isr, live, True)
            ch = _change(t.topic_id, p, reg, leader, isr)
            if ch is not None:
                out.append(ch)
    return out


def check_isr_change(
    reg: PartitionRegistration, broker_id: int, request: Body, eligible: set[int]
) -> tuple[int, tuple[int, ...] | None]:
    """Validate one AlterPartition partition request from `broker_id` against the current
    registration: (error code, new ISR when it differs from the current one, else None).
    Codes as Kafka: NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH (leader epoch differs),
    INVALID_UPDATE_VERSION (partition epoch differs), INVALID_REQUEST (ISR without the leader,
    duplicates, non-replicas), INELIGIBLE_REPLICA (KIP-841: a newly added broker that is not in
    `eligible`: fenced, being fenced, or in a controlled shutdown. A broker shutting down still
    fetches until it stops; taken back into the ISR then, it held every acks=all write of the
    partition until replica.lag.time.max.ms dropped it again)."""
    new_isr = tuple(request.get("new_isr", ()))
    if reg.leader != broker_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
    if request.get("leader_epoch") != reg.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH, None
    if request.get("partition_epoch") != reg.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION, None
    if (
        broker_id not in new_isr
        or len(set(new_isr)) != len(new_isr)
        or any(r not in reg.replicas for r in new_isr)
    ):
        return ErrorCode.INVALID_REQUEST, None
    if any(r not in eligible and r not in reg.isr for r in new_isr):
        return ErrorCode.INELIGIBLE_REPLICA, None
    return ErrorCode.NONE, (new_isr if new_isr != reg.isr else None)
