"""ControllerQuorum: N real `gregor controller` processes on loopback, with kill / pause / restart.

Used through the `controller_quorum` fixture (tests/cluster/conftest.py):

    q = controller_quorum(**{"broker.session.timeout.ms": 600000})   # 3 voters, free ports
    q.start_all()                      # spawn all, wait for each one's "listening" line
    lid = q.wait_leader(5, "a leader") # the node every live, unpaused voter agrees leads
    q.kill(lid) / q.pause(lid) / q.resume(lid) / q.terminate(lid) / q.start(lid) / q.restart(lid)
    q.send_signal(lid, signal.SIGTERM); ...; q.reap(lid)   # act while it stops
    q.call(ApiKey.CREATE_TOPICS, body) # to the active controller, retried on NOT_CONTROLLER
    q.committed(n)                     # node n's committed log: (snapshot image, records, hw)
    q.image(n)                         # node n's committed MetadataImage
    q.start_observer(replica_id)       # RemoteMetadataLog + MetadataLoader (a broker's view)

Every process is started with start_new_session=True (its pid is its process-group id) in a tmp
dir; `close()` SIGKILLs the process groups of the processes this object started — nothing else —
and waits for them, also when the test failed. Waiting is by polling conditions with deadlines
(helpers.wait_until), never by fixed sleeps.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import ssl
import time
from pathlib import Path
from typing import Any

from helpers import GregorProcess, spawn_gregor, wait_until

from broker.cluster_nodes import ephemeral_port_low
from client.errors import ErrorCode
from client.protocol.api_keys import ApiKey
from controller.metadata import MetadataImage, decode_record, load_snapshot, replay_committed
from controller.quorum.loader import MetadataLoader
from controller.quorum.network import request
from controller.quorum.remote_log import RemoteMetadataLog

HOST = "127.0.0.1"


def free_ports(n: int) -> list[int]:
    """n distinct ports free on loopback right now (bound together, then released), drawn
    below the ephemeral range: a port the kernel handed out as free could be taken, between
    now and a node's bind seconds later, by the local end of an outgoing connection (the
    cluster's own controllers connecting to each other), and the node then exits with
    "Address already in use" (a fault scenario's broker did, 2026-11-27). Probed with
    SO_REUSEADDR, as the nodes bind."""
    low = ephemeral_port_low()
    rng = random.Random()
    socks: list[socket.socket] = []
    try:
        for _ in range(50 * n):
            if len(socks) == n:
                break
            port = rng.randrange(10_000, max(10_001, low))
            if any(t.getsockname()[1] == port for t in socks):
                continue
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((HOST, port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        if len(socks) < n:
            raise RuntimeError(f"no {n} free ports below {low}")
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class ControllerQuorum:
    def __init__(
        self, tmp: Path, size: int = 3, data_root: Path | None = None, **overrides: Any
    ) -> None:
        """`data_root`: where the metadata dirs go (default `tmp`; configs and logs stay in
        `tmp`), e.g. a file system that fails on command."""
        self.tmp = tmp
        self.data_root = data_root or tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.ids = list(range(1, size + 1))
        self.ports = dict(zip(self.ids, free_ports(size), strict=True))
        self.voters = ",".join(f"{n}@{HOST}:{p}" for n, p in self.ports.items())
        settings = {
            "controller.quorum.election.timeout.ms": 500,
            # the test's brokers are fake: they do not heartbeat, so they must not be fenced
            "broker.session.timeout.ms": 600_000,
            "log.level": "INFO",
            **overrides,
        }
        self.configs: dict[int, Path] = {}
        for n in self.ids:
            lines = [
                "process.roles: controller",
                f"node.id: {n}",
                f'controller.quorum.voters: "{self.voters}"',
                f"metadata.log.dir: {self.data_root / f'controller-{n}'}",
                *(f"{k}: {v}" for k, v in settings.items()),
            ]
            self.configs[n] = tmp / f"controller-{n}.yaml"
            self.configs[n].write_text("\n".join(lines) + "\n")
        self.procs: dict[int, GregorProcess] = {}  # running (possibly paused)
        self.paused: set[int] = set()
        self.gids: dict[int, int] = {}  # node -> gid to run it with (network faults)
        self._started: list[GregorProcess] = []  # every process this object started
        self._observers: list[tuple[RemoteMetadataLog, MetadataLoader]] = []
        self._runs = 0
        self.tls: ssl.SSLContext | None = None  # the controllers' listener is SSL: how to ask

    def configure_new(self, n: int) -> None:
        """Config of controller n joining the quorum later (`gregor quorum add-controller`):
        node.id outside controller.quorum.voters, a listener of its own; registered here (ids
        are not: the caller adds n once it votes) so start(n) runs it."""
        port = free_ports(1)[0]
        m = min(self.configs)
        template = self.configs[m].read_text()
        self.ports[n] = port
        self.configs[n] = self.tmp / f"controller-{n}.yaml"
        self.configs[n].write_text(
            template.replace(f"node.id: {m}\n", f"node.id: {n}\n").replace(
                f"controller-{m}", f"controller-{n}"
            )
            + f'controller.quorum.listener: "{HOST}:{port}"\n'
        )

    # -- process control -----------------------------------------------------------------------
    def spawn(self, n: int) -> GregorProcess:
        assert n not in self.procs, f"controller {n} is already running"
        self._runs += 1
        gp = spawn_gregor(
            ["controller", "--config", str(self.configs[n])],
            self.data_root / f"controller-{n}",
            self.tmp / f"controller-{n}.run{self._runs}.stderr",
            self.gids.get(n),
        )
        self._started.append(gp)
        self.procs[n] = gp
        return gp

    def start(self, n: int, timeout: float = 15.0) -> GregorProcess:
        gp = self.spawn(n)
        gp.wait_ready(timeout)
        return gp

    def start_all(self, timeout: float = 15.0) -> float:
        """Spawn every voter at once; returns time.monotonic() when the last one listened."""
        gps = [self.spawn(n) for n in self.ids]
        for gp in gps:
            gp.wait_ready(timeout)
        return time.monotonic()

    def send_signal(self, n: int, sig: int) -> None:
        """Send `sig` to node n's process group (it keeps running until reaped)."""
        self._signal(n, sig)

    def reap(self, n: int, timeout: float = 15.0) -> int:
        """Wait for node n to exit (after a signal); returns its exit code."""
        return self._reap(n, timeout)

    def _signal(self, n: int, sig: int) -> None:
        os.killpg(self.procs[n].proc.pid, sig)  # the session leader's pid is its group id

    def kill(self, n: int) -> None:
        """SIGKILL node n's process group and reap it."""
        self._signal(n, signal.SIGKILL)
        self._reap(n)

    def terminate(self, n: int, timeout: float = 15.0) -> int:
        """SIGTERM (clean stop); returns the exit code."""
        if n in self.paused:
            self.resume(n)
        self._signal(n, signal.SIGTERM)
        return self._reap(n, timeout)

    def restart(self, n: int, sig: int = signal.SIGKILL, timeout: float = 15.0) -> GregorProcess:
        """Stop node n with `sig` (SIGKILL: a crash; SIGTERM: a clean stop), start it again."""
        if sig == signal.SIGKILL:
            self.kill(n)
        else:
            self.terminate(n)
        return self.start(n, timeout)

    def pause(self, n: int) -> None:
        self._signal(n, signal.SIGSTOP)
        self.paused.add(n)

    def resume(self, n: int) -> None:
        self._signal(n, signal.SIGCONT)
        self.paused.discard(n)

    def _reap(self, n: int, timeout: float = 15.0) -> int:
        gp = self.procs.pop(n)
        self.paused.discard(n)
        code = gp.proc.wait(timeout)
        gp.close()
        return code

    def start_observer(self, replica_id: int = -1, **kwargs: Any) -> MetadataLoader:
        """A broker-style observer in this process: RemoteMetadataLog (MetadataFetch from the
        active controller) + MetadataLoader; `.image` is its committed image. Closed by close()."""
        log = RemoteMetadataLog(self.voters, replica_id=replica_id, **kwargs)
        loader = MetadataLoader(log)
        loader.start()
        log.start()
        self._observers.append((log, loader))
        return loader

    def close(self) -> None:
        """SIGKILL every process this quorum started that still runs; reap it."""
        for log, loader in self._observers:
            loader.stop()
            log.close()
        self._observers.clear()
        for gp in self._started:
            if gp.proc.poll() is None:
                try:
                    os.killpg(gp.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                gp.proc.wait(15)
            gp.close()
        self.procs.clear()
        self.paused.clear()

    def stderr(self) -> str:
        return "\n".join(
            f"--- controller {n} ---\n{gp.stderr()[-3000:]}" for n, gp in self.procs.items()
        )

    # -- asking the quorum ---------------------------------------------------------------------
    def describe(self, n: int, timeout: float = 1.0) -> dict | None:
        """Node n's own DescribeQuorum answer (role, leader_id, leader_epoch = term, ...)."""
        try:
            return request(
                HOST,
                self.ports[n],
                ApiKey.DESCRIBE_QUORUM,
                {},
                timeout=timeout,
                ssl_context=self.tls,
            )
        except OSError:
            return None

    def leader(self) -> tuple[int, int] | None:
        """(leader id, term) when exactly one live, unpaused node says it leads and a majority of
        the voters agree on it in that term; None otherwise. Paused nodes are not asked (they
        accept connections but never answer)."""
        views = {n: self.describe(n) for n in self.procs if n not in self.paused}
        leaders = [(n, v["leader_epoch"]) for n, v in views.items() if v and v["role"] == "leader"]
        if len(leaders) != 1:
            return None
        lid, term = leaders[0]
        agree = sum(
            1 for v in views.values() if v and v["leader_id"] == lid and v["leader_epoch"] == term
        )
        return (lid, term) if agree > len(self.ids) // 2 else None

    def wait_leader(self, timeout: float, msg: str) -> int:
        return self.wait_leader_term(timeout, msg)[0]

    def wait_leader_term(self, timeout: float, msg: str) -> tuple[int, int]:
        try:
            return wait_until(self.leader, timeout, msg)
        except AssertionError as e:
            views = {n: self.describe(n) for n in self.procs if n not in self.paused}
            raise AssertionError(f"{e}\nviews: {views}\n{self.stderr()}") from None

    def call(self, api_key: int, body: dict, timeout: float = 10.0) -> dict:
        """Send to the active controller; retried (new leader lookup) on NOT_CONTROLLER."""

        def attempt() -> dict | None:
            found = self.leader()
            if found is None:
                return None
            try:
                resp = request(
                    HOST, self.ports[found[0]], api_key, body, timeout=timeout, ssl_context=self.tls
                )
            except OSError:
                return None
            return None if resp.get("error_code") == ErrorCode.NOT_CONTROLLER else resp

        return wait_until(attempt, timeout, f"api {api_key} answered by the active controller")

    def register(self, broker_id: int) -> int:
        """Register a (fake) broker; answered once committed. Returns its broker epoch."""
        resp = self.call(
            ApiKey.BROKER_REGISTRATION,
            {
                "broker_id": broker_id,
                "host": HOST,
                "port": 9000 + broker_id,
                "incarnation_id": f"incarnation-{broker_id}",
            },
        )
        assert resp["error_code"] == 0, resp
        return resp["broker_epoch"]

    def add_brokers(self, *ids: int) -> dict[int, int]:
        """Register and unfence (fake) brokers: each heartbeats once with the committed offset
        of the controller that answered, as a caught-up broker would. Returns {id: epoch}."""
        epochs = {b: self.register(b) for b in ids}
        for b, epoch in epochs.items():
            lid = self.wait_leader(5, "a leader to heartbeat to")
            resp = self.call(
                ApiKey.BROKER_HEARTBEAT,
                {
                    "broker_id": b,
                    "broker_epoch": epoch,
                    "current_metadata_offset": self.high_watermark(lid) - 1,
                },
            )
            assert resp["error_code"] == 0 and not resp["is_fenced"], resp
        return epochs

    def create_topics(self, names: list[str], partitions: int, rf: int) -> None:
        """One CreateTopics request (answered once committed); every topic must succeed."""
        resp = self.call(
            ApiKey.CREATE_TOPICS,
            {
                "topics": [
                    {"name": t, "num_partitions": partitions, "replication_factor": rf}
                    for t in names
                ],
                "timeout_ms": 30_000,
                "validate_only": False,
            },
            timeout=30.0,
        )
        bad = [t for t in resp["topics"] if t["error_code"] != 0]
        assert not bad and len(resp["topics"]) == len(names), bad[:3]

    def committed(self, n: int, batch: int = 10_000) -> tuple[MetadataImage, list, int]:
        """Node n's committed metadata as node n stores it: (the image of its snapshot or EMPTY,
        [(offset, record)] after it, high watermark), read with MetadataFetch from node n."""
        for _ in range(10):  # node n may compact between two fetches: start over
            base, records, ok = MetadataImage.EMPTY, [], True
            offset, hw = 0, 0
            while True:
                resp = request(
                    HOST,
                    self.ports[n],
                    ApiKey.METADATA_FETCH,
                    {"from_offset": offset, "max_records": batch},
                    timeout=10.0,
                )
                if resp["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE and not records:
                    base = load_snapshot(resp["snapshot"])
                    offset = resp["snapshot_offset"] + 1
                    continue
                if resp["error_code"] != 0:
                    ok = False
                    break
                hw = resp["high_watermark"]
                got = [(r["offset"], decode_record(r["record"])) for r in resp["records"]]
                records += got
                if not got:
                    break
                offset = got[-1][0] + 1
            if ok:
                return base, records, hw
        raise AssertionError(f"could not read controller {n}'s committed log")

    def image(self, n: int) -> MetadataImage:
        base, records, _ = self.committed(n)
        return replay_committed(base, records)  # complete atomic batches only

    def high_watermark(self, n: int) -> int:
        """Node n's exclusive end of committed offsets (as its MetadataFetch reports it)."""
        resp = request(
            HOST,
            self.ports[n],
            ApiKey.METADATA_FETCH,
            {"from_offset": 0, "max_records": 1, "include_snapshot": False},
            timeout=5.0,
        )
        return resp["high_watermark"]
