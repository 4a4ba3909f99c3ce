"""Brokers join a remote controller quorum (issue 11, first step): 3 `gregor controller` and 3
`gregor broker` processes on loopback. Brokers register through the network ControllerChannel,
follow the metadata log as observers, are unfenced once caught up, serve the partitions they
lead (replication factor 1: replication is a later step, so RF > 1 is refused), are fenced when
killed, and rejoin at once when restarted; SIGTERM is a controlled shutdown."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from controller_quorum import HOST, free_ports
from helpers import GregorProcess, poll_n, spawn_gregor, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import InvalidReplicationFactorError

SESSION_MS = 3000


class Brokers:
    def __init__(self, tmp: Path, voters: str, ids: list[int]) -> None:
        self.tmp = tmp
        self.ports = dict(zip(ids, free_ports(len(ids)), strict=True))
        self.configs: dict[int, Path] = {}
        for n, port in self.ports.items():
            self.configs[n] = tmp / f"broker-{n}.yaml"
            self.configs[n].write_text(
                "process.roles: broker\n"
                f"node.id: {n}\n"
                f'controller.quorum.voters: "{voters}"\n'
                f"listeners: PLAINTEXT://{HOST}:{port}\n"
                f"log.dirs: {tmp / f'broker-{n}'}\n"
                "broker.heartbeat.interval.ms: 300\n"
            )
        self.procs: dict[int, GregorProcess] = {}
        self._all: list[GregorProcess] = []

    def start(self, n: int, timeout: float = 30.0) -> GregorProcess:
        gp = spawn_gregor(
            ["broker", "--config", str(self.configs[n])],
            self.tmp / f"broker-{n}",
            self.tmp / f"broker-{n}.{len(self._all)}.stderr",
        )
        self._all.append(gp)
        self.procs[n] = gp
        gp.wait_ready(timeout)
        return gp

    def stop(self, n: int, sig: int) -> int:
        gp = self.procs.pop(n)
        os.killpg(gp.proc.pid, sig)
        return gp.proc.wait(30)

    def bootstrap(self, n: int) -> str:
        return f"{HOST}:{self.ports[n]}"

    def close(self) -> None:
        for gp in self._all:
            if gp.proc.poll() is None:
                os.killpg(gp.proc.pid, signal.SIGKILL)
                gp.proc.wait(10)
            gp.close()


@pytest.fixture
def cluster(controller_quorum, tmp_path):
    q = controller_quorum(**{"broker.session.timeout.ms": SESSION_MS})
    q.start_all()
    q.wait_leader(10, "a controller leader")
    (tmp_path / "brokers").mkdir()
    b = Brokers(tmp_path / "brokers", q.voters, [4, 5, 6])
    try:
        for n in (4, 5, 6):
            b.start(n)
        yield q, b
    finally:
        b.close()


def _brokers(bootstrap: str) -> set[int]:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return {x.node_id for x in admin.describe_cluster().brokers}


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return {p.partition: p.leader for p in admin.describe_topic(topic).partitions}


@pytest.mark.slow
def test_brokers_join_serve_fail_and_rejoin(cluster) -> None:
    q, b = cluster
    wait_until(lambda: _brokers(b.bootstrap(4)) == {4, 5, 6}, 20, "3 unfenced brokers")
    with Admin(bootstrap_servers=b.bootstrap(4)) as admin:
        admin.create_topic("spread", partitions=6)
        with pytest.raises(InvalidReplicationFactorError, match="not supported yet"):
            admin.create_topic("replicated", partitions=1, replication_factor=3)
    leaders = wait_until(
        lambda: (lambda m: m if all(v >= 0 for v in m.values()) else None)(
            _leaders(b.bootstrap(5), "spread")
        ),
        20,
        "leaders for every partition",
    )
    assert set(leaders.values()) == {4, 5, 6}  # spread over the three brokers
    values = [b"v%04d" % i for i in range(3000)]
    with Producer(bootstrap_servers=b.bootstrap(4), linger_ms=5) as p:
        for i, v in enumerate(values):
            p.send("spread", v, partition=i % 6)
        p.flush(60)
    tps = [TopicPartition("spread", i) for i in range(6)]
    with Consumer(bootstrap_servers=b.bootstrap(6)) as c:
        c.assign(tps)
        assert sorted(r.value for r in poll_n(c, 3000, timeout=60)) == values

    # SIGKILL broker 5: fenced after the session timeout, its partitions offline
    mine = [p for p, leader in leaders.items() if leader == 5]
    b.stop(5, signal.SIGKILL)
    t0 = time.monotonic()
    wait_until(lambda: _brokers(b.bootstrap(4)) == {4, 6}, 20, "broker 5 fenced")
    assert time.monotonic() - t0 < SESSION_MS / 1000 + 10
    assert all(_leaders(b.bootstrap(4), "spread")[p] == -1 for p in mine)

    # restarted: a new incarnation registers at once and leads its partitions again
    b.start(5)
    wait_until(
        lambda: all(_leaders(b.bootstrap(4), "spread")[p] == 5 for p in mine), 20, "5 leads again"
    )
    with Consumer(bootstrap_servers=b.bootstrap(5)) as c:
        c.assign([TopicPartition("spread", p) for p in mine])
        assert len(poll_n(c, 500 * len(mine), timeout=60)) == 500 * len(mine)

    # SIGTERM broker 6: a controlled shutdown fences it at once, not after the session timeout
    assert b.stop(6, signal.SIGTERM) == 0
    wait_until(lambda: _brokers(b.bootstrap(4)) == {4, 5}, SESSION_MS / 1000 - 0.5, "6 fenced")
