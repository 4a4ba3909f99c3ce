"""`gregor partitions reassign`: Kafka's kafka-reassign-partitions, in four actions.

    gregor partitions reassign --generate --brokers 4,5,6,7 [--topics a,b] [--plan FILE]
    gregor partitions reassign --execute --plan FILE [--throttle BYTES/S]
    gregor partitions reassign --verify --plan FILE [--wait]
    gregor partitions reassign --cancel --plan FILE

--generate prints the current assignment of the partitions concerned (to keep for a rollback)
and writes the proposed plan to FILE (stdout without --plan); --execute prints the current
assignment too, then starts the moves (with --throttle, first sets the cluster-wide
follower.replication.throttled.rate: the brokers adding replicas copy within it); --verify
says, per partition, whether its move is complete, in progress or not what the plan says
(exit 0 only when all are complete; with --wait it shows progress until they are), and once
no move at all is in flight removes the cluster-wide throttle; --cancel cancels the moves of
the plan still in flight (their partitions return to the replicas they had).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from client.cli.common import (
    CommandError,
    add_bootstrap,
    client_config,
    on_terminal,
    reports_errors,
)
from client.cli.reassign_plan import Assignment, PlanError, from_json, generate, to_json

if TYPE_CHECKING:
    from client import Admin


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("partitions", help="move partition replicas between brokers")
    sub = p.add_subparsers(dest="partitions_command", metavar="ACTION", required=True)
    r = sub.add_parser(
        "reassign",
        help="generate, execute, verify or cancel a reassignment plan (kafka-reassign-partitions)",
    )
    action = r.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose a plan")
    action.add_argument("--execute", action="store_true", help="start the plan's moves")
    action.add_argument("--verify", action="store_true", help="report the plan's progress")
    action.add_argument("--cancel", action="store_true", help="cancel the plan's moves in flight")
    r.add_argument(
        "--brokers",
        metavar="ID,ID,...",
        help="--generate: the brokers the partitions go to, e.g. 4,5,6,7",
    )
    r.add_argument(
        "--topics",
        metavar="NAME,NAME,...",
        help="--generate: the topics to move (default: every topic)",
    )
    r.add_argument(
        "--plan",
        metavar="FILE",
        help="the plan JSON: written by --generate (default: printed), read by the others",
    )
    r.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES/S",
        help="--execute: bound the copying of every broker adding replicas to this many bytes"
        " per second (follower.replication.throttled.rate, cluster-wide; --verify removes it"
        " once no move is in flight)",
    )
    r.add_argument(
        "--wait",
        action="store_true",
        help="--verify: wait until every move of the plan is complete, showing progress",
    )
    r.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        metavar="S",
        help="--verify --wait: give up after this many seconds (default 3600)",
    )
    add_bootstrap(r)
    r.set_defaults(func=_reassign)


THROTTLE_KEY = "follower.replication.throttled.rate"


def set_throttle(admin: Admin, rate: int | None) -> None:
    """Set (None: remove; removing a key that is not set is no error) the cluster-wide
    follower.replication.throttled.rate."""
    admin.incremental_alter_configs({("broker", ""): {THROTTLE_KEY: rate}})


def _admin(args: argparse.Namespace) -> Admin:
    from client import Admin

    return Admin(client_config(args))


def _names(items: Mapping[tuple[str, int], object]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(items))


def _read_plan(args: argparse.Namespace) -> Assignment:
    if not args.plan:
        raise CommandError("--plan FILE is needed")
    try:
        text = Path(args.plan).read_text()
    except OSError as e:
        raise CommandError(f"cannot read the plan {args.plan}: {e.strerror or e}") from e
    try:
        plan = from_json(text, args.plan)
    except PlanError as e:
        raise CommandError(str(e)) from e
    if not plan:
        raise CommandError(f"{args.plan} lists no partition")
    return plan


def _current(admin: Admin, topics: list[str] | None) -> Assignment:
    names = admin.list_topics() if topics is None else topics
    out: Assignment = {}
    for name in names:
        for p in admin.describe_topic(name).partitions:
            out[(name, p.partition)] = list(p.replicas)
    return out


def _original(admin: Admin, plan: Assignment) -> Assignment:
    """The current replicas of the plan's partitions (a move in flight: its target)."""
    from client import TopicPartition

    cur = _current(admin, sorted({t for t, _ in plan}))
    moving = admin.list_partition_reassignments([TopicPartition(*tp) for tp in plan])
    for tp, m in moving.items():
        cur[(tp.topic, tp.partition)] = m.target_replicas
    missing = [tp for tp in plan if tp not in cur]
    if missing:
        raise CommandError(f"unknown partitions in the plan: {_names(dict.fromkeys(missing))}")
    return {tp: cur[tp] for tp in plan}


@reports_errors
def _reassign(args: argparse.Namespace) -> int:
    if args.generate:
        return _generate(args)
    if args.brokers or args.topics:
        raise CommandError("--brokers and --topics go with --generate")
    if args.throttle is not None and not args.execute:
        raise CommandError("--throttle goes with --execute")
    if args.throttle is not None and args.throttle <= 0:
        raise CommandError(f"--throttle {args.throttle}: expected a positive number of bytes/s")
    with _admin(args) as admin:
        if args.execute:
            plan = _read_plan(args)
            if args.throttle is not None:
                set_throttle(admin, args.throttle)
                print(
                    f"Throttle: {args.throttle:,} bytes/s per broker adding replicas"
                    f" ({THROTTLE_KEY}); --verify removes it once no move is in flight."
                )
            return _execute(admin, plan)
        if args.verify:
            return _verify(admin, _read_plan(args), args.wait, args.timeout)
        return _cancel(admin, _read_plan(args))


