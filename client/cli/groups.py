"""`gregor groups list|describe|delete|reset-offsets`: consumer groups, their members, their lag,
and changing their committed offsets (a dry run unless --execute, as Kafka's tool)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import TYPE_CHECKING

from client.cli.common import CommandError, add_bootstrap, client_config, reports_errors

if TYPE_CHECKING:
    from client import Admin


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("groups", help="list consumer groups, describe one with its lag")
    sub = p.add_subparsers(dest="groups_command", metavar="ACTION", required=True)

    ls = sub.add_parser("list", help="group ids and states")
    ls.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(ls)
    ls.set_defaults(func=_list)

    d = sub.add_parser(
        "describe",
        help="members, and per partition the committed offset, log end offset and lag",
        description="One row per partition the group owns or has committed offsets for: "
        "committed offset, log end offset (high watermark), lag (their difference; - when "
        "nothing is committed), the member owning it and that member's host (its address as "
        "the coordinator saw it, /IP as in Kafka); then the total lag and the members.",
    )
    d.add_argument("group", help="the group id")
    d.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(d)
    d.set_defaults(func=_describe)

    rm = sub.add_parser("delete", help="delete a group without members and its offsets")
    rm.add_argument("group", help="the group id")
    add_bootstrap(rm)
    rm.set_defaults(func=_delete)

    r = sub.add_parser(
        "reset-offsets",
        help="set a group's committed offsets of a topic (dry run unless --execute)",
        description="Prints each partition's current and new committed offset; --execute "
        "writes them. The group must have no members (stop its consumers first). New offsets "
        "are kept within [log start, log end].",
    )
    r.add_argument("--group", required=True, help="the group id")
    r.add_argument("--topic", required=True, help="the topic whose offsets to reset")
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    to.add_argument("--to-datetime", metavar="ISO",
                    help="the first offset at or after this time (e.g. 2026-11-25T10:00:00,"
                    " UTC unless an offset is given); the log end when none is")  # fmt: skip
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="the committed offset plus N (may be negative)")  # fmt: skip
    r.add_argument("--execute", action="store_true", help="write the new offsets")
    r.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(r)
    r.set_defaults(func=_reset_offsets)


def _admin(args: argparse.Namespace) -> Admin:
    from client import Admin

    return Admin(client_config(args))


@reports_errors
def _list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        groups = admin.list_groups()
    if args.json:
        print(json.dumps([dataclasses.asdict(g) for g in groups], indent=2))
        return 0
    for g in groups:
        print(f"{g.group_id}\t{g.state}")
    return 0


def _dash(v: object) -> str:
    return "-" if v is None else str(v)


@reports_errors
def _describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        d = admin.describe_group(args.group)
    if args.json:
        out = dataclasses.asdict(d)
        out["total_lag"] = d.total_lag
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"Group {d.group_id}: state {d.state}, group epoch {d.group_epoch}, assignment epoch"
        f" {d.assignment_epoch}, assignor {d.assignor or '-'}, coordinator {d.coordinator}"
    )
    hosts = {m.member_id: m.client_host for m in d.members}
    rows = [("TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER", "HOST")]
    rows += [
        (
            p.topic,
            str(p.partition),
            _dash(p.committed_offset),
            str(p.log_end_offset),
            _dash(p.lag),
            p.member_id or "-",
            hosts.get(p.member_id or "") or "-",
        )
        for p in d.partitions
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print(f"TOTAL LAG {d.total_lag}")
    if d.members:
        print("MEMBERS")
        for m in d.members:
            owned = ",".join(f"{tp.topic}-{tp.partition}" for tp in m.assignment) or "-"
            print(f"  {m.member_id} epoch {m.member_epoch} host {m.client_host or '-'}"
                  f" client {m.client_id or '-'} owns {owned}")  # fmt: skip
    return 0


@reports_errors
def _delete(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        admin.delete_group(args.group)
    print(f"Deleted group {args.group}.")
    return 0


def _timestamp_ms(text: str) -> int:
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--to-datetime {text!r} is not an ISO 8601 date-time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


@reports_errors
def _reset_offsets(args: argparse.Namespace) -> int:
    from client import TopicPartition
    from client.errors import GroupIdNotFoundError

    with _admin(args) as admin:
        parts = admin.describe_topic(args.topic).partitions
        try:
            desc = admin.describe_group(args.group)
        except GroupIdNotFoundError:
            desc = None
        if desc is not None and desc.members and args.execute:
            raise CommandError(
                f"group {args.group} has {len(desc.members)} active member(s): offsets can only"
                " be reset while it has none (stop its consumers first)"
            )
        current = {} if desc is None else {
            p.partition: p.committed_offset for p in desc.partitions if p.topic == args.topic
        }  # fmt: skip
        by_time = {}
        if args.to_datetime is not None:
            ms = _timestamp_ms(args.to_datetime)
            by_time = admin.list_offsets({TopicPartition(args.topic, p.partition): ms
                                          for p in parts})  # fmt: skip
        rows: list[tuple[int, int | None, int | None]] = []
        for p in parts:
            lo, hi = p.log_start_offset, p.high_watermark
            cur = current.get(p.partition)
            if args.to_earliest:
                new = lo
            elif args.to_latest:
                new = hi
            elif args.to_offset is not None:
                new = args.to_offset
            elif args.to_datetime is not None:
                got = by_time.get(TopicPartition(args.topic, p.partition), -1)
                new = got if got >= 0 else hi
            elif cur is None:  # --shift-by without a committed offset: nothing to shift
                rows.append((p.partition, cur, None))
                continue
            else:
                new = cur + args.shift_by
            rows.append((p.partition, cur, max(lo, min(hi, new))))
        if args.execute:
            admin.alter_group_offsets(
                args.group,
                {TopicPartition(args.topic, i): new for i, _c, new in rows if new is not None},
            )
    if args.json:
        print(json.dumps([{"topic": args.topic, "partition": i, "current": c, "new": n}
                          for i, c, n in rows], indent=2))  # fmt: skip
    else:
        print("TOPIC  PARTITION  CURRENT  NEW")
        for i, c, n in rows:
            print(f"{args.topic}  {i}  {_dash(c)}  {_dash(n)}")
        if not args.execute:
            print("(dry run: nothing written; add --execute to apply)")
    return 0
