"""`gregor cluster rebalance [--dry-run] [--throttle BYTES/S]`: replicas and leaders spread
evenly over the live brokers, rack-aware (the plan: client/cli/rebalance_plan.py).

It prints the plan (replicas and preferred leaders per broker, before and after, and each
partition that changes); with --dry-run that is all. Otherwise it starts the moves and
reorders as partition reassignments (KIP-455: the data is copied by the adding replicas, the
ISR never drops below what it was), shows their progress as `gregor broker decommission`
does, and once they are complete runs a preferred leader election (ElectLeaders) for the
partitions whose leader is not their first replica, until each is led by it. Every partition
and every live broker takes part, internal topics included. It refuses while a reassignment
is in flight or a replica is on a broker that is not live (the plan would not be the one
shown).
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from client.cli.common import CommandError, add_bootstrap, client_config, reports_errors
from client.cli.move_progress import MoveProgress, bytes_left, replica_sizes
from client.cli.reassign_plan import Assignment, PlanError
from client.cli.rebalance_plan import RebalancePlan, plan

if TYPE_CHECKING:
    from client import Admin

# how long a complete move may take to show in the describe answers of the brokers (their
# metadata trails the controller's by far less) before the leader election starts
SETTLE_S = 30.0


def add_parser(sub: Any) -> None:
    r = sub.add_parser(
        "rebalance",
        help="spread replicas and leaders evenly over the live brokers (rack-aware), with progress",
    )
    r.add_argument("--dry-run", action="store_true", help="print the plan; move nothing")
    r.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES/S",
        help="bound the copying of every broker adding replicas to this many bytes per second"
        " (follower.replication.throttled.rate, cluster-wide; removed at the end)",
    )
    r.add_argument(
        "--timeout",
        type=float,
        default=24 * 3600.0,
        metavar="S",
        help="give up (the moves in flight go on) after this many seconds (default 86400)",
    )
    add_bootstrap(r)
    r.set_defaults(func=run_rebalance)


def _admin(args: argparse.Namespace, **extra: Any) -> Admin:
    from client import Admin

    return Admin(client_config(args, **extra))


def _placement(admin: Admin) -> tuple[Assignment, dict[tuple[str, int], int]]:
    """Every partition's replicas and leader."""
    replicas: Assignment = {}
    leaders: dict[tuple[str, int], int] = {}
    for name in admin.list_topics():
        for p in admin.describe_topic(name).partitions:
            replicas[(name, p.partition)] = list(p.replicas)
            leaders[(name, p.partition)] = p.leader
    return replicas, leaders


def _show(pl: RebalancePlan, racks: dict[int, str | None]) -> None:
    print(f"{'broker':>6}  {'rack':<10}  {'replicas':>14}  {'preferred leaders':>17}")
    for b in sorted(racks):
        replicas = f"{pl.replicas_before[b]} -> {pl.replicas_after[b]}"
        leaders = f"{pl.leaders_before[b]} -> {pl.leaders_after[b]}"
        print(f"{b:>6}  {racks[b] or '-':<10}  {replicas:>14}  {leaders:>17}")
    for (t, p), rs in sorted(pl.moves.items()):
        print(f"move    {t}-{p}: -> {rs}")
    for (t, p), rs in sorted(pl.reorders.items()):
        print(f"reorder {t}-{p}: -> {rs}")
    print(
        f"{len(pl.moves)} partitions move ({pl.replicas_moved} replicas copied),"
        f" {len(pl.reorders)} change their preferred leader only"
    )


