"""Metadata answers from a real broker: sent without the schema walk (respond_raw), so what
goes on the wire must already be exactly what the schema check returns; and the per-topic
answers the broker keeps between requests follow every change of the topic."""

from __future__ import annotations

from helpers import RawClient, wait_until

from client import Admin
from client.errors import ErrorCode
from client.protocol import API_SPECS, ApiKey

SPEC = API_SPECS[ApiKey.METADATA]


def _metadata(c: RawClient, topics: list[str] | None) -> dict:
    body = {"topics": None if topics is None else [{"name": t} for t in topics]}
    return c.request(ApiKey.METADATA, 0, body)


def _partitions(body: dict, name: str) -> list[tuple[int, int]]:
    (t,) = [t for t in body["topics"] if t["name"] == name]
    return [(p["partition"], p["leader_id"]) for p in t["partitions"]]


def test_metadata_answers_need_no_schema_fill_and_follow_topic_changes(broker_server) -> None:
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        admin.create_topic("m", partitions=2)
        admin.create_topic("n", partitions=1)
    with RawClient(broker_server.address) as c:
        wait_until(lambda: all(p[1] >= 0 for p in _partitions(_metadata(c, None), "m")), 10, "led")
        for topics in (None, ["m"], ["m", "absent"]):
            body = _metadata(c, topics)
            for version in range(SPEC.min_version, SPEC.max_version + 1):
                assert SPEC.check_response(body, version) == body  # nothing filled or refused
        absent = [t for t in body["topics"] if t["name"] == "absent"]
        assert absent[0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _partitions(_metadata(c, ["m"]), "m") == [(0, 1), (1, 1)]  # (kept answer)
        with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
            admin.create_partitions("m", 4)
        wait_until(lambda: len(_partitions(_metadata(c, ["m"]), "m")) == 4, 10, "m grown")
        assert [p for p, _ in _partitions(_metadata(c, None), "m")] == [0, 1, 2, 3]
        assert _partitions(_metadata(c, ["n"]), "n") == [(0, 1)]
        with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
            admin.delete_topic("n")
        wait_until(
            lambda: (
                _metadata(c, ["n"])["topics"][0]["error_code"]
                == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ),
            10,
            "n deleted",
        )


def _topic_id(c: RawClient, name: str) -> str | None:
    (t,) = [t for t in _metadata(c, [name])["topics"] if t["name"] == name]
    return t["topic_id"]


def test_metadata_tells_topic_ids_and_a_recreated_topic_gets_a_new_one(broker_server) -> None:
    bs = broker_server.bootstrap
    with Admin(bootstrap_servers=bs) as admin, RawClient(broker_server.address) as c:
        admin.create_topic("ids", partitions=1)
        first = admin.describe_topic("ids").topic_id
        assert first is not None and len(first) == 22  # Kafka's text form of 16 bytes
        assert _topic_id(c, "ids") == first
        assert _topic_id(c, "ids-absent") is None  # unknown topic: no id
        admin.delete_topic("ids")
        admin.create_topic("ids", partitions=1)
        second = admin.describe_topic("ids").topic_id
        assert second is not None and second != first
        assert _topic_id(c, "ids") == second
