"""The nodes of a `gregor cluster` directory and their processes (broker/cluster_cmd.py is the
command; scripts/bench/ start clusters through this too).

A directory holds one config file per node (`controller-N.yaml`, `broker-N.yaml`), its data,
its log (`NAME.log`, stdout and stderr appended) and, while it runs, its pid file (`NAME.pid`).
A pid counts only while /proc/PID/cmdline names the node's config, so a stale pid file (a
crash, a reboot, a reused pid) is ignored.

    nodes = write_configs(dir, controllers, brokers, base_port)   # a new cluster's files
    nodes = load_nodes(dir)                                        # an existing one's
    offset = spawn_node(node); wait_ready(node, offset, timeout, stop_event)
    stop_cluster(nodes, timeout, say)                              # brokers, then controllers
"""

from __future__ import annotations

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

HOST = "127.0.0.1"


def ephemeral_port_low() -> int:
    """The first port of the kernel's ephemeral range (what outgoing connections get): ports
    picked for nodes seconds before they bind must lie below it, or an outgoing connection may
    take one first (scripts/bench/_cluster.py, tests/cluster)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


READY = re.compile(r"^gregor \w+ listening on ", re.M)  # the line `gregor broker|controller` prints
NODE_FILE = re.compile(r"^(controller|broker)-(\d+)\.yaml$")


@dataclass
class Node:
    name: str
    role: str
    node_id: int
    port: int
    config: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None  # when this process started it

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.config.with_suffix(".pid")


def write_configs(
    data_dir: Path, controllers: int, brokers: int, base_port: int, secure: bool = False
) -> list[Node]:
    """One YAML file per node in `data_dir` (a new cluster); returns the nodes, controllers
    first. `secure`: the files of secure_setup.py in `data_dir`/SECURE_DIR, brokers serving
    SASL_SSL only (clients and replication, the brokers authenticating as
    secure_setup.INTER_BROKER_USER), controllers SSL with client certificates required."""
    data_dir.mkdir(parents=True, exist_ok=True)
    controller_extra: dict[int, str] = {}
    broker_extra: dict[int, str] = {}
    if secure:
        controller_extra, broker_extra = _secure_keys(data_dir, controllers, brokers)
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
            "broker.session.timeout.ms: 6000\n" + topic_defaults + controller_extra.get(n, "")
        )
    for i in range(1, brokers + 1):
        (data_dir / f"broker-{i}.yaml").write_text(
            "process.roles: broker\n"
            f"node.id: {controllers + i}\n"
            f"cluster.id: {cluster_id}\n"
            f"listeners: {'SASL_SSL' if secure else 'PLAINTEXT'}://{HOST}:{base_port + i - 1}\n"
            f'controller.quorum.voters: "{voters}"\n'
            f"log.dirs: {data_dir / f'broker-{i}'}\n"
            "broker.heartbeat.interval.ms: 1000\n"
            + topic_defaults
            + f"offsets.topic.replication.factor: {rf}\n"
            + broker_extra.get(i, "")
        )
        if secure:  # (it holds the broker's password)
            os.chmod(data_dir / f"broker-{i}.yaml", 0o600)
    return load_nodes(data_dir)


SECURE_DIR = "secure"  # under a cluster directory: the files of secure_setup.py


def _secure_keys(
    data_dir: Path, controllers: int, brokers: int
) -> tuple[dict[int, str], dict[int, str]]:
    """The TLS/SASL keys of each controller and broker config (by number), after generating
    the CA, certificates and users."""
    from broker.security import secure_setup

    hosts = (HOST, "localhost")
    names = [f"controller-{n}" for n in range(1, controllers + 1)]
    names += [f"broker-{i}" for i in range(1, brokers + 1)]
    files = secure_setup.generate(data_dir / SECURE_DIR, dict.fromkeys(names, hosts))

    def tls(name: str) -> str:
        return (
            f"ssl.certfile: {files.node_cert(name)}\n"
            f"ssl.keyfile: {files.node_key(name)}\n"
            f"ssl.cafile: {files.ca}\n"
        )

    controller = {
        n: tls(f"controller-{n}")
        + "listener.security.protocol.map: CONTROLLER:SSL\n"
        + "ssl.client.auth: required\n"  # only holders of a node certificate join
        + f"sasl.scram.bootstrap.file: {files.scram_bootstrap}\n"
        for n in range(1, controllers + 1)
    }
    broker = {
        i: tls(f"broker-{i}")
        + "listener.security.protocol.map: SASL_SSL:SASL_SSL,CONTROLLER:SSL\n"
        + "inter.broker.listener.name: SASL_SSL\n"
        + f"sasl.mechanism.inter.broker.protocol: {secure_setup.MECHANISM}\n"
        + f"sasl.inter.broker.username: {secure_setup.INTER_BROKER_USER}\n"
        + f"sasl.inter.broker.password: {files.broker_password}\n"
        + "authorizer.class.name: StandardAuthorizer\n"
        # the admin may do anything; the brokers' own user replicates (CLUSTER_ACTION)
        + f"super.users: User:{secure_setup.ADMIN_USER};User:{secure_setup.INTER_BROKER_USER}\n"
        for i in range(1, brokers + 1)
    }
    return controller, broker


def secure_files(nodes: list[Node]) -> Path | None:
    """The admin's client properties file of a cluster made with `secure` (None: not one)."""
    if not nodes:
        return None
    from broker.security import secure_setup

    files = secure_setup.load(nodes[0].config.parent / SECURE_DIR)
    return files.admin_properties if files is not None else None


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
    return pid if is_node(pid, node) else None


def is_node(pid: int, node: Node) -> bool:
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
