"""`gregor controller` and `gregor quorum describe` (`add-controller` and `remove-controller`:
controller/membership_cli.py).

    gregor controller --config config/cluster/controller-1.yaml [--override KEY=VALUE ...]
    gregor quorum describe --bootstrap-controller HOST:PORT [--json] [--command-config FILE]

`gregor controller` runs one voter of the Raft metadata quorum (controller/quorum/process.py).
Once listening it prints exactly one line to stdout (flushed), which scripts and tests wait for:

    gregor controller listening on 127.0.0.1:9093, data in /abs/dir (node 1)

SIGTERM / SIGINT stop it (exit 0); SIGQUIT prints every thread's stack on stderr and it goes on
(a JVM's `kill -3`); SIGHUP re-reads the TLS certificate, key and CA files; a bad configuration
prints one line naming the key on stderr and exits 2. `quorum describe` asks any controller,
follows it to the leader, and prints the leader, term, high watermark and each voter's log end
offset and lag.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import ssl
import sys
import threading
from pathlib import Path
from typing import Any

from client.protocol.body import Body

# Keys and defaults of the interim loader (used only until client.config provides "controller").
INTERIM_DEFAULTS: dict[str, Any] = {
    "process.roles": "controller",
    "node.id": 1,
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "metadata.log.dir": "gregor-data/controller",
    "controller.quorum.election.timeout.ms": 1000,
    "broker.session.timeout.ms": 9000,
    "metadata.log.max.records.between.snapshots": 10_000,
    "num.partitions": 1,
    "default.replication.factor": 1,
    "unclean.leader.election.enable": False,
    "log.level": "INFO",
}


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "controller",
        help="run one voter of the Raft metadata quorum",
        description="Run a controller process configured by FILE.",
    )
    p.add_argument("--config", metavar="FILE", required=True, help="YAML config file")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config key (Kafka's dotted name)",
    )
    p.set_defaults(func=run_controller)

    q = subparsers.add_parser("quorum", help="inspect and change the metadata quorum")
    qsub = q.add_subparsers(dest="quorum_command", required=True)
    d = qsub.add_parser("describe", help="leader, term, high watermark, voters and their lag")
    d.add_argument(
        "--bootstrap-controller",
        required=True,
        metavar="HOST:PORT",
        help="any controller of the quorum (the answer comes from its leader)",
    )
    d.add_argument("--json", action="store_true", help="print the raw response as JSON")
    d.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties file; security.protocol=SSL (with ssl.cafile, and ssl.certfile"
        " / ssl.keyfile for mTLS) reaches controllers whose listener is SSL",
    )
    d.set_defaults(func=run_describe)
    from controller import membership_cli

    membership_cli.register(qsub)


def _load_config(path: str, overrides: dict[str, str]) -> Any:
    try:
        from client.config import load_config
    except ModuleNotFoundError as exc:  # INTERIM until client.config lands
        if exc.name != "client.config":
            raise
        load_config = interim_load_config  # type: ignore[assignment]
    return load_config(
        "controller", path, os.environ, overrides, overrides_source="command-line --override"
    )


def interim_load_config(
    role: str, path: str | None = None, env: Any = None, overrides: Any = None, **_: Any
) -> Any:
    import difflib
    from types import SimpleNamespace

    import yaml

    from client.errors import ConfigError

    values = dict(INTERIM_DEFAULTS)
    layers: list[dict[str, Any]] = []
    if path:
        with open(path) as f:
            layers.append(yaml.safe_load(f) or {})
    env = env or {}
    names = {f"GREGOR_{k.upper().replace('.', '_')}": k for k in INTERIM_DEFAULTS}
    layers.append({k: env[n] for n, k in names.items() if n in env})
    layers.append(dict(overrides or {}))
    for layer in layers:
        for key, value in layer.items():
            if key not in INTERIM_DEFAULTS:
                close = difflib.get_close_matches(key, list(INTERIM_DEFAULTS), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"unknown config key {key!r}{hint}")
            default = INTERIM_DEFAULTS[key]
            if isinstance(default, bool):
                if isinstance(value, str):
                    value = value.lower() in ("1", "true", "yes")
            elif isinstance(default, int):
                try:
                    value = int(value)
                except (TypeError, ValueError):
                    raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
            values[key] = value
    if path and not Path(str(values["metadata.log.dir"])).is_absolute():
        values["metadata.log.dir"] = os.path.abspath(str(values["metadata.log.dir"]))
    return SimpleNamespace(**{k.replace(".", "_"): v for k, v in values.items()})


def run_controller(args: argparse.Namespace) -> int:
    from client.errors import ConfigError, InconsistentClusterIdError
    from client.fsutil import DirectoryInUseError
    from controller.quorum.process import ControllerProcess

    overrides = {}
    for item in args.override:
        k, sep, v = item.partition("=")
        if not sep:
            print(f"gregor controller: --override expects KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides[k.strip()] = v
    stop = threading.Event()
    fatal: list[BaseException] = []

    def on_fatal(exc: BaseException) -> None:
        fatal.append(exc)
        stop.set()

    try:
        cfg = _load_config(args.config, overrides)
        proc = ControllerProcess(cfg, on_fatal=on_fatal)
    except InconsistentClusterIdError as exc:
        print(f"gregor controller: {exc}", file=sys.stderr, flush=True)
        return 1
    except (ConfigError, ValueError) as exc:
        print(f"gregor controller: invalid configuration: {exc}", file=sys.stderr, flush=True)
        return 2
    except OSError as exc:
        print(f"gregor controller: cannot read config: {exc}", file=sys.stderr, flush=True)
        return 2
    logging.basicConfig(
        level=getattr(logging, str(getattr(cfg, "log_level", "INFO")).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s [%(threadName)s] %(name)s: %(message)s",
        stream=sys.stderr,
    )
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: proc.reload_tls())  # re-read TLS files
    faulthandler.register(signal.SIGQUIT, all_threads=True)  # kill -3: the threads' stacks
    try:
        host, port = proc.start()
    except DirectoryInUseError as exc:
        print(f"gregor controller: {exc}", file=sys.stderr, flush=True)
        return 2
    except InconsistentClusterIdError as exc:
        print(f"gregor controller: {exc}", file=sys.stderr, flush=True)
        proc.stop()
        return 1
    except OSError as exc:
        print(f"gregor controller: cannot start: {exc}", file=sys.stderr, flush=True)
        proc.stop()
        return 1
    print(
        f"gregor controller listening on {host}:{port}, data in {proc.data_dir} "
        f"(node {proc.node_id})",
        flush=True,
    )
    while not stop.wait(1.0):
        pass
    proc.stop()
    if fatal:
        print(
            f"gregor controller: stopped after a fatal error: {fatal[0]}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    return 0


def describe_quorum(
    bootstrap: str, timeout: float = 5.0, ssl_context: ssl.SSLContext | None = None
) -> Body:
    """DescribeQuorum from the leader (following `leader_endpoint` once); `ssl_context`: TLS."""
    from client.protocol.api_keys import ApiKey
    from controller.quorum.network import request

    host, port = bootstrap.rsplit(":", 1)
    resp = request(
        host, int(port), ApiKey.DESCRIBE_QUORUM, {}, timeout=timeout, ssl_context=ssl_context
    )
    ep = resp.get("leader_endpoint")
    if resp.get("role") != "leader" and ep and ep != bootstrap:
        h, p = ep.rsplit(":", 1)
        try:
            resp = request(
                h, int(p), ApiKey.DESCRIBE_QUORUM, {}, timeout=timeout, ssl_context=ssl_context
            )
        except OSError:
            pass  # report what the bootstrap controller knows
    return resp


def _tls_from_properties(path: str | None) -> Any:
    """The TLS context a --command-config file asks for (security.protocol SSL or SASL_SSL:
    the controllers' listener is SSL); None for PLAINTEXT or no file."""
    if not path:
        return None
    from client.cli.common import read_properties
    from client.security.tls import TlsSettings, client_context

    props = read_properties(path)
    if props.get("security.protocol", "PLAINTEXT").upper() not in ("SSL", "SASL_SSL"):
        return None
    return client_context(
        TlsSettings(
            cafile=props.get("ssl.cafile") or None,
            certfile=props.get("ssl.certfile") or None,
            keyfile=props.get("ssl.keyfile") or None,
            check_hostname=props.get("ssl.endpoint.identification.algorithm", "https") != "",
        )
    )


def run_describe(args: argparse.Namespace) -> int:
    from client.cli.common import CommandError
    from client.errors import ConfigError

    try:
        ssl_context = _tls_from_properties(getattr(args, "command_config", None))
    except (CommandError, ConfigError) as exc:
        print(f"gregor quorum describe: {exc}", file=sys.stderr)
        return 2
    try:
        resp = describe_quorum(args.bootstrap_controller, ssl_context=ssl_context)
    except OSError as exc:
        print(
            f"gregor quorum describe: cannot reach {args.bootstrap_controller}: {exc}",
            file=sys.stderr,
        )
        return 1
    if args.json:
        print(json.dumps(resp, sort_keys=True))
        return 0
    hw = resp["high_watermark"]
    print(f"LeaderId:        {resp['leader_id']}")
    print(f"LeaderEpoch:     {resp['leader_epoch']}")
    print(f"HighWatermark:   {hw}")
    print(f"AnsweredBy:      {resp['node_id']} ({resp['role']})")
    print(f"{'ReplicaId':>10} {'LogEndOffset':>13} {'Lag':>6} {'LastContactMs':>14}  Status")
    for r in resp["voters"]:
        status = "Leader" if r["replica_id"] == resp["leader_id"] else "Follower"
        print(
            f"{r['replica_id']:>10} {r['log_end_offset']:>13} {hw - r['log_end_offset']:>6} "
            f"{r['last_contact_ms']:>14}  {status}"
        )
    for r in resp["observers"]:
        print(
            f"{r['replica_id']:>10} {r['log_end_offset']:>13} {hw - r['log_end_offset']:>6} "
            f"{r['last_contact_ms']:>14}  Observer"
        )
    return 0
