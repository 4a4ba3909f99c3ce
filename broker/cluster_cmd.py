"""`gregor cluster up|down|status|stop-node|start-node|restart-node`: a local multi-process
cluster in one command, its nodes one by one, and its health.

    gregor cluster up [--controllers 3] [--brokers 3] [--data-dir DIR] [--base-port P]
    gregor cluster down [--data-dir DIR]
    gregor cluster stop-node|start-node|restart-node NAME [--data-dir DIR]
    gregor cluster status [--bootstrap-server H:P] [--json]

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

`down` stops every node of DIR the same way, from another terminal or after `up` itself was
killed. `stop-node NAME` (SIGTERM, SIGKILL after --timeout), `start-node NAME` (as `up` starts
it, waits until it listens) and `restart-node NAME` (both) manage one node: NAME is a file
name of DIR without `.yaml`, e.g. broker-1 or controller-2.

`status` asks any broker: the brokers (fenced or not), the metadata quorum (leader, term,
each voter's lag), and the offline, under-replicated and under-min-ISR partitions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
READY = re.compile(r"^gregor \w+ listening on ", re.M)  # the line `gregor broker|controller` prints
NODE_FILE = re.compile(r"^(controller|broker)-(\d+)\.yaml$")
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
    st = sub.add_parser("status", help="brokers, quorum and unhealthy partitions")
    st.add_argument(
        "--bootstrap-server",
        default="127.0.0.1:9092",
        metavar="HOST:PORT",
        help="any broker of the cluster (default 127.0.0.1:9092)",
    )
    st.add_argument("--json", action="store_true", help="print JSON")
    st.set_defaults(func=run_status)


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


# -- the nodes of a cluster directory -------------------------------------------------------------


@dataclass
class Node:
    name: str
    role: str
    node_id: int
    port: int
    config: Path
    log: Path
    proc: subprocess.Popen | None = None  # when this process started it

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.config.with_suffix(".pid")


def write_configs(data_dir: Path, controllers: int, brokers: int, base_port: int) -> list[Node]:
    """One YAML file per node in `data_dir` (a new cluster); returns the nodes, controllers
    first."""
    data_dir.mkdir(parents=True, exist_ok=True)
    voters = ",".join(f"{n}@{HOST}:{base_port + 100 + n}" for n in range(1, controllers + 1))
    cluster_id = uuid.uuid4().hex[:22]
    # what multi-broker quickstarts set: replicated auto-created topics and offsets, and
    # acks=all writes that survive one broker down
    rf = min(3, brokers)
    topic_defaults = (
        f"default.replication.factor: {rf}\nmin.insync.replicas: {2 if brokers >= 3 else 1}\n"
    )
    for n in range(1, controllers + 1):
        (data_dir / f"controller-{n}.yaml").write_text(
            "process.roles: controller\n"
            f"node.id: {n}\n"
            f"cluster.id: {cluster_id}\n"
            f'controller.quorum.voters: "{voters}"\n'
            f"metadata.log.dir: {data_dir / f'controller-{n}'}\n"
            "controller.quorum.election.timeout.ms: 500\n"
            "broker.session.timeout.ms: 6000\n" + topic_defaults
        )
    for i in range(1, brokers + 1):
        (data_dir / f"broker-{i}.yaml").write_text(
            "process.roles: broker\n"
            f"node.id: {controllers + i}\n"
            f"cluster.id: {cluster_id}\n"
            f"listeners: PLAINTEXT://{HOST}:{base_port + i - 1}\n"
            f'controller.quorum.voters: "{voters}"\n'
            f"log.dirs: {data_dir / f'broker-{i}'}\n"
            "broker.heartbeat.interval.ms: 1000\n"
            + topic_defaults
            + f"offsets.topic.replication.factor: {rf}\n"
        )
    return load_nodes(data_dir)


def load_nodes(data_dir: Path) -> list[Node]:
    """The nodes whose config files `data_dir` holds (controllers first, then brokers, each by
    number), with ids and ports as the files say; [] when it holds none. ValueError (one line,
    naming the file) for a file that does not load."""
    from broker.listeners import parse_endpoints
    from client.config import load_config
    from controller.quorum.network import parse_voters

    found = []
    if data_dir.is_dir():
        for path in data_dir.iterdir():
            m = NODE_FILE.match(path.name)
            if m:
                found.append((m[1] != "controller", int(m[2]), m[1], path))
    nodes = []
    for _, _, role, path in sorted(found):
        try:
            cfg = load_config(role, str(path), {}, {})
            if role == "controller":
                port = parse_voters(str(cfg.controller_quorum_voters))[cfg.node_id][1]
            else:
                port = parse_endpoints(cfg.listeners)[0].port
        except Exception as exc:
            raise ValueError(f"{path}: {exc}") from None
        nodes.append(Node(path.stem, role, cfg.node_id, port, path, path.with_suffix(".log")))
    return nodes


def cluster_id_of(nodes: list[Node]) -> str | None:
    from client.config import load_config

    for n in nodes:
        cid = load_config(n.role, str(n.config), {}, {}).cluster_id
        if cid:
            return str(cid)
    return None


def _cmdline(pid: int) -> list[str] | None:
    """The arguments of process `pid` (None when there is none, or it is a zombie)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None
        try:  # no /proc (macOS): ps, split on blanks (config paths with blanks then miss)
            out = subprocess.run(
                ["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, check=False
            ).stdout
        except OSError:
            return None
        return out.split() or None
    except OSError:
        return None
    if not raw:  # a zombie, or a process in the middle of its exec (for a moment, no args)
        deadline = time.monotonic() + 1.0
        while not raw and not _zombie(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
            try:
                raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a] or None


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # (gone)


def node_pid(node: Node) -> int | None:
    """The pid of `node`'s running process, from its pid file; None when the file is missing
    or its process is gone or is not that node (a reused pid: its command line must name the
    node's config file)."""
    try:
        pid = int(node.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_node(pid, node) else None


def _is_node(pid: int, node: Node) -> bool:
    args = _cmdline(pid)
    return args is not None and str(node.config) in args


def _write_pid(node: Node, pid: int) -> None:
    tmp = node.pid_file.with_suffix(".pid.tmp")
    tmp.write_text(f"{pid}\n")
    os.replace(tmp, node.pid_file)


def spawn_node(node: Node) -> int:
    """Start `node` in its own session, stdout and stderr appended to its log, its pid in its
    pid file; returns the log's size before (where to look for its ready line)."""
    offset = node.log.stat().st_size if node.log.exists() else 0
    with open(node.log, "ab") as log:
        node.proc = subprocess.Popen(
            [sys.executable, "-m", "broker.cli", node.role, "--config", str(node.config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # Ctrl-C reaches `up` only; it stops the nodes in order
        )
    _write_pid(node, node.proc.pid)
    return offset


def wait_ready(node: Node, offset: int, timeout: float, stop: threading.Event) -> str | None:
    """Wait until `node` (just spawned) prints its ready line; None then, else why not."""
    assert node.proc is not None
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(node.log, "rb") as f:
                f.seek(offset)
                if READY.search(f.read().decode(errors="replace")):
                    return None
        except OSError:
            pass
        if node.proc.poll() is not None:
            return f"exited ({node.proc.returncode}) before it was listening; see {node.log}"
        if stop.is_set():
            return "stopped"
        if time.monotonic() > deadline:
            return f"not listening after {timeout:g}s (pid {node.proc.pid}); see {node.log}"
        stop.wait(0.1)


def _alive(pid: int) -> bool:
    return _cmdline(pid) is not None


def stop_nodes(nodes: list[Node], timeout: float = 60.0) -> list[Node]:
    """Stop the given nodes that run, together: remove each pid file (so a supervising `up`
    sees a stop, not a crash), SIGTERM its process group, wait (SIGKILL after `timeout`).
    Returns the nodes it stopped."""
    live: list[tuple[Node, int]] = []
    for n in nodes:
        pid = node_pid(n)
        if pid is None and n.proc is not None and n.proc.poll() is None:
            pid = n.proc.pid  # (its pid file was removed by hand)
        if pid is None:
            continue
        n.pid_file.unlink(missing_ok=True)
        _signal(pid, signal.SIGTERM)
        live.append((n, pid))
    deadline = time.monotonic() + timeout
    for sig_kill in (False, True):
        for n, pid in live:
            while not _gone(n, pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        if sig_kill:
            break
        late = [(n, pid) for n, pid in live if not _gone(n, pid)]
        for n, pid in late:
            print(f"{n.name} (pid {pid}) did not stop in {timeout:g}s: SIGKILL", file=sys.stderr)
            _signal(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10.0
    return [n for n, _ in live]


def _signal(pid: int, sig: int) -> None:
    try:
        if os.getpgid(pid) == pid:  # its own session (as started here): the whole group
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _gone(node: Node, pid: int) -> bool:
    if node.proc is not None and node.proc.pid == pid:
        return node.proc.poll() is not None  # (reaps our own child)
    return not _alive(pid)


def stop_cluster(nodes: list[Node], timeout: float, say: Callable[[str], None]) -> None:
    """Every running node: brokers first (controlled shutdowns need the controllers), then
    controllers."""
    for role in ("broker", "controller"):
        stopped = stop_nodes([n for n in nodes if n.role == role], timeout)
        if stopped:
            say(f"stopped {', '.join(n.name for n in stopped)}")


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
    }
    asked = {"--controllers": args.controllers, "--brokers": args.brokers,
             "--base-port": args.base_port}  # fmt: skip
    for flag, value in asked.items():
        if value is not None and value != have[flag]:
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
        nodes = write_configs(data_dir, controllers, brokers, base)
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
            elif _is_node(last_pid[n.name], n):
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
