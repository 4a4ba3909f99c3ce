"""Three real `gregor controller` processes on loopback: election, failover, restart.

Records are written with BrokerRegistration (answered only once committed) and read back with
MetadataFetch, so "no committed record lost" is checked on the wire.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from helpers import gregor_command, wait_until

from client.protocol.api_keys import ApiKey
from controller.metadata import MetadataImage, decode_record, load_snapshot, replay
from controller.quorum.network import request
from controller.quorum.remote import RemoteController

pytestmark = pytest.mark.slow


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Quorum:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in self.ports.items())
        self.configs = {}
        for n in self.ports:
            cfg = tmp / f"controller-{n}.yaml"
            cfg.write_text(
                f'node.id: {n}\ncontroller.quorum.voters: "{voters}"\n'
                f"metadata.log.dir: {tmp / f'data-{n}'}\n"
                "controller.quorum.election.timeout.ms: 500\n"
                "metadata.log.max.records.between.snapshots: 2\n"
            )
            self.configs[n] = cfg
        self.procs: dict[int, subprocess.Popen] = {}

    def start(self, n: int) -> None:
        err = open(self.tmp / f"stderr-{n}.log", "ab")  # noqa: SIM115 - closed with the process
        self.procs[n] = subprocess.Popen(
            [*gregor_command(), "controller", "--config", str(self.configs[n])],
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
        )
        err.close()
        line = self.procs[n].stdout.readline().decode()
        assert "listening on" in line, (self.tmp / f"stderr-{n}.log").read_text()

    def kill(self, n: int, sig: int = signal.SIGKILL) -> None:
        p = self.procs.pop(n)
        os.killpg(p.pid, sig)
        p.wait(10)
        p.stdout.close()

    def stop_all(self) -> None:
        for n in list(self.procs):
            self.kill(n, signal.SIGTERM)

    def describe(self, n: int) -> dict | None:
        try:
            return request("127.0.0.1", self.ports[n], ApiKey.DESCRIBE_QUORUM, {}, timeout=1.0)
        except OSError:
            return None

    def leader(self) -> int | None:
        """The node that says it is the leader, with every live node agreeing on it."""
        views = {n: self.describe(n) for n in self.procs}
        leaders = [n for n, v in views.items() if v and v["role"] == "leader"]
        if len(leaders) != 1:
            return None
        lid = leaders[0]
        agree = sum(1 for v in views.values() if v and v["leader_id"] == lid)
        return lid if agree >= 2 else None

    def wait_leader(self, timeout: float, msg: str) -> int:
        try:
            return wait_until(self.leader, timeout, msg)
        except AssertionError as e:
            views = {n: self.describe(n) for n in self.procs}
            logs = {n: (self.tmp / f"stderr-{n}.log").read_text()[-3000:] for n in self.procs}
            raise AssertionError(f"{e}\nviews: {views}\nstderr: {logs}") from None

    def call(self, api_key: int, body: dict) -> dict:
        """Send to whichever node is the active controller (retry on NOT_CONTROLLER)."""

        def attempt():
            lid = self.leader()
            if lid is None:
                return None
            try:
                resp = request("127.0.0.1", self.ports[lid], api_key, body, timeout=2.0)
            except OSError:
                return None
            return resp if resp["error_code"] != 41 else None

        return wait_until(attempt, 10, f"api {api_key} answered by the active controller")

    def image(self, n: int) -> MetadataImage:
        """Node n's committed metadata: its snapshot (if the log was compacted) + records."""

        def fetch(offset: int) -> dict:
            return request(
                "127.0.0.1",
                self.ports[n],
                ApiKey.METADATA_FETCH,
                {"from_offset": offset},
                timeout=2.0,
            )

        for _ in range(10):  # the node may compact again between the two fetches: start over
            resp = fetch(0)
            image = MetadataImage.EMPTY
            if resp["error_code"] == 1:  # OFFSET_OUT_OF_RANGE: start from the snapshot
                image = load_snapshot(resp["snapshot"])
                resp = fetch(resp["snapshot_offset"] + 1)
            if resp["error_code"] == 0:
                break
        assert resp["error_code"] == 0, resp
        image, _ = replay(
            image, [(r["offset"], decode_record(r["record"])) for r in resp["records"]]
        )
        return image

    def registrations(self, n: int) -> dict[int, int]:
        """broker id -> epoch in node n's committed metadata."""
        return {b.broker_id: b.broker_epoch for b in self.image(n).brokers.values()}

    def register(self, broker_id: int) -> int:
        resp = self.call(
            ApiKey.BROKER_REGISTRATION,
            {
                "broker_id": broker_id,
                "host": "127.0.0.1",
                "port": 9000 + broker_id,
                "incarnation_id": f"i{broker_id}",
            },
        )
        assert resp["error_code"] == 0, resp
        return resp["broker_epoch"]