def _generate(args: argparse.Namespace) -> int:
    if not args.brokers:
        raise CommandError("--generate needs --brokers ID,ID,...")
    try:
        brokers = [int(b) for b in args.brokers.split(",") if b.strip()]
    except ValueError:
        raise CommandError(f"--brokers {args.brokers!r}: expected ids like 4,5,6") from None
    topics = [t for t in args.topics.split(",") if t] if args.topics else None
    with _admin(args) as admin:
        known = {b.node_id: b.rack for b in admin.describe_cluster(include_fenced=True).brokers}
        unknown = [b for b in brokers if b not in known]
        if unknown:
            raise CommandError(f"brokers {unknown} are not registered (known: {sorted(known)})")
        current = _current(admin, topics)
    try:
        plan = generate(current, brokers, known)
    except PlanError as e:
        raise CommandError(str(e)) from e
    print("Current partition replica assignment (keep it to roll back):")
    print(to_json({tp: current[tp] for tp in plan}))
    moves = sum(len(set(rs) - set(current[tp])) for tp, rs in plan.items())
    summary = f"Proposed: {len(plan)} partitions change, {moves} replicas move"
    if args.plan:
        Path(args.plan).write_text(to_json(plan) + "\n")
        print(f"{summary}; plan written to {args.plan}")
    else:
        print(f"{summary}:")
        print(to_json(plan))
    return 0


def _execute(admin: Admin, plan: Assignment) -> int:
    from client import TopicPartition

    original = _original(admin, plan)
    print("Current partition replica assignment (keep it to roll back):")
    print(to_json(original))
    results = admin.alter_partition_reassignments(
        {TopicPartition(*tp): rs for tp, rs in plan.items()}
    )
    failed = {(tp.topic, tp.partition): e for tp, e in results.items() if e is not None}
    for (t, p), e in sorted(failed.items()):
        print(f"error: {t}-{p}: {type(e).__name__}: {e}", file=sys.stderr)
    started = len(plan) - len(failed)
    print(
        f"Started the reassignment of {started} partitions"
        + (f", {len(failed)} refused" if failed else ".")
    )
    return 1 if failed else 0


def _status(admin: Admin, plan: Assignment) -> dict[tuple[str, int], str]:
    """Per partition: "complete", "in progress" or what differs from the plan."""
    from client import TopicPartition

    moving = admin.list_partition_reassignments([TopicPartition(*tp) for tp in plan])
    in_flight = {(tp.topic, tp.partition): m for tp, m in moving.items()}
    cur = _current(admin, sorted({t for t, _ in plan}))
    out = {}
    for tp, rs in sorted(plan.items()):
        if tp in in_flight:
            m = in_flight[tp]
            if m.target_replicas == rs:
                out[tp] = (
                    f"in progress (adding {m.adding_replicas}, removing {m.removing_replicas})"
                )
            else:
                out[tp] = f"another move is in flight (to {m.target_replicas})"
        elif cur.get(tp) == rs:
            out[tp] = "complete"
        else:
            out[tp] = f"not as planned: replicas {cur.get(tp)}"
    return out


def _verify(admin: Admin, plan: Assignment, wait: bool, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    live = wait and on_terminal(sys.stderr)
    while True:
        status = _status(admin, plan)
        left = [tp for tp, s in status.items() if s.startswith("in progress")]
        if not wait or not left or time.monotonic() >= deadline:
            break
        if live:
            sys.stderr.write(f"\r\x1b[K{len(left)} of {len(plan)} partitions still moving")
            sys.stderr.flush()
        time.sleep(1.0)  # a human-facing poll interval, not a test wait
    if live:
        sys.stderr.write("\r\x1b[K")
    for (t, p), s in status.items():
        print(f"{t}-{p}: {s}")
    done = sum(s == "complete" for s in status.values())
    print(f"{done} of {len(plan)} partitions complete")
    if done == len(plan) and not admin.list_partition_reassignments():
        set_throttle(admin, None)
        print(f"No move in flight: the cluster-wide {THROTTLE_KEY}, if set, is removed.")
    return 0 if done == len(plan) else 1


def _cancel(admin: Admin, plan: Assignment) -> int:
    from client import TopicPartition
    from client.errors import NoReassignmentInProgressError

    results = admin.alter_partition_reassignments({TopicPartition(*tp): None for tp in plan})
    cancelled = [tp for tp, e in results.items() if e is None]
    idle = [tp for tp, e in results.items() if isinstance(e, NoReassignmentInProgressError)]
    failed = {
        tp: e
        for tp, e in results.items()
        if e is not None and not isinstance(e, NoReassignmentInProgressError)
    }
    for tp, e in sorted(failed.items()):
        print(f"error: {tp.topic}-{tp.partition}: {type(e).__name__}: {e}", file=sys.stderr)
    print(f"Cancelled {len(cancelled)} moves; {len(idle)} partitions had none in flight.")
    return 1 if failed else 0
