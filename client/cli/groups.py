"""`gregor groups list|describe`: consumer groups, their members and their lag."""

from __future__ import annotations

import argparse
import dataclasses
import json

from client.cli.common import add_bootstrap, client_config, reports_errors


def register(subparsers: argparse._SubParsersAction) -> None:
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
        "nothing is committed) and the member owning it; then the total lag and the members.",
    )
    d.add_argument("group")
    d.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(d)
    d.set_defaults(func=_describe)


def _admin(args: argparse.Namespace):
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
    rows = [("TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER")]
    rows += [
        (
            p.topic,
            str(p.partition),
            _dash(p.committed_offset),
            str(p.log_end_offset),
            _dash(p.lag),
            p.member_id or "-",
        )  # fmt: skip
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
            print(f"  {m.member_id} epoch {m.member_epoch} client {m.client_id or '-'}"
                  f" owns {owned}")  # fmt: skip
    return 0
