"""The `gregor` command: one entry point, subcommands owned by the package they drive.

Each subcommand module exposes `register(subparsers)`, which adds its parser(s) and sets
`func` on them; `func(args) -> int` is the exit code. Client-side commands (topics, produce,
consume, perf) live in `client.cli`; server-side ones in `broker` and `controller`, keeping
the import arrows of docs/architecture.md §2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# (module, description). A module is added here when its commands exist.
COMMAND_MODULES: list[str] = [
    "broker.commands",
    "broker.cluster_cmd",
    "controller.cli",
    "client.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gregor",
        description="Gregor: a Kafka-style distributed event log in Python.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"gregor {version('gregor')}"
    except PackageNotFoundError:
        return "gregor (not installed)"


# The exit status of a command whose reader went away (`gregor ... | head -1`): 128 + SIGPIPE,
# what a shell reports for a C tool that SIGPIPE ended.
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    """Run one command. A closed stdout (the reader of a pipe exited) ends any command quietly
    with status 141, as Python's documentation on SIGPIPE recommends: no traceback, and
    stdout pointed at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        code = _run(argv)
        sys.stdout.flush()  # inside the try: buffered output may meet the closed pipe here
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError):
                pass
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 0 if args.command is None else 2
    return int(func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
