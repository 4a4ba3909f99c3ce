"""Client-side `gregor` subcommands: topics, partitions, configs, groups, produce, consume, perf,
top, users, quotas, acls, transactions.

Registered in broker/cli.py COMMAND_MODULES as "client.cli"; each module adds its parsers.
Every command takes `--bootstrap-server HOST:PORT` (default 127.0.0.1:9092) and exits 1 with a
one-line message on a client error.
"""

from __future__ import annotations

import argparse

from client.cli import (
    acls,
    configs,
    consume,
    groups,
    partitions,
    perf,
    produce,
    quotas,
    top,
    topics,
    transactions,
    users,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for module in (
        topics,
        partitions,
        configs,
        groups,
        produce,
        consume,
        perf,
        top,
        users,
        quotas,
        acls,
        transactions,
    ):
        module.register(subparsers)
