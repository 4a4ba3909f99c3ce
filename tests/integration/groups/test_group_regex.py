"""Regex subscription (KIP-848: resolved by the coordinator): a group member subscribed to
re.compile("re-.*") gets the partitions of the matching topics only, and a matching topic
created later joins its assignment and is read; against a `gregor server` process."""

from __future__ import annotations

import re

import pytest
from helpers import RawClient, wait_until

from client import Admin, Consumer, Producer
from client.errors import ConfigError, ErrorCode


@pytest.fixture
def server(gregor_process):
    return gregor_process(
        "--override", "offsets.topic.num.partitions=2",
        "--override", "group.consumer.heartbeat.interval.ms=200",
    )  # fmt: skip


def test_pattern_subscription_follows_new_topics(server) -> None:
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("re-a", partitions=2)
        admin.create_topic("other", partitions=1)
        with Consumer(bootstrap_servers=server.bootstrap, group_id="rx",
                      auto_offset_reset="earliest") as c:  # fmt: skip
            c.subscribe(re.compile(r"re-.*"))

            def owned() -> set:
                c.poll(50)
                return {(tp.topic, tp.partition) for tp in c.assignment()}

            wait_until(lambda: owned() == {("re-a", 0), ("re-a", 1)}, 60, "re-a's partitions")
            admin.create_topic("re-b", partitions=1)
            with Producer(bootstrap_servers=server.bootstrap) as p:
                p.send("re-b", b"new topic", partition=0).result(30)
                p.send("other", b"not matched", partition=0).result(30)
            got: list = []

            def read_new() -> bool:
                got.extend(r.value for r in c.poll(100))
                return b"new topic" in got

            wait_until(read_new, 60, "the record of the topic created later")
            assert b"not matched" not in got
            assert c.subscription() == {"re-a", "re-b"}
            desc = admin.describe_group("rx")
            assert desc.members[0].subscribed_topics == ["re-a", "re-b"]


def test_bad_patterns_are_refused(server) -> None:
    with Consumer(bootstrap_servers=server.bootstrap) as c:
        with pytest.raises(ConfigError, match="needs a group_id"):
            c.subscribe(re.compile("x.*"))
    # (re.compile refuses a bad pattern in the client already; a raw heartbeat gets
    # INVALID_REQUEST naming it)
    with RawClient(server.address, timeout=30) as raw:
        find = {"key_type": 0, "coordinator_keys": ["bad"]}
        wait_until(
            lambda: raw.request(10, 0, find)["coordinators"][0]["error_code"] == 0,
            60, "a coordinator",
        )  # fmt: skip
        body = {"group_id": "bad", "member_id": "m", "member_epoch": 0,
                "subscribed_topic_regex": "(unclosed"}  # fmt: skip

        def answer() -> dict | None:
            r = raw.request(68, 0, body)
            return r if r["error_code"] != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else None

        r = wait_until(answer, 30, "the heartbeat's answer")
        assert r["error_code"] == ErrorCode.INVALID_REQUEST
        assert "(unclosed" in r["error_message"]
