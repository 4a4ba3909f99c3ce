"""Admin.describe_quorum() against a combined server (its one-voter quorum, served on the
client port), in the sync facade and in client.aio; and a clean timeout when nothing answers."""

from __future__ import annotations

import asyncio
import socket

import pytest
from helpers import returns_within

from client import Admin
from client import aio as client_aio
from client.aio.admin_quorum import QuorumDescription, QuorumReplica
from client.errors import GregorTimeoutError, UnsupportedVersionError


def test_describe_quorum_of_a_combined_server(broker_server) -> None:
    cc = broker_server.server.node.quorum.controller
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        before = admin.describe_quorum()
        assert isinstance(before, QuorumDescription)
        assert before.leader_id == 1 and before.leader_epoch == cc.log.node.term >= 1
        assert before.observers == []
        assert [v.replica_id for v in before.voters] == [1]
        assert before.voters[0].lag == 0 and before.voters[0].last_contact_ms == 0
        admin.create_topic("quorum-grows", partitions=3)
        after = admin.describe_quorum()
    # the topic's records were committed through the one-voter quorum
    assert after.high_watermark > before.high_watermark
    assert after.high_watermark == cc.log.committed_offset() + 1
    assert after.voters == [QuorumReplica(1, after.high_watermark, 0, 0)]

    async def via_aio() -> QuorumDescription:
        async with client_aio.Admin(bootstrap_servers=broker_server.bootstrap) as a:
            return await a.describe_quorum()

    assert asyncio.run(via_aio()) == after


def test_describe_quorum_times_out_when_nothing_listens() -> None:
    with socket.socket() as s:  # a free port, closed again: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Admin(
        bootstrap_servers=f"127.0.0.1:{port}", retry_backoff_ms=20, request_timeout_ms=600_000
    ) as admin:
        with pytest.raises(GregorTimeoutError, match="no quorum leader.*cannot connect"):
            # timeout_ms bounds the call, not request.timeout.ms (10 min here)
            returns_within(
                lambda: admin.describe_quorum(timeout_ms=300), 60, "describe_quorum(timeout_ms=300)"
            )


def test_describe_quorum_of_a_server_without_a_controller(broker_factory) -> None:
    """A process without a controller answers UNSUPPORTED_VERSION: raised at once, not retried."""
    from broker.server import NetworkOnlyNode

    broker = broker_factory(node_factory=NetworkOnlyNode)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        with pytest.raises(UnsupportedVersionError):
            admin.describe_quorum(timeout_ms=5000)
