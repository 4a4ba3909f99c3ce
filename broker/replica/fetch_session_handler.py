"""The follower's side of an incremental fetch session (KIP-227), one per replica fetcher
thread (so per source broker): Kafka's FetchSessionHandler.

    handler = FetchSessionHandler()
    req = handler.build(wanted)          # wanted: {tp: PartitionData} fetched this round
    req = handler.build(wanted, changed)  # the same, looking only at `changed` (decision 204)
    ... send req.session_id, req.session_epoch, req.to_send, req.forgotten ...
    handler.handle_response(error_code, session_id)   # or handler.reset() on a lost connection

The first request is full (session_epoch 0: every wanted partition, asking for a session). Once
the leader gave a session id, each request is incremental (epoch 1, 2, ...): it names only the
partitions added or whose PartitionData changed since the leader last saw them, and forgets
those no longer wanted (removed, backed off after an error, now led here). Any whole-request
error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, ...), a lost connection or a
failed request starts over with a full fetch, which also closes the old session on the leader.

Threads: the owning replica fetcher thread only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.replica.fetch_session import next_epoch
from client.protocol.body import Body

TopicPartition = tuple[str, int]


class PartitionData(NamedTuple):
    """One partition of a follower's Fetch: what the leader must know to answer it."""

    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int

    def as_request(self, partition: int) -> Body:
        return {
            "partition": partition,
            "fetch_offset": self.fetch_offset,
            "partition_max_bytes": self.partition_max_bytes,
            "current_leader_epoch": self.current_leader_epoch,
            "last_fetched_epoch": self.last_fetched_epoch,
            "log_start_offset": self.log_start_offset,
        }


@dataclass
class SessionRequest:
    session_id: int
    session_epoch: int
    to_send: dict[TopicPartition, PartitionData]
    forgotten: list[TopicPartition] = field(default_factory=list)

    @property
    def full(self) -> bool:
        return self.session_epoch == 0

    def body_fields(self) -> Body:
        """The Fetch request's session fields, topics and forgotten topics."""
        topics: dict[str, list[Body]] = {}
        for (t, p), d in self.to_send.items():
            topics.setdefault(t, []).append(d.as_request(p))
        forgotten: dict[str, list[int]] = {}
        for t, p in self.forgotten:
            forgotten.setdefault(t, []).append(p)
        return {
            "session_id": self.session_id,
            "session_epoch": self.session_epoch,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics": [{"name": t, "partitions": ps} for t, ps in forgotten.items()],
        }


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = 0  # the leader's session (0: none yet)
        self.next_epoch = 0  # 0: the next request is full
        self._sent: dict[TopicPartition, PartitionData] = {}  # what the leader's session holds
        self._pending: SessionRequest | None = None  # the request in flight
        self.full_fetches = 0
        self.incremental_fetches = 0

    def build(
        self,
        wanted: dict[TopicPartition, PartitionData],
        changed: Iterable[TopicPartition] | None = None,
    ) -> SessionRequest:
        """The next request for `wanted` (every partition this round fetches). `changed`: the
        only partitions whose entry in `wanted` may differ from the last request's (present,
        gone or other data): an incremental request is then made by looking at them alone
        (None: at every partition)."""
        if self.session_id == 0 or self.next_epoch == 0:
            req = SessionRequest(self.session_id, 0, dict(wanted))
        else:
            sent = self._sent
            if changed is None:
                changed = [*wanted, *(tp for tp in sent if tp not in wanted)]
            to_send: dict[TopicPartition, PartitionData] = {}
            forgotten: list[TopicPartition] = []
            for tp in changed:
                d = wanted.get(tp)
                if d is None:
                    if tp in sent:
                        forgotten.append(tp)
                elif sent.get(tp) != d:
                    to_send[tp] = d
            req = SessionRequest(self.session_id, self.next_epoch, to_send, forgotten)
        self._pending = req
        return req

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """The leader answered the last built request; False when the session is gone (the
        next request is full)."""
        req = self._pending
        assert req is not None, "handle_response without a built request"
        self._pending = None
        if error_code != 0:
            self.reset()
            return False
        if req.full:
            self.full_fetches += 1
            self._sent = dict(req.to_send)
            self.session_id = session_id
            self.next_epoch = 1 if session_id else 0
            return session_id != 0
        self.incremental_fetches += 1
        sent = self._sent  # the leader's session moved by what the request named
        sent.update(req.to_send)
        for tp in req.forgotten:
            del sent[tp]
        self.next_epoch = next_epoch(self.next_epoch)
        return True

    def reset(self) -> None:
        """Start over with a full fetch (it names the old session id, so the leader closes
        it)."""
        self._pending = None
        self._sent = {}
        self.next_epoch = 0
