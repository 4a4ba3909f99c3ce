"""`gregor configs describe|alter --topic T`: see and change a topic's configs on a live cluster.

    gregor configs describe --topic T [--all] [--json]
    gregor configs alter --topic T [--set KEY=VALUE ...] [--delete KEY ...]

`describe` prints the topic's overrides (`--all`: every topic-level key, defaults marked);
`alter` sets and deletes keys in one request (Kafka's IncrementalAlterConfigs), applied to the
live logs without a restart; the controller refuses an unknown key or a bad value, naming it.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from client.cli.common import CommandError, add_bootstrap, client_config, reports_errors

if TYPE_CHECKING:
    from client import Admin


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("configs", help="describe and alter topic configs")
    sub = p.add_subparsers(dest="configs_command", metavar="ACTION", required=True)

    d = sub.add_parser("describe", help="a topic's configs (overrides; --all: every key)")
    d.add_argument("--topic", required=True, help="the topic to describe")
    d.add_argument("--all", action="store_true", help="also the keys left at their default")
    d.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(d)
    d.set_defaults(func=_describe)

    a = sub.add_parser("alter", help="set or delete topic configs (no restart needed)")
    a.add_argument("--topic", required=True, help="the topic to change")
    a.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="set a key (repeatable)"
    )
    a.add_argument(
        "--delete",
        action="append",
        default=[],
        metavar="KEY",
        help="remove an override: back to the broker default (repeatable)",
    )
    add_bootstrap(a)
    a.set_defaults(func=_alter)


def _admin(args: argparse.Namespace) -> Admin:
    from client import Admin

    return Admin(client_config(args))


def topic_overrides(admin: Admin, topic: str) -> dict[str, str | None]:
    """The topic's non-default configs (used by `topics describe` too)."""
    entries = admin.describe_configs(topics=[topic])[("topic", topic)]
    return {k: e.value for k, e in sorted(entries.items()) if not e.is_default}


@reports_errors
def _describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        entries = admin.describe_configs(topics=[args.topic])[("topic", args.topic)]
    shown = {k: e for k, e in sorted(entries.items()) if args.all or not e.is_default}
    if args.json:
        print(
            json.dumps(
                {k: {"value": e.value, "default": e.is_default} for k, e in shown.items()},
                indent=2,
            )
        )
        return 0
    if not shown:
        print(f"Topic {args.topic} has no config overrides (--all shows the defaults).")
    for k, e in shown.items():
        print(f"{k}={e.value}" + ("\t(default)" if e.is_default else ""))
    return 0


@reports_errors
def _alter(args: argparse.Namespace) -> int:
    changes: dict[str, str | None] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--set {item!r}: expected KEY=VALUE")
        changes[key.strip()] = value
    for key in args.delete:
        if key in changes:
            raise CommandError(f"{key}: both --set and --delete")
        changes[key] = None
    if not changes:
        raise CommandError("nothing to alter: give --set KEY=VALUE and/or --delete KEY")
    with _admin(args) as admin:
        admin.incremental_alter_configs({("topic", args.topic): changes})
    print(f"Altered {len(changes)} config(s) of topic {args.topic}.")
    return 0
