"""A replica that fails after its topic was created (the after-the-fact path of issue 15): a real
`gregor controller` and `gregor broker`. The broker is paused while the controller creates a
topic on it (its last heartbeat said it could take new replicas), and its open-files limit is
lowered under what it has open (prlimit) before it resumes: creating the replicas fails with
EMFILE. The broker reports them (failed_replicas: leaderless, their only replica failed) and
that it cannot take new replicas (a further create is refused); a produce to them is refused
with an error naming the limit and the key; once the limit is back the broker creates them,
they are led and writable, and creation works again."""

from __future__ import annotations

import resource

import pytest
from broker_cluster import Brokers
from controller_quorum import HOST
from helpers import RawClient, wait_until

from client.errors import ErrorCode
from client.protocol import ApiKey
from client.records import build_batch

LOW = 16  # under what the broker has open: no new descriptor at all


def _create_body(name: str, n: int, validate_only: bool = False) -> dict:
    return {
        "topics": [
            {
                "name": name,
                "num_partitions": n,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout_ms": 30_000,
        "validate_only": validate_only,
    }


def _leaders(c: RawClient, topic: str) -> dict[int, int]:
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    [t] = c.request(ApiKey.METADATA, 0, body)["topics"]
    return {p["partition"]: p["leader_id"] for p in t["partitions"]}


def _produce(c: RawClient, topic: str, partitions: range) -> list[dict]:
    body = {
        "acks": -1,
        "timeout_ms": 30_000,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition": p, "records": build_batch([(None, b"x")])} for p in partitions
                ],
            }
        ],
    }
    return c.request(ApiKey.PRODUCE, 0, body)["topics"][0]["partitions"]


@pytest.mark.slow
def test_a_replica_that_fails_after_its_topic_was_created(controller_quorum, tmp_path):
    q = controller_quorum(1, **{"broker.session.timeout.ms": 20_000})
    q.start_all()
    q.wait_leader(10, "a controller leader")
    (tmp_path / "brokers").mkdir()
    b = Brokers(tmp_path / "brokers", q.voters, [4])
    try:
        pid = b.start(4).proc.pid
        with RawClient((HOST, b.ports[4]), timeout=30) as c:
            t = c.request(ApiKey.CREATE_TOPICS, 0, _create_body("early", 1))["topics"][0]
            assert t["error_code"] == 0, t
            wait_until(lambda: _leaders(c, "early") == {0: 4}, 30, "early led")

            b.pause(4)  # the controller still counts broker 4 as able to take replicas ...
            [t] = q.call(ApiKey.CREATE_TOPICS, _create_body("gap", 2))["topics"]
            assert t["error_code"] == 0, t
            soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (LOW, hard))  # ... but it cannot
            b.resume(4)

            # the broker reports the replicas it could not create: leaderless
            wait_until(lambda: _leaders(c, "gap") == {0: -1, 1: -1}, 30, "gap leaderless")
            for p in _produce(c, "gap", range(2)):  # refused, naming the limit and the key
                assert p["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER, p
                assert f"open-files limit {LOW}" in (p["error_message"] or ""), p
                assert "log.max.open.files" in p["error_message"], p

            # ... and that it cannot take new replicas: the controller refuses a new topic
            def refused() -> dict | None:
                [r] = q.call(ApiKey.CREATE_TOPICS, _create_body("more", 1, True))["topics"]
                return r if r["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR else None

            r = wait_until(refused, 30, "creation refused")
            assert "broker 4: out of file descriptors" in r["error_message"], r
            assert f"open-files limit {LOW}" in r["error_message"], r

            resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))  # descriptors back
            wait_until(lambda: _leaders(c, "gap") == {0: 4, 1: 4}, 60, "gap led")
            wait_until(
                lambda: all(p["error_code"] == 0 for p in _produce(c, "gap", range(2))),
                30,
                "gap writable",
            )

            def created() -> bool:
                [r] = q.call(ApiKey.CREATE_TOPICS, _create_body("more", 1))["topics"]
                return r["error_code"] == 0

            wait_until(created, 30, "creation accepted again")
            wait_until(lambda: _leaders(c, "more") == {0: 4}, 30, "more led")
            assert _produce(c, "early", range(1))[0]["error_code"] == 0
        assert "OFFLINE" not in b.stderr()
    except BaseException:
        print(b.stderr())
        raise
    finally:
        b.close()
