"""`gregor cluster up|down|status|stop-node|start-node|restart-node|rebalance`: a local
multi-process cluster in one command, its nodes one by one, its health, and (for any cluster)
spreading its replicas and leaders evenly (`rebalance`: client/cli/rebalance.py).

    gregor cluster up [--controllers 3] [--brokers 3] [--data-dir DIR] [--base-port P] [--secure]
    gregor cluster down [--data-dir DIR]
    gregor cluster stop-node|start-node|restart-node NAME [--data-dir DIR]
    gregor cluster status [--bootstrap-server H:P] [--command-config FILE] [--json]

`up` on a new DIR writes one config file per node into it (controllers `controller-N.yaml`,
node ids 1..C, listening on P+100+N; brokers `broker-N.yaml`, node ids C+1.., listening on P,
P+1, ...; one `cluster.id`; brokers get default.replication.factor = min(3, brokers),
min.insync.replicas = 2 from 3 brokers on (else 1) and offsets.topic.replication.factor =
min(3, brokers), as multi-broker quickstarts do). On a DIR that already holds those files it
resumes that cluster as the files say (same node ids, ports, cluster id, data), and refuses
while any of its nodes still runs. It starts every node as its own `gregor` process on
127.0.0.1 (each in its own session, stdout and stderr appended to DIR/NAME.log, its pid in
DIR/NAME.pid), waits until each is listening, prints the bootstrap servers and a table of
nodes, and then supervises: a node that dies is reported, one stopped with `stop-node` (its
pid file removed first) is reported as stopped, and one started again with `start-node` is
supervised again. Ctrl-C or SIGTERM stops every node of DIR that runs, found from the pid
files (a pid counts only while /proc/PID/cmdline names the node's config), brokers first
(each a controlled shutdown), then controllers, and exits 0. `up` exits on its own when no
node is left: 0 when they were all stopped on purpose (`down`, `stop-node`), else 1.

`up --secure` (a new DIR) generates a CA, a certificate per node, an admin user and the
brokers' own user in DIR/secure (broker/security/secure_setup.py): brokers serve SASL_SSL only
(clients, and replication as that user), controllers SSL with client certificates required
(brokers and controllers present their own); it prints how to connect with DIR/secure/
admin.properties (mode 0600). A resumed secured cluster stays secured.

`down` stops every node of DIR the same way, from another terminal or after `up` itself was
killed. `stop-node NAME` (SIGTERM, SIGKILL after --timeout), `start-node NAME` (as `up` starts
it, waits until it listens) and `restart-node NAME` (both) manage one node: NAME is a file
name of DIR without `.yaml`, e.g. broker-1 or controller-2.

`status` asks any broker (with the client settings of --command-config FILE or the
environment, as every client command: docs/security.md): the brokers (fenced or not), the metadata quorum (leader, term,
each voter's lag), and the offline, under-replicated and under-min-ISR partitions.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any, TypedDict

from broker.cluster_nodes import (
    Node,
    cluster_id_of,
    is_node,
    load_nodes,
    node_pid,
    secure_files,
    spawn_node,
    stop_cluster,
    stop_nodes,
    wait_ready,
    write_configs,
)
from client.cli import rebalance

DEFAULT_DATA_DIR = "gregor-cluster"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("cluster", help="run a local multi-process cluster; its status")
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    up = sub.add_parser(
        "up", help="start (or resume) controllers and brokers on loopback until Ctrl-C"
    )
    up.add_argument(
        "--controllers",
        type=int,
        default=None,
        metavar="N",
        help="controller voters of a new cluster (default 3); a resumed one keeps its own",
    )
    up.add_argument(
        "--brokers",
        type=int,
        default=None,
        metavar="N",
        help="brokers of a new cluster (default 3); a resumed one keeps its own",
    )
    _data_dir(up, "the cluster's configs, data, logs and pid files; an existing one is resumed")
    up.add_argument(
        "--base-port",
        type=int,
        default=None,
        metavar="P",
        help="brokers listen on P, P+1, ...; controllers on P+101, P+102, ... (default 9092;"
        " a resumed cluster keeps its ports)",
    )
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each node")
    up.add_argument(
        "--secure",
        action="store_true",
        help="a new cluster with TLS on every link and SASL (SCRAM) for clients: generates a CA,"
        " node certificates and an admin user whose credentials go to DIR/secure/admin.properties",
    )
    up.set_defaults(func=run_up)
    down = sub.add_parser("down", help="stop every node of a cluster started by `cluster up`")
    _data_dir(down, "the cluster directory given to `cluster up`")
    _stop_timeout(down)
    down.set_defaults(func=run_down)
    for action, what, func in (
        (
            "stop-node",
            "stop one node (SIGTERM; a broker does a controlled shutdown)",
            run_stop_node,
        ),
        ("start-node", "start one stopped node as `cluster up` does", run_start_node),
        ("restart-node", "stop, then start one node", run_restart_node),
    ):
        sp = sub.add_parser(action, help=what)
        sp.add_argument("name", metavar="NAME", help="the node: broker-N or controller-N")
        _data_dir(sp, "the cluster directory given to `cluster up`")
        _stop_timeout(sp)
        sp.set_defaults(func=func)
    st = sub.add_parser(
        "status", help="brokers, quorum, unhealthy partitions and reassignments in flight"
    )
    st.add_argument(
        "--bootstrap-server",
        default="127.0.0.1:9092",
        metavar="HOST:PORT",
        help="any broker of the cluster (default 127.0.0.1:9092)",
    )
    st.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties file (security.protocol, sasl.*, ssl.cafile), e.g. the"
        " admin.properties of `cluster up --secure`; default $GREGOR_COMMAND_CONFIG",
    )
    st.add_argument("--json", action="store_true", help="print JSON")
    st.set_defaults(func=run_status)
    rebalance.add_parser(sub)  # client/cli/rebalance.py


def _data_dir(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--data-dir",
        default=DEFAULT_DATA_DIR,
        metavar="DIR",
        help=f"{what} (default {DEFAULT_DATA_DIR})",
    )


def _stop_timeout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds a node may take to stop (then SIGKILL) or to start listening (default 60)",
    )


# -- up ------------------------------------------------------------------------------------------


def _fail(action: str, message: str, code: int = 1) -> int:
    print(f"gregor cluster {action}: {message}", file=sys.stderr, flush=True)
    return code


def _running(nodes: list[Node]) -> list[tuple[Node, int]]:
    return [(n, pid) for n in nodes if (pid := node_pid(n)) is not None]


def _resume_mismatch(args: argparse.Namespace, nodes: list[Node]) -> str | None:
    """What an explicit flag asks that the existing cluster is not (None: nothing)."""
    have = {
        "--controllers": sum(n.role == "controller" for n in nodes),
        "--brokers": sum(n.role == "broker" for n in nodes),
        "--base-port": next((n.port for n in nodes if n.role == "broker"), None),
        "--secure": secure_files(nodes) is not None,
    }
    asked = {"--controllers": args.controllers, "--brokers": args.brokers,
             "--base-port": args.base_port, "--secure": args.secure or None}  # fmt: skip
    for flag, value in asked.items():
        if value is not None and value != have[flag]:
            if flag == "--secure":
                return "--secure, but the cluster there is not secured"
            return f"{flag} {value}, but the cluster there has {flag} {have[flag]}"
    return None


def _say(line: str) -> None:
    print(line, flush=True)


def run_up(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    try:
        nodes = load_nodes(data_dir)
    except ValueError as exc:
        return _fail("up", f"cannot read the cluster in {data_dir}: {exc}")
    if nodes:
        if sum(n.role == "broker" for n in nodes) == 0 or all(n.role == "broker" for n in nodes):
            return _fail("up", f"{data_dir} needs at least one controller-N.yaml and broker-N.yaml")
        mismatch = _resume_mismatch(args, nodes)
        if mismatch:
            return _fail(
                "up",
                f"{data_dir} holds a cluster already: {mismatch}. Leave the flag out to resume"
                " it, or give another --data-dir.",
                2,
            )
        running = _running(nodes)
        if running:
            which = ", ".join(f"{n.name} (pid {pid})" for n, pid in running)
            return _fail(
                "up",
                f"the cluster in {data_dir} is running already: {which}. Stop it with `gregor"
                f" cluster down --data-dir {args.data_dir}`, or restart one node with `gregor"
                f" cluster restart-node NAME --data-dir {args.data_dir}`.",
            )
        _say(
            f"resuming the cluster in {data_dir} (cluster id {cluster_id_of(nodes) or 'per broker'})"
        )
    else:
        controllers = 3 if args.controllers is None else args.controllers
        brokers = 3 if args.brokers is None else args.brokers
        if controllers < 1 or brokers < 1:
            return _fail("up", "need at least one controller and one broker", 2)
        base = 9092 if args.base_port is None else args.base_port
        try:
            nodes = write_configs(data_dir, controllers, brokers, base, secure=args.secure)
        except ImportError as exc:  # (cryptography is a dependency; a broken install)
            return _fail("up", f"--secure needs the `cryptography` package: {exc}")
    return _supervise(nodes, args.data_dir, args.timeout)


def _supervise(nodes: list[Node], dir_arg: str, timeout: float) -> int:
    controllers = [n for n in nodes if n.role == "controller"]
    brokers = [n for n in nodes if n.role == "broker"]
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for group in (controllers, brokers):
            offsets = [spawn_node(n) for n in group]
            for n, offset in zip(group, offsets, strict=True):
                why = wait_ready(n, offset, timeout, stop)
                if why is not None:
                    _fail("up", f"{n.name} {why}")
                    return 130 if stop.is_set() else 1
        bootstrap = ",".join(n.address for n in brokers)
        _say(f"bootstrap servers: {bootstrap}")
        _say(f"{'node':<14}{'id':>4}  {'address':<22}{'pid':>8}  log")
        for n in nodes:
            assert n.proc is not None
            _say(f"{n.name:<14}{n.node_id:>4}  {n.address:<22}{n.proc.pid:>8}  {n.log}")
        _say(
            f"restart a node: gregor cluster restart-node NAME --data-dir {dir_arg} (also"
            f" stop-node, start-node); stop all: gregor cluster down --data-dir {dir_arg}"
        )
        admin = secure_files(nodes)
        if admin is not None:
            _say(
                f"secured: SASL_SSL (SCRAM-SHA-512) for clients, TLS on every link; the admin's"
                f" credentials and CA are in {admin} (keep it private). Connect with:\n"
                f"  gregor cluster status --bootstrap-server {brokers[0].address}"
                f" --command-config {admin}\n"
                f"  gregor topics list --bootstrap-server {brokers[0].address}"
                f" --command-config {admin}   (or export GREGOR_COMMAND_CONFIG={admin})\n"
                f"  Python: Producer(bootstrap_servers={bootstrap!r}, **settings) with settings ="
                f" security_protocol='SASL_SSL', sasl_mechanism='SCRAM-SHA-512',"
                f" sasl_username='admin', sasl_password=<sasl.password of {admin.name}>,"
                f" ssl_cafile={str(admin.parent / 'ca.pem')!r}"
            )
        _say("Ctrl-C stops the cluster.")
        return _watch(nodes, stop)
    finally:
        stop_cluster(nodes, 60.0, _say)
        for s, h in previous.items():
            signal.signal(s, h)


def _watch(nodes: list[Node], stop: threading.Event) -> int:
    """Report nodes that die, are stopped or come back, until `stop` (0) or no node is left
    (0 when all were stopped on purpose, else 1)."""
    state = dict.fromkeys((n.name for n in nodes), "running")
    last_pid = {n.name: n.proc.pid if n.proc is not None else 0 for n in nodes}
    while not stop.wait(0.5):
        for n in nodes:
            rc = None
            if n.proc is not None and n.proc.poll() is not None:  # reap our own child
                rc, n.proc = n.proc.returncode, None
            pid = node_pid(n)
            if pid is not None:
                if state[n.name] != "running" or pid != last_pid[n.name]:  # (restarted)
                    state[n.name] = "running"
                    _say(f"{n.name} is running again (pid {pid})")
                last_pid[n.name] = pid
            elif is_node(last_pid[n.name], n):
                continue  # its pid file is gone but it is still stopping
            elif state[n.name] == "running":
                if n.pid_file.exists():  # gone without `stop-node`/`down`
                    state[n.name] = "dead"
                    code = "" if rc is None else f" ({rc})"
                    _say(f"{n.name} exited{code}; see {n.log}")
                else:
                    state[n.name] = "stopped"
                    _say(f"{n.name} stopped")
        if "running" not in state.values():
            if "dead" in state.values():
                return _fail("up", "every node is gone")
            _say("every node is stopped")
            return 0
    return 0


# -- down, stop-node, start-node, restart-node ----------------------------------------------------


def _cluster(action: str, args: argparse.Namespace) -> list[Node] | int:
    data_dir = Path(args.data_dir).resolve()
    try:
        nodes = load_nodes(data_dir)
    except ValueError as exc:
        return _fail(action, f"cannot read the cluster in {data_dir}: {exc}")
    if not nodes:
        return _fail(
            action, f"{data_dir} holds no cluster (no controller-N.yaml or broker-N.yaml)", 2
        )
    return nodes


def _node(action: str, args: argparse.Namespace) -> Node | int:
    nodes = _cluster(action, args)
    if isinstance(nodes, int):
        return nodes
    for n in nodes:
        if n.name == args.name:
            return n
    names = ", ".join(n.name for n in nodes)
    return _fail(action, f"no node {args.name!r} in {args.data_dir}: its nodes are {names}", 2)


def run_down(args: argparse.Namespace) -> int:
    nodes = _cluster("down", args)
    if isinstance(nodes, int):
        return nodes
    if not _running(nodes):
        _say(f"no node of {Path(args.data_dir).resolve()} is running")
        return 0
    stop_cluster(nodes, args.timeout, _say)
    return 0


def run_stop_node(args: argparse.Namespace) -> int:
    node = _node("stop-node", args)
    if isinstance(node, int):
        return node
    if not stop_nodes([node], args.timeout):
        _say(f"{node.name} is not running")
    else:
        _say(f"stopped {node.name}")
    return 0


def run_start_node(args: argparse.Namespace) -> int:
    node = _node("start-node", args)
    if isinstance(node, int):
        return node
    return _start(node, args.timeout)


def run_restart_node(args: argparse.Namespace) -> int:
    node = _node("restart-node", args)
    if isinstance(node, int):
        return node
    if stop_nodes([node], args.timeout):
        _say(f"stopped {node.name}")
    return _start(node, args.timeout)


def _start(node: Node, timeout: float) -> int:
    pid = node_pid(node)
    if pid is not None:
        return _fail("start-node", f"{node.name} is running already (pid {pid})")
    offset = spawn_node(node)
    why = wait_ready(node, offset, timeout, threading.Event())
    if why is not None:
        return _fail("start-node", f"{node.name} {why}")
    assert node.proc is not None
    _say(f"started {node.name} (pid {node.proc.pid}) on {node.address}; log {node.log}")
    return 0


# -- status --------------------------------------------------------------------------------------


class BrokerStatus(TypedDict):
    id: int
    address: str
    fenced: bool


class VoterStatus(TypedDict):
    id: int
    lag: int


class QuorumStatus(TypedDict):
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[VoterStatus]


class MoveStatus(TypedDict):
    partition: str
    replicas: list[int]
    target: list[int]
    adding: list[int]
    removing: list[int]


class ClusterStatus(TypedDict):
    """`gregor cluster status --json`."""

    cluster_id: str
    controller_id: int
    brokers: list[BrokerStatus]
    quorum: QuorumStatus
    partitions: int
    topics: int
    offline: list[str]
    under_replicated: list[str]
    under_min_isr: list[str]
    reassignments: list[MoveStatus]


def cluster_status(bootstrap: str, settings: dict[str, str] | None = None) -> ClusterStatus:
    """What `gregor cluster status` prints, as data; `settings`: more client settings (dotted
    names: security.protocol, sasl.*, ssl.*)."""
    from client import Admin

    with Admin({**(settings or {}), "bootstrap.servers": bootstrap}) as admin:
        desc = admin.describe_cluster(include_fenced=True)
        quorum = admin.describe_quorum()
        topics = {t: admin.describe_topic(t) for t in admin.list_topics()}
        configs = admin.describe_configs(topics=list(topics), keys=["min.insync.replicas"])
        moving = admin.list_partition_reassignments()
    offline, under_replicated, under_min_isr = [], [], []
    adding = {(tp.topic, tp.partition): m.adding_replicas for tp, m in moving.items()}
    for name, t in topics.items():
        min_isr = int(configs[("topic", name)]["min.insync.replicas"].value or 1)
        for p in t.partitions:
            tp = f"{name}-{p.partition}"
            if p.leader < 0:
                offline.append(tp)
            # during a move, against the replicas it had (Kafka: the added ones do not count)
            if len(p.isr) < len(p.replicas) - len(adding.get((name, p.partition), ())):
                under_replicated.append(tp)
            if len(p.isr) < min_isr:
                under_min_isr.append(tp)
    return {
        "cluster_id": desc.cluster_id,
        "controller_id": desc.controller_id,
        "brokers": [
            {"id": b.node_id, "address": f"{b.host}:{b.port}", "fenced": b.fenced}
            for b in desc.brokers
        ],
        "quorum": {
            "leader_id": quorum.leader_id,
            "leader_epoch": quorum.leader_epoch,
            "high_watermark": quorum.high_watermark,
            "voters": [{"id": v.replica_id, "lag": v.lag} for v in quorum.voters],
        },
        "partitions": sum(len(t.partitions) for t in topics.values()),
        "topics": len(topics),
        "offline": offline,
        "under_replicated": under_replicated,
        "under_min_isr": under_min_isr,
        "reassignments": [
            {
                "partition": f"{tp.topic}-{tp.partition}",
                "replicas": m.replicas,
                "target": m.target_replicas,
                "adding": m.adding_replicas,
                "removing": m.removing_replicas,
            }
            for tp, m in sorted(moving.items())
        ],
    }


def run_status(args: argparse.Namespace) -> int:
    from client.cli.common import CommandError, command_config
    from client.errors import GregorError

    try:
        st = cluster_status(args.bootstrap_server, command_config(args.command_config))
    except (GregorError, CommandError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    print(f"cluster {st['cluster_id']}, active controller {st['controller_id']}")
    print("brokers:")
    for b in st["brokers"]:
        print(f"  {b['id']:>4}  {b['address']:<22}{'FENCED' if b['fenced'] else 'unfenced'}")
    q = st["quorum"]
    print(
        f"quorum: leader {q['leader_id']}, term {q['leader_epoch']}, high watermark {q['high_watermark']}"
    )
    for v in q["voters"]:
        print(f"  voter {v['id']:>4}  lag {v['lag']}")
    print(
        f"partitions: {st['partitions']} in {st['topics']} topics; offline {len(st['offline'])},"
        f" under-replicated {len(st['under_replicated'])}, under-min-ISR {len(st['under_min_isr'])}"
    )
    for what in ("offline", "under_replicated", "under_min_isr"):
        if st[what]:
            print(f"  {what.replace('_', '-')}: {' '.join(st[what])}")
    print(f"reassignments in flight: {len(st['reassignments'])}")
    for r in st["reassignments"]:
        print(
            f"  {r['partition']}: to {r['target']} (adding {r['adding']}, removing {r['removing']})"
        )
    return 0
