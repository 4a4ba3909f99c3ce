"""Controller quorum membership on a controller process: AddRaftVoter (80) / RemoveRaftVoter (81)
handlers, and the peer addresses the Raft transport must reach as the membership changes.

A handler drives `RaftMetadataLog.change_membership` once per Raft tick until the change is
committed (answer NONE), this controller stops leading (NOT_CONTROLLER with the leader hint, from
ControllerServer), the request's `timeout_ms` passes (REQUEST_TIMED_OUT, naming what the change
waits for: the change is kept and the same request completes it later), or the change is
impossible (INVALID_REQUEST, e.g. removing the last voter).

Peers: the bootstrap voters of `controller.quorum.voters` (the addresses a joining controller
starts from) plus every member of the membership in force, at the endpoint it records.

Threading: everything runs on the controller thread's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from client.errors import ErrorCode
from client.protocol.body import Body
from controller.quorum.raft_log import RaftMetadataLog
from controller.raft.membership import Membership, MembershipError

_log = logging.getLogger(__name__)

MAX_TIMEOUT_MS = 10 * 60 * 1000


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """ "host:port" (or "[v6]:port") → (host, port); ValueError otherwise."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ValueError(f"bad controller endpoint {endpoint!r}, expected HOST:PORT")
    return host.strip("[]"), int(port)


def own_address(
    node_id: int, voters: dict[int, tuple[str, int]], listener: str | None
) -> tuple[str, int]:
    """Where this controller listens: its `controller.quorum.voters` entry, else (a controller
    that joins a running quorum) `controller.quorum.listener`. ValueError when neither says."""
    mine = voters.get(node_id)
    if listener:
        addr = parse_endpoint(listener)
        if mine is not None and addr != mine:
            raise ValueError(
                f"controller.quorum.listener {listener} differs from node {node_id}'s entry in"
                f" controller.quorum.voters ({mine[0]}:{mine[1]})"
            )
        return addr
    if mine is None:
        raise ValueError(
            f"node.id {node_id} is not in controller.quorum.voters: a controller that joins a"
            " running quorum (gregor quorum add-controller) needs controller.quorum.listener"
            " HOST:PORT"
        )
    return mine


class MembershipService:
    def __init__(
        self,
        log: RaftMetadataLog,
        static_voters: dict[int, tuple[str, int]],
        set_peers: Callable[[dict[int, tuple[str, int]]], None],
    ) -> None:
        self.log = log
        self.node_id = log.node_id
        self.static_voters = dict(static_voters)
        self.set_peers = set_peers
        self._prefix = f"[controller={self.node_id}]"

    # -- peers ---------------------------------------------------------------------------------
    def peers(self) -> dict[int, tuple[str, int]]:
        out = dict(self.static_voters)
        cfg = self.log.node.config
        for nid, ep in {**cfg.learners, **cfg.voters}.items():
            if ep:
                try:
                    out[nid] = parse_endpoint(ep)
                except ValueError:
                    _log.warning("%s member %d has a bad endpoint %r", self._prefix, nid, ep)
        out.pop(self.node_id, None)
        return out

    def on_membership(self, m: Membership) -> None:
        _log.info(
            "%s controller membership: voters %s, learners %s",
            self._prefix,
            sorted(m.voters),
            sorted(m.learners),
        )
        self.set_peers(self.peers())

    def endpoint_of(self, node_id: int) -> str | None:
        ep = self.log.node.config.endpoint(node_id)
        if ep:
            return ep
        addr = self.static_voters.get(node_id)
        return None if addr is None else f"{addr[0]}:{addr[1]}"

    # -- handlers ------------------------------------------------------------------------------
    async def add_raft_voter(self, body: Body) -> Body:
        voter_id, endpoint = body["voter_id"], body["endpoint"]
        if voter_id < 0:
            return _error(ErrorCode.INVALID_REQUEST, f"voter_id {voter_id} is negative")
        try:
            parse_endpoint(endpoint)
        except ValueError as e:
            return _error(ErrorCode.INVALID_REQUEST, str(e))
        return await self._drive("add", voter_id, endpoint, body["timeout_ms"])

    async def remove_raft_voter(self, body: Body) -> Body:
        return await self._drive("remove", body["voter_id"], "", body["timeout_ms"])

    async def _drive(self, op: str, voter_id: int, endpoint: str, timeout_ms: int) -> Body:
        """Step the change each tick until it is committed (NotControllerError propagates)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(timeout_ms, 0), MAX_TIMEOUT_MS) / 1000.0
        _log.info("%s %s controller %d %s", self._prefix, op, voter_id, endpoint)
        while True:
            try:
                if self.log.change_membership(op, voter_id, endpoint):
                    cfg = self.log.node.config
                    _log.info(
                        "%s %s controller %d: done (voters %s)",
                        self._prefix,
                        op,
                        voter_id,
                        sorted(cfg.voters),
                    )
                    return {"error_code": 0}
            except MembershipError as e:
                return _error(ErrorCode.INVALID_REQUEST, str(e))
            if loop.time() >= deadline:
                return _error(ErrorCode.REQUEST_TIMED_OUT, self._waiting_for(op, voter_id))
            await asyncio.sleep(self.log.tick_ms / 1000.0)

    def _waiting_for(self, op: str, voter_id: int) -> str:
        node = self.log.node
        blocked = node.membership_blocked()
        if blocked is not None:
            return f"{op} controller {voter_id} not done: {blocked}"
        if op == "add" and voter_id in node.config.learners:
            pr = node.progress.get(voter_id)
            match = pr.match if pr is not None else 0
            return (
                f"add controller {voter_id} not done: it is a learner catching up (has the log"
                f" to index {match}, commit index {node.commit_index}); is it running and"
                " reachable at its endpoint?"
            )
        return f"{op} controller {voter_id} not done yet"


def _error(code: ErrorCode, message: str) -> Body:
    return {"error_code": int(code), "error_message": message}
