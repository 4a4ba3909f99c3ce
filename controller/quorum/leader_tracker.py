"""Which controller of a remote quorum to ask: LeaderTracker, shared by RemoteController (calls)
and RemoteMetadataLog (the observer). Thread-safe.
"""

from __future__ import annotations

import ssl
import threading

from client.security.tls import ReloadableContext
from controller.quorum.network import parse_voters


def voters_of(voters: str | dict[int, tuple[str, int]]) -> dict[int, tuple[str, int]]:
    return parse_voters(voters) if isinstance(voters, str) else dict(voters)


def client_context_of(tls: ReloadableContext | None) -> ssl.SSLContext | None:
    return None if tls is None else tls.context


class LeaderTracker:
    """Which voter to ask: the last known leader, else each voter in turn."""

    def __init__(self, voters: dict[int, tuple[str, int]]) -> None:
        self.voters = voters
        self.leader: int | None = None
        self._next = 0
        self._lock = threading.Lock()

    def target(self) -> tuple[int, tuple[str, int]]:
        with self._lock:
            if self.leader in self.voters:
                return self.leader, self.voters[self.leader]
            ids = sorted(self.voters)
            nid = ids[self._next % len(ids)]
            self._next += 1
            return nid, self.voters[nid]

    def known(self) -> dict[int, tuple[str, int]]:
        """A copy of the controllers known (configured, and learned since)."""
        with self._lock:
            return dict(self.voters)

    def set_leader(self, leader: int | None, endpoint: str | None = None) -> None:
        """`endpoint` ("host:port", from the answer naming the leader) teaches the address of
        a controller added to the quorum since this client started."""
        with self._lock:
            if leader is not None and leader not in self.voters and endpoint:
                host, sep, port = endpoint.rpartition(":")
                if sep and host and port.isdigit() and len(self.voters) < 64:
                    self.voters[leader] = (host.strip("[]"), int(port))
            self.leader = leader if leader in self.voters else None

    def failed(self, nid: int) -> None:
        with self._lock:
            if self.leader == nid:
                self.leader = None
