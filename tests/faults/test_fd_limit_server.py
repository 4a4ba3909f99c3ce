"""Many partitions under a low open-files limit: a real `gregor server` started with
RLIMIT_NOFILE 1,024 serves 1,200 partitions (3 files each, 3,600 files), keeps its descriptors
under the limit, and when its descriptors are used up (by client sockets) it tells the
controller it cannot take new replicas, so the creation of a new topic is refused (CreateTopics
and the Admin client) with an error naming the broker, the limit and the keys, and nothing is
created; it keeps serving every earlier partition, creates the topic once descriptors come back,
and restarts on its data dir after a clean stop and after SIGKILL. (A replica that fails after
its topic was created: tests/cluster/test_fd_limit_failed_replica.py.)"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from helpers import GregorProcess, RawClient, gregor_command, wait_until

from client import Admin
from client.errors import ErrorCode, InvalidReplicationFactorError
from client.protocol import ApiKey
from client.records import build_batch, decode_records

LIMIT = 1024
TOPICS = 12
PARTITIONS = 100  # 1,200 partitions in all
# what the controller logs when a broker starts / stops reporting it cannot take new replicas
CANNOT = "broker 1 cannot take new replicas"
CAN_AGAIN = "broker 1 can take new replicas again"


def _spawn(data: Path, stderr_path: Path) -> GregorProcess:
    def lower_limit() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, hard))

    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    err = open(stderr_path, "ab")  # noqa: SIM115 - closed by GregorProcess.close()
    proc = subprocess.Popen(
        [*gregor_command(), "server", "--port", "0", "--data-dir", str(data)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=err,
        env=env,
        start_new_session=True,
        preexec_fn=lower_limit,
    )
    gp = GregorProcess(proc, data, stderr_path, err)
    gp.wait_ready(120)
    return gp


def _stop(gp: GregorProcess, sig: int) -> None:
    try:
        gp.stop(sig, 120)  # (a stop that hangs fails with the server's threads' stacks)
    finally:
        gp.close()


def _fds(gp: GregorProcess) -> int:
    return sum(1 for _ in Path(f"/proc/{gp.proc.pid}/fd").iterdir())


def _create(c: RawClient, name: str, n: int) -> dict:
    body = {
        "topics": [{"name": name, "num_partitions": n, "replication_factor": 1}],
        "timeout_ms": 30_000,
        "validate_only": False,
    }
    return c.request(ApiKey.CREATE_TOPICS, 0, body)["topics"][0]


def _produce(c: RawClient, topic: str, partitions: range, value: bytes) -> list[dict]:
    records = build_batch([(None, value)])
    body = {
        "acks": -1,
        "timeout_ms": 30_000,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition": p, "records": records} for p in partitions],
            }
        ],
    }
    return c.request(ApiKey.PRODUCE, 0, body)["topics"][0]["partitions"]


def _values(c: RawClient, topic: str, partition: int) -> list[bytes]:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
    }
    p = c.request(ApiKey.FETCH, 0, body)["topics"][0]["partitions"][0]
    assert p["error_code"] == 0, p
    return [r.value for r in decode_records(p["records"])] if p["records"] else []


def _topic_error(c: RawClient, topic: str) -> int:
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    [t] = c.request(ApiKey.METADATA, 0, body)["topics"]
    return t["error_code"]


def _leaders(c: RawClient, topic: str) -> dict[int, int]:
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    [t] = c.request(ApiKey.METADATA, 0, body)["topics"]
    return {p["partition"]: p["leader_id"] for p in t["partitions"]}


@pytest.mark.slow
def test_low_fd_limit_many_partitions_refuse_serve_restart(tmp_path):
    data = tmp_path / "data"
    gp = _spawn(data, tmp_path / "gregor.stderr")
    hog: list[socket.socket] = []
    try:
        assert "file handle budget: 512 open segment files" in gp.stderr()
        with RawClient(gp.address, timeout=60) as c, Admin(bootstrap_servers=gp.bootstrap) as admin:
            assert admin.list_topics() == []  # (connected before the descriptors run out)
            for i in range(TOPICS):
                assert _create(c, f"t{i}", PARTITIONS)["error_code"] == 0
            for i in range(TOPICS):  # every partition gets a leader and takes a write
                wait_until(lambda i=i: len(_leaders(c, f"t{i}")) == PARTITIONS, 60, f"t{i} up")
                for p in _produce(c, f"t{i}", range(PARTITIONS), b"first"):
                    assert p["error_code"] == 0, p
            assert _fds(gp) < LIMIT - 64, _fds(gp)  # bounded by the budget, not 3 per partition

            # Use up the server's descriptors with client connections (the acceptor backs off
            # when it runs out: it must not spin, and the server must stay up).
            told = gp.stderr().count(CANNOT)
            spare = LIMIT - _fds(gp) + 8
            for _ in range(spare):
                s = socket.create_connection(gp.address, timeout=10)
                hog.append(s)
            wait_until(lambda: _fds(gp) >= LIMIT - 2, 30, "server out of descriptors")
            # the broker's next heartbeat tells the controller it cannot take new replicas ...
            wait_until(lambda: gp.stderr().count(CANNOT) > told, 30, "the controller told")
            # ... so a new topic is refused, naming the broker, the limit and the keys
            t = _create(c, "late", 4)
            assert t["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR, t
            msg = t["error_message"] or ""
            assert "broker 1: out of file descriptors" in msg, msg
            assert "open-files limit 1024" in msg and "ulimit -n" in msg, msg
            assert "log.max.open.files" in msg, msg
            with pytest.raises(InvalidReplicationFactorError, match="open-files limit 1024"):
                admin.create_topic("late", 4)
            assert _topic_error(c, "late") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # not created
            # every earlier partition keeps serving meanwhile (idle descriptors are given back)
            for i in range(TOPICS):
                for p in _produce(c, f"t{i}", range(PARTITIONS), b"second"):
                    assert p["error_code"] == 0, p
            assert gp.proc.poll() is None
            assert "OFFLINE" not in gp.stderr()

            healed = gp.stderr().count(CAN_AGAIN)
            for s in hog:  # descriptors come back: the broker says so, the create succeeds
                s.close()
            hog.clear()
            wait_until(lambda: gp.stderr().count(CAN_AGAIN) > healed, 30, "the controller told")
            assert _create(c, "late", 4)["error_code"] == 0
            wait_until(lambda: set(_leaders(c, "late").values()) == {1}, 60, "late partitions led")
            for p in _produce(c, "late", range(4), b"y"):
                assert p["error_code"] == 0, p
            for i in range(0, TOPICS, 5):
                assert _values(c, f"t{i}", PARTITIONS - 1) == [b"first", b"second"]

        _stop(gp, signal.SIGTERM)  # a clean stop, then a restart on the same data dir
        t0 = time.monotonic()
        gp = _spawn(data, tmp_path / "gregor.stderr")
        clean_s = time.monotonic() - t0
        with RawClient(gp.address, timeout=60) as c:
            wait_until(lambda: len(_leaders(c, "t11")) == PARTITIONS, 60, "t11 after restart")
            assert _values(c, "t11", 7) == [b"first", b"second"]
            assert _fds(gp) < LIMIT - 64

        _stop(gp, signal.SIGKILL)  # and after a crash
        t0 = time.monotonic()
        gp = _spawn(data, tmp_path / "gregor.stderr")
        unclean_s = time.monotonic() - t0
        with RawClient(gp.address, timeout=60) as c:
            wait_until(lambda: 1 in _leaders(c, "t0").values(), 60, "t0 after SIGKILL")
            assert _values(c, "t0", 3) == [b"first", b"second"]
            assert _values(c, "late", 2) == [b"y"]
        print(f"restart clean {clean_s:.2f}s, after SIGKILL {unclean_s:.2f}s")
    finally:
        for s in hog:
            s.close()
        _stop(gp, signal.SIGKILL)