@pytest.fixture
def quorum(tmp_path):
    q = Quorum(tmp_path)
    yield q
    for n in list(q.procs):
        q.kill(n)


def test_election_failover_and_restart(quorum):
    q = quorum
    for n in (1, 2, 3):
        q.start(n)
    t0 = time.monotonic()
    first = q.wait_leader(5, "a leader")
    assert time.monotonic() - t0 < 2.0, "leader elected within 2 s of start"

    epochs = {b: q.register(b) for b in (101, 102, 103)}
    assert q.registrations(first) == epochs
    snap = request("127.0.0.1", q.ports[first], ApiKey.METADATA_FETCH, {"from_offset": 0})
    assert snap["error_code"] == 1 and snap["snapshot_offset"] >= 1, "the log was compacted"

    q.kill(first)
    t1 = time.monotonic()
    second = q.wait_leader(5, "a new leader after SIGKILL")
    took = time.monotonic() - t1
    print(f"failover took {took:.2f}s")
    assert second != first and took < 2.0, f"new leader within 2 s (took {took:.2f}s)"
    # every committed registration survived on the new leader
    wait_until(lambda: q.registrations(second) == epochs, 5, "committed records on the new leader")
    # a RemoteController that still points at the dead leader finds the new one by itself
    voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in q.ports.items())
    rc = RemoteController(voters, request_timeout_ms=10_000)
    rc.tracker.set_leader(first)
    try:
        reg = rc.register_broker(104, "127.0.0.1", 9104, None, "i104").result(15)
    finally:
        rc.close()
    assert reg["error_code"] == 0
    epochs[104] = reg["broker_epoch"]

    q.start(first)  # the old leader rejoins as a follower and catches up
    wait_until(lambda: q.registrations(first) == epochs, 5, "old leader caught up")

    q.stop_all()
    for n in (1, 2, 3):
        q.start(n)
    q.wait_leader(5, "a leader after restarting all three")
    for n in (1, 2, 3):
        wait_until(lambda n=n: q.registrations(n) == epochs, 5, f"state restored on node {n}")
    # and the restored controller keeps serving
    assert q.register(105) > max(epochs.values())


def test_quorum_describe_cli(quorum):
    q = quorum
    for n in (1, 2, 3):
        q.start(n)
    lid = q.wait_leader(5, "a leader")
    out = subprocess.run(
        [
            *gregor_command(),
            "quorum",
            "describe",
            "--bootstrap-controller",
            f"127.0.0.1:{q.ports[(lid % 3) + 1]}",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    import json

    d = json.loads(out.stdout)
    assert d["leader_id"] == lid and d["role"] == "leader"
    assert sorted(v["replica_id"] for v in d["voters"]) == [1, 2, 3]
    text = subprocess.run(
        [
            *gregor_command(),
            "quorum",
            "describe",
            "--bootstrap-controller",
            f"127.0.0.1:{q.ports[lid]}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert text.returncode == 0 and f"LeaderId:        {lid}" in text.stdout
