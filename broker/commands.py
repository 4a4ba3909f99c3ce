"""`gregor server` and `gregor broker`: run a broker process (one code path, role from config).

    gregor server [--config FILE] [--data-dir DIR] [--port N] [--host H] [--override KEY=VALUE ...]
    gregor broker --config FILE [--override KEY=VALUE ...]
    gregor broker decommission|recommission N [--bootstrap-server HOST:PORT]  (client/cli/decommission.py)

`gregor server` with no flags runs the embedded single-node defaults: 127.0.0.1:9092, data in
./gregor-data. Once listening it prints exactly one line to stdout (flushed), which scripts and
tests wait for:

    gregor server listening on 127.0.0.1:9092, data in /abs/gregor-data (node 1)

Configuration comes from client.config.load_config("broker", path, os.environ, overrides):
YAML file, then GREGOR_* environment variables, then --override/--data-dir/--host/--port.
A bad configuration prints one line naming the key on stderr and exits with status 2.
With more than one listener (broker/listeners.py) one line per listener follows it, with
the address the listener binds and the one it advertises:

      listener INTERNAL: bound 0.0.0.0:9092, advertised broker-1:9092 (inter-broker)
      listener EXTERNAL: bound 0.0.0.0:19092, advertised localhost:19092

SIGTERM / SIGINT shut down gracefully (exit 0). SIGQUIT prints every thread's stack on stderr
and the broker goes on (a JVM's `kill -3`). A fatal error (the one-voter controller's Raft
storage failed) shuts down just as gracefully, prints `gregor server: stopped after a fatal
error: REASON` on stderr and exits 1; so does a start-up that fails.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from client.config.loader import Config

DEFAULT_DATA_DIR = "gregor-data"


def register(subparsers: Any) -> None:
    server = subparsers.add_parser(
        "server",
        help="run a single-node broker (embedded defaults: 127.0.0.1:9092, ./gregor-data)",
        description="Run a broker process; with no flags, single-node development defaults.",
    )
    server.add_argument("--config", metavar="FILE", help="YAML config file")
    server.add_argument("--data-dir", metavar="DIR", help="data directory (log.dirs)")
    server.add_argument("--port", type=int, metavar="N", help="listener port (0: ephemeral)")
    server.add_argument("--host", metavar="H", help="listener host")
    _add_overrides(server)
    server.set_defaults(func=run_server, command_name="server")

    broker = subparsers.add_parser(
        "broker",
        help="run a broker with a config file (process.roles decides the roles)",
        description="Run a broker process configured by FILE.",
    )
    broker.add_argument("--config", metavar="FILE", help="YAML config file (required to run one)")
    _add_overrides(broker)
    broker.set_defaults(func=run_server, command_name="broker", data_dir=None, port=None, host=None)
    _add_membership(broker)


def _add_membership(broker: argparse.ArgumentParser) -> None:
    """`gregor broker decommission N` / `recommission N` (client/cli/decommission.py)."""
    from client.cli.common import add_bootstrap
    from client.cli.decommission import run_decommission, run_recommission

    sub = broker.add_subparsers(dest="broker_action", metavar="ACTION")
    d = sub.add_parser(
        "decommission",
        help="move every replica off broker N (reassignments), with progress, until it can be"
        " stopped with nothing under-replicated",
    )
    d.add_argument("broker_id", type=int, metavar="N", help="the broker to empty")
    d.add_argument(
        "--timeout",
        type=float,
        default=24 * 3600.0,
        metavar="S",
        help="give up (the moves in flight go on) after this many seconds (default 86400)",
    )
    d.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES/S",
        help="bound the copying of every broker adding replicas to this many bytes per second"
        " (follower.replication.throttled.rate, cluster-wide; removed at the end)",
    )
    add_bootstrap(d)
    d.set_defaults(func=run_decommission)
    r = sub.add_parser(
        "recommission", help="cancel the moves off broker N still in flight (decommission's undo)"
    )
    r.add_argument("broker_id", type=int, metavar="N", help="the broker to keep")
    add_bootstrap(r)
    r.set_defaults(func=run_recommission)


def _add_overrides(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config key (Kafka's dotted name), e.g. --override num.io.threads=8",
    )


def _fail(command: str, message: str) -> int:
    print(f"gregor {command}: {message}", file=sys.stderr, flush=True)
    return 2


def build_overrides(args: argparse.Namespace) -> dict[str, str]:
    """Flags → config overrides (ConfigError naming a malformed --override)."""
    from client.config.loader import parse_override_args

    overrides = parse_override_args(args.override)
    if args.data_dir:
        overrides["log.dirs"] = os.path.abspath(args.data_dir)
    elif args.command_name == "server" and not args.config and "log.dirs" not in overrides:
        overrides["log.dirs"] = os.path.abspath(DEFAULT_DATA_DIR)
    return overrides


def load_broker_config(args: argparse.Namespace) -> Any:
    """Load the config for `args` (raises ConfigError / ValueError with a one-line message)."""
    from broker.listeners import Endpoint, parse_endpoints
    from client.config import load_config

    overrides = build_overrides(args)
    # where each override came from, for error messages and DescribeConfigs
    sources = dict.fromkeys(overrides, "command-line --override")
    if args.data_dir:
        sources["log.dirs"] = "command-line --data-dir"
    elif "log.dirs" in overrides and not any(o.startswith("log.dirs=") for o in args.override):
        sources["log.dirs"] = f"gregor {args.command_name}'s default data dir"
    cfg = load_config("broker", args.config, os.environ, overrides, overrides_source=sources)
    if args.host is not None or args.port is not None:
        # --host/--port change the first listener (the only one of the embedded defaults)
        first, *rest = parse_endpoints(cfg.listeners)
        host = args.host if args.host is not None else first.host
        port = args.port if args.port is not None else first.port
        changed = [Endpoint(first.name, host, port), *rest]
        overrides["listeners"] = ",".join(str(e) for e in changed)
        sources["listeners"] = "command-line --host/--port"
        cfg = load_config("broker", args.config, os.environ, overrides, overrides_source=sources)
    return cfg


def run_server(args: argparse.Namespace) -> int:
    from client.errors import ConfigError
    from client.fsutil import DirectoryInUseError

    command = args.command_name
    if command == "broker" and not args.config:
        return _fail(command, "--config FILE is needed to run a broker")
    try:
        cfg = load_broker_config(args)
    except (ConfigError, ValueError) as exc:
        return _fail(command, f"invalid configuration: {exc}")
    except OSError as exc:
        return _fail(command, f"cannot read config: {exc}")

    _configure_logging(cfg)
    from broker.node_settings import check_process_roles
    from broker.server import BrokerServer, ServerSettings

    try:
        check_process_roles(cfg)
        settings = ServerSettings.from_config(cfg)
        server = BrokerServer(cfg)
    except (ConfigError, ValueError) as exc:
        return _fail(command, f"invalid configuration: {exc}")
    # Signals that arrive from here on (a supervisor may send one as soon as it sees the ready
    # line) request a graceful shutdown; serve_forever installs the same handlers again.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: server.request_shutdown())
    hup: list[int] = []  # a SIGHUP during start-up reloads once started (it must not end us)
    signal.signal(signal.SIGHUP, lambda signum, frame: hup.append(signum))
    faulthandler.register(signal.SIGQUIT, all_threads=True)  # kill -3: the threads' stacks
    try:
        host, port = server.start()
    except DirectoryInUseError as exc:
        return _fail(command, str(exc))
    except Exception as exc:  # start() logged the traceback and shut down what started
        print(f"gregor {command}: cannot start: {exc}", file=sys.stderr, flush=True)
        return 1
    signal.signal(signal.SIGHUP, lambda signum, frame: server.reload_tls())  # (as serve_forever)
    if hup:
        server.reload_tls()
    data = os.path.abspath(settings.log_dirs[0]) if settings.log_dirs else "(none)"
    shown = f"[{host}]" if ":" in host else host
    print(
        f"gregor {command} listening on {shown}:{port}, data in {data} (node {settings.node_id})",
        flush=True,
    )
    if len(server.listeners.bind) > 1:  # which address each listener gives its clients
        for line in server.listeners.describe():
            print(f"  {line}", flush=True)
    server.serve_forever()
    if server.exit_code:
        print(
            f"gregor {command}: stopped after a fatal error: {server.fatal_reason}",
            file=sys.stderr,
            flush=True,
        )
    return server.exit_code


def _configure_logging(cfg: Config) -> None:
    level_name = str(getattr(cfg, "log_level", "INFO") or "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level_name, logging.INFO),
        format="%(asctime)s %(levelname)s [%(threadName)s] %(name)s: %(message)s",
        stream=sys.stderr,
    )
