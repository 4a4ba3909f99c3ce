"""Shared pieces of the client commands: the bootstrap flag, -X overrides, error reporting."""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Callable
from typing import Any

from client.errors import GregorError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"  # where `gregor server` listens by default (README)


def add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"broker(s) to connect to, comma-separated (default {DEFAULT_BOOTSTRAP})",
    )
    p.add_argument(
        "-X",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="client config in Kafka's dotted names, e.g. -X linger.ms=10 (repeatable)",
    )


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"bootstrap.servers": args.bootstrap_server}
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"-X {item!r}: expected KEY=VALUE")
        cfg[key.strip()] = value
    cfg.update({k: v for k, v in extra.items() if v is not None})
    return cfg


class CommandError(Exception):
    """A command's own error: printed as `error: MESSAGE`, exit status 1."""


def reports_errors(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn client errors into `error: ...` on stderr and exit status 1."""

    @functools.wraps(fn)
    def wrapper(args: argparse.Namespace) -> int:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        try:
            return fn(args)
        except (GregorError, CommandError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130

    return wrapper
