"""Shared pieces of the client commands: the bootstrap flag, -X overrides, error reporting, and
the progress line long commands show on a terminal."""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from client.errors import GregorError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"  # where `gregor server` listens by default (README)
ACKS_HELP = (
    "acknowledgement the producer waits for: all (= -1, every in-sync replica, default),"
    " 1 (the leader only) or 0 (none)"
)


def add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT",
        help=f"broker(s) to connect to, comma-separated (default {DEFAULT_BOOTSTRAP})",
    )
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties file (Kafka's tools' flag): KEY=VALUE lines, e.g."
        " security.protocol=SASL_SSL, sasl.username=..., sasl.password=..., ssl.cafile=...;"
        f" default ${COMMAND_CONFIG_ENV}; ${USERNAME_ENV} and ${PASSWORD_ENV} win over its"
        " sasl.username and sasl.password, -X over everything",
    )
    p.add_argument(
        "-X",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="client config in Kafka's dotted names, e.g. -X linger.ms=10 (repeatable)",
    )


def read_properties(path: str) -> dict[str, str]:
    """A Java-style properties file: `key=value` (or `key: value`) lines; `#` and `!` start
    comments. CommandError naming the file and line for anything else."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise CommandError(f"--command-config {path}: {exc.strerror or exc}") from exc
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        eq, colon = line.find("="), line.find(":")
        cut = min(i for i in (eq, colon) if i >= 0) if max(eq, colon) >= 0 else -1
        if cut <= 0:
            raise CommandError(f"--command-config {path}, line {n}: expected KEY=VALUE")
        out[line[:cut].strip()] = line[cut + 1 :].strip()
    return out


COMMAND_CONFIG_ENV = "GREGOR_COMMAND_CONFIG"
USERNAME_ENV = "GREGOR_SASL_USERNAME"
PASSWORD_ENV = "GREGOR_SASL_PASSWORD"


def command_config(path: str | None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The client settings a command takes from outside its command line: the properties
    file `path` (--command-config), else the one $GREGOR_COMMAND_CONFIG names; then
    $GREGOR_SASL_USERNAME and $GREGOR_SASL_PASSWORD over the file's sasl.username and
    sasl.password. CommandError for a file that does not read."""
    env = os.environ if env is None else env
    path = path or env.get(COMMAND_CONFIG_ENV) or None
    out = read_properties(path) if path else {}
    for var, key in ((USERNAME_ENV, "sasl.username"), (PASSWORD_ENV, "sasl.password")):
        if env.get(var):
            out[key] = env[var]
    return out


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """bootstrap.servers, then `command_config` (file, environment), then -X, then `extra`."""
    cfg: dict[str, Any] = {"bootstrap.servers": args.bootstrap_server}
    cfg.update(command_config(getattr(args, "command_config", None)))
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


def on_terminal(*streams: Any) -> bool:
    """True when every stream is a terminal (a closed or odd stream counts as not one)."""
    try:
        return all(s.isatty() for s in streams)
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """A live line on stderr, rewritten once a second while a long command runs:
    `LABEL: N[/TOTAL] records, R records/s` and, when latencies are reported through
    `observe`, the average and maximum latency of the last second (Kafka's perf tools print
    the same figures). Nothing at all unless `enabled` (callers pass whether the relevant
    streams are terminals), so output that is piped or redirected stays clean.

    `count` is set by the command's thread; `observe` may be called from any thread."""

    def __init__(self, label: str, total: int | None = None, *, enabled: bool) -> None:
        self.label, self.total, self.count = label, total, 0
        self.enabled = enabled
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._lat_sum = 0.0
        self._lat_n = 0
        self._lat_max = 0.0
        self._start = self._last_t = time.monotonic()
        self._last_count = 0
        self._shown = False
        self._thread = threading.Thread(target=self._run, daemon=True, name="cli-progress")
        if enabled:
            self._thread.start()

    def observe(self, latency_s: float, weight: int = 1) -> None:
        """One acknowledgement's latency, counted `weight` times in the average."""
        if not self.enabled:
            return
        with self._lock:
            self._lat_sum += latency_s * weight
            self._lat_n += weight
            self._lat_max = max(self._lat_max, latency_s)

    def line(self, now: float) -> str:
        """The text of the line at `now` (resets the per-second latency figures)."""
        count = self.count
        rate = (count - self._last_count) / max(1e-9, now - self._last_t)
        self._last_t, self._last_count = now, count
        done = f"{count:,}" + (f"/{self.total:,}" if self.total else "")
        text = f"{self.label}: {done} records, {rate:,.0f} records/s"
        with self._lock:
            if self._lat_n:
                text += (
                    f", {self._lat_sum / self._lat_n * 1000:.1f} ms avg latency,"
                    f" {self._lat_max * 1000:.1f} ms max latency"
                )
            self._lat_sum, self._lat_n, self._lat_max = 0.0, 0, 0.0
        return text

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                sys.stderr.write("\r\x1b[K" + self.line(time.monotonic()))
                sys.stderr.flush()
                self._shown = True
            except (OSError, ValueError):  # the terminal went away: stop quietly
                return

    def close(self) -> None:
        """Stop the line and erase it (the command prints its own summary after)."""
        if not self.enabled or self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        if self._shown:
            try:
                sys.stderr.write("\r\x1b[K")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
