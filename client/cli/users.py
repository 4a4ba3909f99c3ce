"""`gregor users create|delete|list`: SCRAM users (docs/security.md).

    gregor users create alice [--mechanism SCRAM-SHA-512] [--iterations 8192]
    gregor users delete alice
    gregor users list [--json]

The password is never a command-line argument (it would show in `ps` and the shell history):
`create` reads it from --password-file FILE (its first line), else the environment variable
GREGOR_USER_PASSWORD, else a prompt on the terminal (or one line of stdin). It is salted and
iterated in this process; only the salted password is sent. Connection settings, security
included, come from --command-config FILE and -X.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import os
import sys
from typing import TYPE_CHECKING

from client.cli.common import CommandError, add_bootstrap, client_config, reports_errors

if TYPE_CHECKING:
    from client import Admin

PASSWORD_ENV = "GREGOR_USER_PASSWORD"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("users", help="create, delete and list SCRAM users")
    sub = p.add_subparsers(dest="users_command", metavar="ACTION", required=True)

    c = sub.add_parser(
        "create",
        help="create a user, or set a new password (for one mechanism)",
        description="The password comes from --password-file, else $" + PASSWORD_ENV + ", else"
        " a prompt (or one line of stdin): never from the command line.",
    )
    c.add_argument("name", help="the user name")
    c.add_argument("--mechanism", default="SCRAM-SHA-512",
                   choices=("SCRAM-SHA-256", "SCRAM-SHA-512"), help="default SCRAM-SHA-512")  # fmt: skip
    c.add_argument("--iterations", type=int, default=8192, help="PBKDF2 iterations, 4096..16384")
    c.add_argument(
        "--password-file", metavar="FILE", help="read the password from FILE's first line"
    )
    add_bootstrap(c)
    c.set_defaults(func=_create)

    d = sub.add_parser("delete", help="remove every SCRAM credential of a user")
    d.add_argument("name", help="the user name")
    add_bootstrap(d)
    d.set_defaults(func=_delete)

    ls = sub.add_parser("list", help="users and their mechanisms (never keys or salts)")
    ls.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(ls)
    ls.set_defaults(func=_list)


def _admin(args: argparse.Namespace) -> Admin:
    from client import Admin

    return Admin(client_config(args))


def read_password(path: str | None) -> str:
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                password = f.readline().rstrip("\r\n")
        except OSError as exc:
            raise CommandError(f"--password-file {path}: {exc.strerror or exc}") from exc
    elif PASSWORD_ENV in os.environ:
        password = os.environ[PASSWORD_ENV]
    elif sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            raise CommandError("the two passwords differ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise CommandError("empty password")
    return password


@reports_errors
def _create(args: argparse.Namespace) -> int:
    password = read_password(args.password_file)
    try:
        with _admin(args) as admin:
            admin.create_user(args.name, password, args.mechanism, args.iterations)
    except ValueError as exc:  # iterations out of range
        raise CommandError(str(exc)) from exc
    print(f"user {args.name}: {args.mechanism} credential set")
    return 0


@reports_errors
def _delete(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        admin.delete_user(args.name)
    print(f"user {args.name} deleted")
    return 0


@reports_errors
def _list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        users = admin.list_users()
    if args.json:
        print(
            json.dumps(
                {u: [dataclasses.asdict(c) for c in cs] for u, cs in users.items()}, indent=2
            )
        )
        return 0
    for user, creds in sorted(users.items()):
        print(f"{user}\t" + ",".join(f"{c.mechanism}:{c.iterations}" for c in creds))
    return 0
