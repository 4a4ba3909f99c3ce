"""Admin's `describe_quorum()` (Kafka's `Admin.describeMetadataQuorum`): DescribeQuorum (55) to
the bootstrap server, followed to the quorum leader a follower names, with back-off while no
leader is known.

Loop-owned: runs on the admin's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from client.aio.admin_settings import AdminSettings
from client.aio.cluster import ClusterClient
from client.aio.connection import BrokerConnection
from client.errors import ConnectionFailedError, GregorTimeoutError, error_for_code
from client.protocol import ApiKey


@dataclass(frozen=True, slots=True)
class QuorumReplica:
    """One voter or observer of the metadata quorum as the leader sees it. `log_end_offset`
    is the exclusive end of its log (the next offset it needs); `lag` = high watermark -
    log end offset, floored at 0 (committed records it does not have yet);
    `last_contact_ms`: ms since the leader last heard from it (-1: not in this term)."""

    replica_id: int
    log_end_offset: int
    lag: int
    last_contact_ms: int


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """DescribeQuorum from the active controller: `leader_epoch` is the Raft term,
    `high_watermark` the exclusive end of the committed metadata offsets."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[QuorumReplica]
    observers: list[QuorumReplica]


def quorum_description(resp: Mapping[str, Any]) -> QuorumDescription:
    hw = resp["high_watermark"]

    def replica(r: Mapping[str, Any]) -> QuorumReplica:
        leo = r["log_end_offset"]
        return QuorumReplica(r["replica_id"], leo, max(0, hw - leo), r["last_contact_ms"])

    return QuorumDescription(
        resp["leader_id"],
        resp["leader_epoch"],
        hw,
        [replica(r) for r in resp["voters"]],
        [replica(r) for r in resp["observers"]],
    )


async def describe_quorum(
    cluster: ClusterClient, cfg: AdminSettings, timeout: int
) -> QuorumDescription:
    """See Admin.describe_quorum; `cfg` is the admin's settings, `timeout` in ms."""
    deadline = time.monotonic() + timeout / 1000
    delay = cfg.retry_backoff_ms / 1000
    last = "no answer"
    while True:
        remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            resp = await cluster.send_any(ApiKey.DESCRIBE_QUORUM, {}, timeout_ms=remaining_ms)
            if resp["error_code"]:
                raise error_for_code(resp["error_code"])("DescribeQuorum")
            endpoint = resp.get("leader_endpoint")
            if resp["role"] != "leader" and endpoint:
                resp = await _ask_quorum_at(cfg, endpoint, remaining_ms)
            if resp["role"] == "leader":
                return quorum_description(resp)
            last = f"node {resp['node_id']} is {resp['role']}, leader {resp['leader_id']}"
        except (ConnectionFailedError, GregorTimeoutError) as exc:
            last = str(exc)
        if time.monotonic() + delay > deadline:
            raise GregorTimeoutError(
                f"DescribeQuorum: no quorum leader answered within {timeout} ms ({last})"
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def _ask_quorum_at(cfg: AdminSettings, endpoint: str, timeout_ms: int) -> dict[str, Any]:
    """DescribeQuorum to `endpoint` ("host:port") on a connection opened for it."""
    host, _, port = endpoint.rpartition(":")
    conn = BrokerConnection(
        host.strip("[]"),
        int(port),
        client_id=cfg.client_id,
        request_timeout_ms=cfg.request_timeout_ms,
        connect_timeout_ms=cfg.socket_connection_setup_timeout_ms,
        max_frame_bytes=cfg.max_response_bytes,
        # a controller's listener is PLAINTEXT or SSL (never SASL): TLS if the client has it
        ssl=cfg.ssl_context,
    )
    try:
        await conn.connect()
        resp = await conn.request(ApiKey.DESCRIBE_QUORUM, {}, timeout_ms=timeout_ms)
    finally:
        conn.close()
    assert resp is not None
    if resp["error_code"]:
        raise error_for_code(resp["error_code"])(f"DescribeQuorum to {endpoint}")
    return resp
