"""A local cluster for the benchmarks (not a benchmark itself): the configs and processes of
`gregor cluster up` (broker/cluster_nodes.py), controllers first, on loopback.

free_base_port() -> P with P.. (brokers) and P+101.. (controllers) free
wait(cond, timeout, what): poll `cond` until truthy (TimeoutError naming `what`)
start(node, timeout=60): spawn one node and wait for its ready line in its log
start_cluster(tmp, controllers, brokers, edit=None) -> (controllers, brokers by node id)
    write the configs (`edit(node, text) -> text` may change each), start the controllers, then
    the brokers, and wait until every broker is registered and unfenced; the caller stops them
    with broker.cluster_nodes.stop_nodes (brokers first).
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from broker.cluster_nodes import (
    Node,
    ephemeral_port_low,
    spawn_node,
    stop_nodes,
    wait_ready,
    write_configs,
)
from client import Admin


def free_base_port() -> int:
    """A port P with P..P+2 and P+101..P+103 free on loopback (checked once; races are rare).
    Probed with SO_REUSEADDR, as the nodes bind: a port left in TIME_WAIT by the connections
    of an earlier cluster is free for them (without it, 50 probes once found no range after
    a 5,000-partition run). P is drawn below the ephemeral port range: a range found free
    inside it could be taken, between the probe and a node's bind seconds later, by the local
    end of any outgoing connection on the machine (the cluster's own controllers connecting
    to each other, other benchmarks' clients); a node then exits at once and the run has no
    figures (the likely cause, not reproduced in 14 starts, of a compare.py round of
    spread_1000_rf3 that reported null after 1.4 s, 2026-11-27)."""
    low = ephemeral_port_low()
    rng = random.Random()
    for _ in range(50):
        base = rng.randrange(10_000, max(10_001, low - 110))
        ok = True
        for p in [base, base + 1, base + 2, base + 101, base + 102, base + 103]:
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port range")


def wait(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = cond()
        except Exception:
            got = None
        if got:
            return got
        time.sleep(0.02)
    raise TimeoutError(what)


def start(node: Node, timeout: float = 60.0) -> None:
    why = wait_ready(node, spawn_node(node), timeout, threading.Event())
    if why is not None:
        raise RuntimeError(f"{node.name} did not start: {why}")


def start_cluster(
    tmp: Path,
    controllers: int,
    brokers: int,
    edit: Callable[[Node, str], str] | None = None,
    timeout: float = 60.0,
) -> tuple[list[Node], dict[int, Node]]:
    if brokers > 3 or controllers > 3:
        raise ValueError("free_base_port() reserves ports for at most 3 brokers, 3 controllers")
    nodes = write_configs(tmp, controllers, brokers, free_base_port())
    if edit is not None:
        for n in nodes:
            n.config.write_text(edit(n, n.config.read_text()))
    ctrl = [n for n in nodes if n.role == "controller"]
    brok = {n.node_id: n for n in nodes if n.role == "broker"}
    bootstrap = ",".join(n.address for n in brok.values())

    def unfenced() -> bool:
        with Admin(bootstrap_servers=bootstrap) as admin:
            return len(admin.describe_cluster().brokers) == brokers

    try:
        offsets = [spawn_node(n) for n in ctrl]
        for n, offset in zip(ctrl, offsets, strict=True):
            why = wait_ready(n, offset, timeout, threading.Event())
            if why is not None:
                raise RuntimeError(f"{n.name} did not start: {why}")
        for n in brok.values():
            start(n, timeout)
        wait(unfenced, timeout, f"{brokers} unfenced brokers")
    except BaseException:
        stop_nodes(list(brok.values()))
        stop_nodes(ctrl)
        raise
    return ctrl, brok
