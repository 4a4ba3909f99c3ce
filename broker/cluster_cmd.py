"""`gregor cluster up|status`: a local multi-process cluster in one command, and its health.

    gregor cluster up [--controllers 3] [--brokers 3] [--data-dir DIR] [--base-port P]
    gregor cluster status [--bootstrap-server H:P] [--json]

`up` writes one config file per node into DIR (controllers `controller-N.yaml`, node ids 1..C,
listening on P+100+N; brokers `broker-N.yaml`, node ids C+1.., listening on P, P+1, ...), starts
every node as its own `gregor` process on 127.0.0.1 (each in its own session, logging to
DIR/<node>.log), waits until each is listening, prints the bootstrap servers and a table of
nodes, and then waits. Ctrl-C or SIGTERM stops the brokers (each a controlled shutdown), then
the controllers, and exits 0; a node that dies meanwhile is reported, and when every node is
gone `up` exits 1.

`status` asks any broker: the brokers (fenced or not), the metadata quorum (leader, term,
each voter's lag), and the offline, under-replicated and under-min-ISR partitions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

HOST = "127.0.0.1"
READY = " listening on "


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("cluster", help="run a local multi-process cluster; its status")
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start controllers and brokers on loopback until Ctrl-C")
    up.add_argument(
        "--controllers",
        type=int,
        default=3,
        metavar="N",
        help="controller quorum voters (default 3)",
    )
    up.add_argument("--brokers", type=int, default=3, metavar="N", help="brokers (default 3)")
    up.add_argument(
        "--data-dir",
        default="gregor-cluster",
        metavar="DIR",
        help="where the node configs, data and logs go (default ./gregor-cluster)",
    )
    up.add_argument(
        "--base-port",
        type=int,
        default=9092,
        metavar="P",
        help="brokers listen on P, P+1, ...; controllers on P+101, P+102, ... (default 9092)",
    )
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each node")
    up.set_defaults(func=run_up)
    st = sub.add_parser("status", help="brokers, quorum and unhealthy partitions")
    st.add_argument(
        "--bootstrap-server",
        default="127.0.0.1:9092",
        metavar="HOST:PORT",
        help="any broker of the cluster (default 127.0.0.1:9092)",
    )
    st.add_argument("--json", action="store_true", help="print JSON")
    st.set_defaults(func=run_status)


# -- up ------------------------------------------------------------------------------------------


@dataclass
class Node:
    name: str
    role: str
    node_id: int
    port: int
    config: Path
    log: Path
    proc: subprocess.Popen | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    _log_file: IO[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"


def write_configs(data_dir: Path, controllers: int, brokers: int, base_port: int) -> list[Node]:
    """One YAML file per node in `data_dir`; returns the nodes, controllers first."""
    data_dir.mkdir(parents=True, exist_ok=True)
    voters = ",".join(f"{n}@{HOST}:{base_port + 100 + n}" for n in range(1, controllers + 1))
    nodes = []
    for n in range(1, controllers + 1):
        cfg = data_dir / f"controller-{n}.yaml"
        cfg.write_text(
            "process.roles: controller\n"
            f"node.id: {n}\n"
            f'controller.quorum.voters: "{voters}"\n'
            f"metadata.log.dir: {data_dir / f'controller-{n}'}\n"
            "controller.quorum.election.timeout.ms: 500\n"
            "broker.session.timeout.ms: 6000\n"
        )
        port = base_port + 100 + n
        nodes.append(
            Node(f"controller-{n}", "controller", n, port, cfg, data_dir / f"controller-{n}.log")
        )
    for i in range(brokers):
        node_id = controllers + 1 + i
        cfg = data_dir / f"broker-{i + 1}.yaml"
        cfg.write_text(
            "process.roles: broker\n"
            f"node.id: {node_id}\n"
            f"listeners: PLAINTEXT://{HOST}:{base_port + i}\n"
            f'controller.quorum.voters: "{voters}"\n'
            f"log.dirs: {data_dir / f'broker-{i + 1}'}\n"
            "broker.heartbeat.interval.ms: 1000\n"
        )
        nodes.append(
            Node(
                f"broker-{i + 1}",
                "broker",
                node_id,
                base_port + i,
                cfg,
                data_dir / f"broker-{i + 1}.log",
            )
        )
    return nodes


def spawn_node(node: Node) -> None:
    node._log_file = open(node.log, "ab")  # noqa: SIM115 - closed in stop_nodes
    node.proc = subprocess.Popen(
        [sys.executable, "-m", "broker.cli", node.role, "--config", str(node.config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=node._log_file,
        start_new_session=True,  # Ctrl-C reaches `up` only; it stops the nodes in order
    )

    def watch() -> None:  # the ready line, then drain stdout so the child never blocks on it
        assert node.proc is not None and node.proc.stdout is not None
        for raw in node.proc.stdout:
            if READY in raw.decode(errors="replace"):
                node.ready.set()

    threading.Thread(target=watch, name=f"watch-{node.name}", daemon=True).start()


def stop_nodes(nodes: list[Node], timeout: float = 30.0) -> None:
    """SIGTERM the given nodes together, wait for them (SIGKILL after `timeout`)."""
    live = [n for n in nodes if n.proc is not None and n.proc.poll() is None]
    for n in live:
        assert n.proc is not None
        os.killpg(n.proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for n in live:
        assert n.proc is not None
        try:
            n.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(n.proc.pid, signal.SIGKILL)
            n.proc.wait(10)
    for n in nodes:
        if n._log_file is not None:
            n._log_file.close()
            n._log_file = None


def run_up(args: argparse.Namespace) -> int:
    if args.controllers < 1 or args.brokers < 1:
        print("gregor cluster up: need at least one controller and one broker", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir).resolve()
    nodes = write_configs(data_dir, args.controllers, args.brokers, args.base_port)
    controllers = [n for n in nodes if n.role == "controller"]
    brokers = [n for n in nodes if n.role == "broker"]
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for group in (controllers, brokers):
            for n in group:
                spawn_node(n)
            for n in group:
                assert n.proc is not None
                deadline = time.monotonic() + args.timeout
                while not n.ready.wait(0.1):
                    if stop.is_set() or n.proc.poll() is not None or time.monotonic() > deadline:
                        why = "stopped" if stop.is_set() else f"not ready (see {n.log})"
                        print(f"gregor cluster up: {n.name} {why}", file=sys.stderr, flush=True)
                        return 130 if stop.is_set() else 1
        bootstrap = ",".join(n.address for n in brokers)
        print(f"bootstrap servers: {bootstrap}")
        print(f"{'node':<14}{'id':>4}  {'address':<22}{'pid':>8}  log")
        for n in nodes:
            assert n.proc is not None
            print(f"{n.name:<14}{n.node_id:>4}  {n.address:<22}{n.proc.pid:>8}  {n.log}")
        print("Ctrl-C stops the cluster.", flush=True)
        reported: set[str] = set()
        while not stop.wait(0.5):
            for n in nodes:
                if n.name not in reported and n.proc is not None and n.proc.poll() is not None:
                    reported.add(n.name)
                    print(f"{n.name} exited ({n.proc.returncode}); see {n.log}", flush=True)
            if len(reported) == len(nodes):
                print("gregor cluster up: every node is gone", file=sys.stderr, flush=True)
                return 1
        return 0
    finally:
        stop_nodes(brokers)  # controlled shutdowns need the controllers
        stop_nodes(controllers)
        for s, h in previous.items():
            signal.signal(s, h)


# -- status --------------------------------------------------------------------------------------


def cluster_status(bootstrap: str) -> dict:
    """What `gregor cluster status` prints, as data."""
    from client import Admin

    with Admin(bootstrap_servers=bootstrap) as admin:
        desc = admin.describe_cluster(include_fenced=True)
        quorum = admin.describe_quorum()
        topics = {t: admin.describe_topic(t) for t in admin.list_topics()}
        configs = admin.describe_configs(topics=list(topics), keys=["min.insync.replicas"])
    offline, under_replicated, under_min_isr = [], [], []
    for name, t in topics.items():
        min_isr = int(configs[("topic", name)]["min.insync.replicas"].value or 1)
        for p in t.partitions:
            tp = f"{name}-{p.partition}"
            if p.leader < 0:
                offline.append(tp)
            if len(p.isr) < len(p.replicas):
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
    }


def run_status(args: argparse.Namespace) -> int:
    from client.errors import GregorError

    try:
        st = cluster_status(args.bootstrap_server)
    except GregorError as exc:
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
    return 0
