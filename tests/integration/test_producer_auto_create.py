"""Producing to a topic that does not exist (issue 10, item 3).

The producer's Metadata requests allow auto-creation, as Kafka's do, so with the broker's
`auto.create.topics.enable` (default true) the first send creates the topic; with it off the
send fails fast with UNKNOWN_TOPIC_OR_PARTITION naming the topic, instead of waiting 60 s
(max.block.ms) for a topic that will never come.
"""

from __future__ import annotations

import subprocess

import pytest
from helpers import gregor_command, returns_within

from client import Producer, RecordMetadata
from client.errors import UnknownTopicOrPartitionError


def test_send_creates_a_missing_topic(broker_server) -> None:

    def send() -> RecordMetadata:
        with Producer(bootstrap_servers=broker_server.bootstrap, max_block_ms=600_000) as p:
            return p.send("fresh", b"v").result(600)

    # no wait of max.block.ms (10 min here) for the metadata
    md = returns_within(send, 60, "send() to a missing topic")
    assert (md.topic, md.partition, md.offset) == ("fresh", 0, 0)
    assert "fresh" in broker_server.server.services.metadata.topics


def test_send_fails_fast_when_the_broker_does_not_create_topics(broker_factory) -> None:
    broker = broker_factory(**{"auto.create.topics.enable": False})

    def send() -> None:
        with Producer(bootstrap_servers=broker.bootstrap, max_block_ms=600_000) as p:
            p.send("missing", b"v").result(600)

    with pytest.raises(UnknownTopicOrPartitionError, match="'missing'.*auto.create"):
        # at once, not after max.block.ms (10 min here)
        returns_within(send, 60, "send() to a topic the broker does not create")
    assert "missing" not in broker.server.services.metadata.topics


def test_cli_produce_to_a_new_topic(gregor_process) -> None:
    gp = gregor_process()
    r = subprocess.run(
        [*gregor_command(), "produce", "newtopic", "--bootstrap-server", gp.bootstrap],
        input="hi\n",
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert r.returncode == 0, r.stderr
