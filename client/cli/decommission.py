"""`gregor broker decommission N` and `gregor broker recommission N`.

Decommission moves every replica off broker N with partition reassignments (KIP-455), each
replica to another live broker (a rack the partition does not use yet first, then the least
loaded: reassign_plan.generate with balance=False), and shows progress until N holds nothing
and no partition is under-replicated: then N can be stopped. It re-plans every round, so a
partition created on N meanwhile is moved too. Progress, on stderr once a second when it is a
terminal (a line per 10 s otherwise):

    decommission 4: 12 of 30 partitions left, 1.2 GB left, 85.0 MB/s, ETA 14s

(bytes: per partition left, its size on N less what its new replica holds already, from
DescribeLogDirs; the rate is how fast that falls). A move of
its own that is gone while its partition is still on N for CANCEL_GRACE_S (`recommission`
cancelled it) stops it with status 1.

Recommission cancels the moves off N still in flight (their partitions return to their
replicas, N included); moves already completed stay where they went.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from client.cli.common import CommandError, client_config, reports_errors
from client.cli.move_progress import MoveProgress, bytes_left, replica_sizes
from client.cli.reassign_plan import Assignment, PlanError, generate

if TYPE_CHECKING:
    from client import Admin

# how long a move of ours may look gone while its partition is still on the broker before it
# counts as cancelled (a broker's metadata trails the controller's by far less)
CANCEL_GRACE_S = 3.0


def _admin(args: argparse.Namespace, **extra: Any) -> Admin:
    from client import Admin

    return Admin(client_config(args, **extra))


class _Round:
    """One look at the cluster: each partition's replicas (a move's target when in flight),
    the moves in flight, and what is left to copy."""

    def __init__(self, admin: Admin, broker: int) -> None:
        self.broker = broker
        self.replicas: Assignment = {}
        self.under_replicated: list[str] = []
        for name in admin.list_topics():
            for p in admin.describe_topic(name).partitions:
                tp = (name, p.partition)
                self.replicas[tp] = list(p.replicas)
                if len(p.isr) < len(p.replicas):
                    self.under_replicated.append(f"{name}-{p.partition}")
        self.moving = {
            (tp.topic, tp.partition): m for tp, m in admin.list_partition_reassignments().items()
        }
        for tp, m in self.moving.items():
            self.replicas[tp] = m.target_replicas
        self.off_n = {tp for tp, m in self.moving.items() if broker in m.removing_replicas}
        self.on_n = {tp for tp, rs in self.replicas.items() if broker in rs}
        self.left = self.on_n | self.off_n
        self.sizes: dict[int, dict[tuple[str, int], int]] = {}

    def bytes_left(self, sizes_admin: Admin) -> int:
        """What the new replicas have left to copy: per partition left, its size on the broker
        (else the largest replica seen) less what its least advanced added replica holds."""
        self.sizes = replica_sizes(sizes_admin)
        return bytes_left(self.sizes, self.left, self.moving, self.broker)

    def done(self) -> bool:
        return not self.left and not self.moving and not self.under_replicated


@reports_errors
def run_decommission(args: argparse.Namespace) -> int:
    from client import TopicPartition
    from client.cli.partitions import THROTTLE_KEY, set_throttle

    n = args.broker_id
    if args.throttle is not None and args.throttle <= 0:
        raise CommandError(f"--throttle {args.throttle}: expected a positive number of bytes/s")
    deadline = time.monotonic() + args.timeout
    progress = MoveProgress()
    planned: set[tuple[str, int]] = set()
    started = time.monotonic()
    # sizes are asked of every broker each round: one that does not answer (paused, cut off)
    # must not hold the loop for the default request timeout
    with _admin(args) as admin, _admin(args, **{"request.timeout.ms": 3000}) as sizes_admin:
        brokers = {b.node_id: b for b in admin.describe_cluster(include_fenced=True).brokers}
        if n not in brokers:
            raise CommandError(f"broker {n} is not registered (registered: {sorted(brokers)})")
        if args.throttle is not None:
            set_throttle(admin, args.throttle)
            print(
                f"Throttle: {args.throttle:,} bytes/s per broker adding replicas ({THROTTLE_KEY})"
            )
        suspect_since: dict[tuple[str, int], float] = {}
        while True:
            rnd = _Round(admin, n)
            # A move of ours no longer in flight while the partition is still on N: cancelled,
            # or completed with the broker answering describe_topic not there yet (its
            # metadata trails the controller's list by a moment). Cancelled once it lasts.
            now = time.monotonic()
            suspects = {tp for tp in planned if tp in rnd.on_n and tp not in rnd.moving}
            suspect_since = {tp: suspect_since.get(tp, now) for tp in suspects}
            cancelled = sorted(tp for tp, t in suspect_since.items() if now - t >= CANCEL_GRACE_S)
            if cancelled:
                names = ", ".join(f"{t}-{p}" for t, p in cancelled[:10])
                raise CommandError(
                    f"the moves of {names} off broker {n} were cancelled (recommission?): stopping"
                )
            todo = {
                tp: rs for tp, rs in rnd.replicas.items() if tp in rnd.on_n and tp not in planned
            }
            if todo:
                desc = admin.describe_cluster().brokers  # unfenced ones only
                targets = sorted(b.node_id for b in desc if b.node_id != n)
                racks = {b.node_id: b.rack for b in desc}
                try:
                    plan = generate(todo, targets, racks, balance=False)
                except PlanError as e:
                    raise CommandError(
                        f"cannot move every replica off broker {n}: {e} (live brokers other"
                        f" than {n}: {targets})"
                    ) from e
                results = admin.alter_partition_reassignments(
                    {TopicPartition(*tp): rs for tp, rs in plan.items()}
                )
                errors = sorted((tp, err) for tp, err in results.items() if err is not None)
                if errors:
                    tp, err = errors[0]
                    raise CommandError(f"moving {tp.topic}-{tp.partition} off broker {n}: {err}")
                planned.update(plan)
                print(f"moving {len(plan)} partitions off broker {n}", flush=True)
                continue
            now = time.monotonic()
            left = rnd.bytes_left(sizes_admin)
            line = progress.line(
                f"decommission {n}", len(rnd.left), len(planned) or len(rnd.left), left
            )
            if rnd.done():
                progress.clear()
                if args.throttle is not None:
                    set_throttle(admin, None)
                print(
                    f"Broker {n} holds no replica and no partition is under-replicated"
                    f" ({len(planned)} partitions moved in {now - started:.0f}s): it can be"
                    " stopped.",
                    flush=True,
                )
                return 0
            if not rnd.left and rnd.under_replicated:
                line += f"; waiting for under-replicated {' '.join(rnd.under_replicated[:5])}"
            progress.show(line)
            if now >= deadline:
                raise CommandError(f"gave up after {args.timeout:.0f}s: {line}")
            time.sleep(1.0)  # a human-facing refresh interval


@reports_errors
def run_recommission(args: argparse.Namespace) -> int:
    from client import TopicPartition

    n = args.broker_id
    with _admin(args) as admin:
        moving = admin.list_partition_reassignments()
        off_n = [tp for tp, m in moving.items() if n in m.removing_replicas]
        results = admin.alter_partition_reassignments({TopicPartition(*tp): None for tp in off_n})
    failed = {tp: e for tp, e in results.items() if e is not None}
    for tp, e in sorted(failed.items()):
        print(f"error: {tp.topic}-{tp.partition}: {type(e).__name__}: {e}", file=sys.stderr)
    print(f"Cancelled {len(off_n) - len(failed)} moves off broker {n}.")
    return 1 if failed else 0