@reports_errors
def run_rebalance(args: argparse.Namespace) -> int:
    from client import TopicPartition
    from client.cli.partitions import THROTTLE_KEY, set_throttle

    if args.throttle is not None and args.throttle <= 0:
        raise CommandError(f"--throttle {args.throttle}: expected a positive number of bytes/s")
    if args.throttle is not None and args.dry_run:
        raise CommandError("--throttle goes with a rebalance that moves, not --dry-run")
    deadline = time.monotonic() + args.timeout
    started = time.monotonic()
    with _admin(args) as admin, _admin(args, **{"request.timeout.ms": 3000}) as sizes_admin:
        moving = admin.list_partition_reassignments()
        if moving:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(moving)[:10])
            raise CommandError(
                f"{len(moving)} reassignments are in flight ({names}): wait for them"
                " (gregor partitions reassign --verify --wait) or cancel them first"
            )
        racks = {b.node_id: b.rack for b in admin.describe_cluster().brokers}
        current, _ = _placement(admin)
        try:
            pl = plan(current, racks)
        except PlanError as e:
            raise CommandError(str(e)) from e
        _show(pl, racks)
        if args.dry_run:
            return 0
        if not pl.assignment:
            print("The cluster is balanced: nothing to move.")
            return _elect(admin, current, deadline)
        if args.throttle is not None:
            set_throttle(admin, args.throttle)
            print(
                f"Throttle: {args.throttle:,} bytes/s per broker adding replicas ({THROTTLE_KEY})"
            )
        results = admin.alter_partition_reassignments(
            {TopicPartition(*tp): rs for tp, rs in pl.assignment.items()}
        )
        errors = sorted((tp, err) for tp, err in results.items() if err is not None)
        if errors:
            tp, err = errors[0]
            raise CommandError(
                f"reassigning {tp.topic}-{tp.partition}: {err} ({len(errors)} refused;"
                " the others were started)"
            )
        print(f"started {len(pl.moves)} moves and {len(pl.reorders)} reorders", flush=True)
        _wait_moves(admin, sizes_admin, pl, deadline)
        if args.throttle is not None:
            set_throttle(admin, None)
        code = _elect(admin, {**current, **pl.assignment}, deadline)
        if code == 0:
            print(f"Rebalanced in {time.monotonic() - started:.0f}s.")
        return code


def _wait_moves(admin: Admin, sizes_admin: Admin, pl: RebalancePlan, deadline: float) -> None:
    """Show the progress of the plan's moves until every one is complete: no longer in
    flight, and its partition on its target replicas, all in sync."""
    progress = MoveProgress()
    target = pl.assignment
    while True:
        moving = {
            (tp.topic, tp.partition): m for tp, m in admin.list_partition_reassignments().items()
        }
        current, _ = _placement(admin)
        left = {
            tp
            for tp, rs in target.items()
            if tp in moving or sorted(current.get(tp, [])) != sorted(rs)
        }
        if not left:
            progress.clear()
            return
        gone = [tp for tp in left if tp not in moving and tp not in current]
        if gone:
            raise CommandError(f"{gone[0][0]}-{gone[0][1]} was deleted during the rebalance")
        line = progress.line(
            "rebalance",
            len(left),
            len(target),
            bytes_left(replica_sizes(sizes_admin), left, moving),
        )
        progress.show(line)
        if time.monotonic() >= deadline:
            raise CommandError(f"gave up (the moves in flight go on): {line}")
        time.sleep(1.0)  # a human-facing refresh interval


def _elect(admin: Admin, assignment: Assignment, deadline: float) -> int:
    """Preferred leader elections until every partition is led by its first replica (one
    that cannot lead now, out of the ISR or down, is reported and left as it is)."""
    from client import TopicPartition

    settle = min(deadline, time.monotonic() + SETTLE_S)
    while True:
        _, leaders = _placement(admin)
        off = sorted(tp for tp, rs in assignment.items() if tp in leaders and leaders[tp] != rs[0])
        if not off:
            counts: dict[int, int] = {}
            for leader in leaders.values():
                counts[leader] = counts.get(leader, 0) + 1
            shown = ", ".join(f"{b}: {n}" for b, n in sorted(counts.items()))
            print(f"Leaders per broker: {shown}")
            return 0
        results = admin.elect_leaders([TopicPartition(*tp) for tp in off])
        if time.monotonic() >= settle:
            failed = {tp: e for tp, e in results.items() if e is not None}
            names = ", ".join(f"{tp.topic}-{tp.partition}: {e}" for tp, e in sorted(failed.items()))
            raise CommandError(
                f"{len(off)} partitions are not led by their preferred replica"
                + (f" ({names})" if names else "")
            )
        time.sleep(0.5)  # the election's result reaches the brokers' metadata
