"""Marker channel: the transaction coordinator's COMMIT/ABORT markers to partition leaders.

    channel = NetworkMarkerChannel(node_id, leader_of, endpoint_of, settings)
    channel.start()
    channel.send(job, done, still_valid)   # done(True) once every partition has its marker
    channel.shutdown()

The coordinator (broker/txn/coordinator.py) hands over one `MarkerJob` per transaction being
ended (at most one per transactional id in flight, so the queue is bounded by the ids the
coordinator holds). One thread groups the partitions still lacking a marker by their current
leader (read from the latest metadata image on each round: a leader change is picked up on
the next one), sends each leader one WriteTxnMarkers (27) request over the inter-broker
listener (a blocking LeaderConnection, TLS/SASL as the replica fetchers), and retries what
failed after MARKER_RETRY_BACKOFF_MS:

  - NONE: that partition is done;
  - a partition whose topic is gone from the metadata is done (Kafka drops them too);
  - TRANSACTION_COORDINATOR_FENCED, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED: another
    coordinator or a newer epoch owns the transaction; the job is dropped: done(False);
  - anything else (NOT_LEADER_OR_FOLLOWER, a lost connection, a timeout...): retried.

A job whose `still_valid()` turns false (this broker no longer leads the transaction's
`__transaction_state` partition) is dropped with done(False); the new coordinator resumes it.
`shutdown` gives every job not finished back the same way, and so does `send` after it.

Partitions this broker leads itself take no request: `LocalMarkers` appends their markers
through the same code as the WriteTxnMarkers handler (broker/txn/marker_append.py). A job
whose partitions are all led here is appended by `send` in the caller's thread, and `done`
runs on the thread that makes the last marker durable (the flusher's), with no hop to the
channel's thread: a producer's next transaction waits on this (decision entry). What such a
job could not place (a leader moved meanwhile) goes to the channel's thread, as any other.

Threads: `send` from any thread; `done` runs outside the channel's lock, on the channel's
thread or, for a job appended here, on the thread that answered its last append.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from broker.replica.leader_connection import LeaderConnection
from broker.txn.marker_append import Codes, MarkerSpec
from broker.txn.state import TP
from client.errors import ErrorCode
from client.protocol.body import Body
from client.security.scram import SaslCredentials
from client.security.tls import ReloadableContext

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS = 27  # Kafka's api key; the schema is the partition side's
MARKER_RETRY_BACKOFF_MS = 100
_DROP_JOB = {
    int(ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    int(ErrorCode.INVALID_PRODUCER_EPOCH),
    int(ErrorCode.PRODUCER_FENCED),
}


@dataclass(frozen=True)
class MarkerJob:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TP]
    coordinator_epoch: int


class MarkerChannel(Protocol):
    """The one seam between the coordinator and the partitions' leaders."""

    def send(
        self, job: MarkerJob, done: Callable[[bool], None], still_valid: Callable[[], bool]
    ) -> None: ...

    def start(self) -> None: ...

    def shutdown(self) -> None: ...


def marker_body(items: list[tuple[MarkerJob, list[TP]]]) -> Body:
    """A WriteTxnMarkers request body for (job, its partitions on one leader) pairs."""
    markers = []
    for job, tps in items:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(tps):
            by_topic.setdefault(t, []).append(p)
        markers.append({
            "producer_id": job.producer_id,
            "producer_epoch": job.producer_epoch,
            "transaction_result": job.commit,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
            "coordinator_epoch": job.coordinator_epoch,
        })  # fmt: skip
    return {"markers": markers}


@dataclass
class _Pending:
    job: MarkerJob
    done: Callable[[bool], None]
    still_valid: Callable[[], bool]
    remaining: set[TP] = field(default_factory=set)
    dropped: bool = False


@dataclass(frozen=True)
class MarkerSettings:
    timeout_s: float = 30.0
    max_frame_bytes: int = 100 * 1024 * 1024
    tls: ReloadableContext | None = None  # the inter-broker listener's TLS, or None
    sasl: SaslCredentials | None = None  # the broker's own SASL user, or None


class LocalMarkers(Protocol):
    """Appends markers to partitions this broker leads (marker_append.append_markers over the
    broker's replica manager); `answer` gets one code map per spec, maybe later, on another
    thread."""

    def append(self, specs: Sequence[MarkerSpec], answer: Callable[[list[Codes]], None]) -> None: ...


def _spec(job: MarkerJob, tps: list[TP]) -> MarkerSpec:
    return MarkerSpec(job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch,
                      sorted(tps))  # fmt: skip


class Connection(Protocol):
    """What the channel needs of a connection to a leader (LeaderConnection)."""

    def request(self, api_key: int, body: Body) -> Body: ...

    def close(self) -> None: ...


class NetworkMarkerChannel:
    def __init__(
        self,
        node_id: int,
        leader_of: Callable[[str, int], int | None],
        endpoint_of: Callable[[int], tuple[str, int] | None],
        settings: MarkerSettings,
        connect: Callable[[tuple[str, int]], Connection] | None = None,
        local: LocalMarkers | None = None,
    ) -> None:
        self.node_id = node_id
        self._local = local
        self._connect = connect or self._leader_connection
        self._leader_of = leader_of  # None: the partition no longer exists; -1: no leader now
        self._endpoint_of = endpoint_of
        self.settings = settings
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._jobs: list[_Pending] = []
        self._fresh = False  # a job came since the last round started: no retry back-off
        self._conns: dict[int, Connection] = {}
        self._failing: set[int] = set()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._prefix = f"[broker={node_id} txn-markers]"

    def _leader_connection(self, endpoint: tuple[str, int]) -> Connection:
        s = self.settings
        return LeaderConnection(
            endpoint, s.timeout_s, s.max_frame_bytes, f"txn-coordinator-{self.node_id}",
            None if s.tls is None else s.tls.context, s.sasl,
        )  # fmt: skip

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="txn-markers", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        with self._lock:
            self._stop = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        for c in self._conns.values():
            c.close()
        self._conns.clear()
        with self._lock:
            left, self._jobs = self._jobs, []
        for j in left:  # given back: the coordinator resumes them while it still leads
            j.done(False)

    def send(
        self, job: MarkerJob, done: Callable[[bool], None], still_valid: Callable[[], bool]
    ) -> None:
        if self._local is not None and job.partitions and not self._stop and all(
            self._leader_of(*tp) == self.node_id for tp in job.partitions
        ):
            pending = _Pending(job, done, still_valid, set(job.partitions))
            self._local.append(
                [_spec(job, list(job.partitions))],
                lambda codes: self._appended_here(pending, codes[0]),
            )
            return
        self._enqueue(_Pending(job, done, still_valid, set(job.partitions)))

    def _enqueue(self, pending: _Pending) -> None:
        with self._lock:
            stopped = self._stop
            if not stopped:
                self._jobs.append(pending)
                self._fresh = True
                self._wake.notify_all()
        if stopped:  # after shutdown: given back at once
            pending.done(False)

    def _appended_here(self, j: _Pending, codes: Codes) -> None:
        """The answer to a job `send` appended itself: done, or what is left to the thread."""
        self._take_codes(j, codes, self.node_id)
        if j.dropped or not j.remaining:
            j.done(not j.dropped)
        else:
            self._enqueue(j)

    def _run(self) -> None:
        retry = False
        while True:
            with self._lock:
                if self._stop:
                    return
                if not self._jobs or (retry and not self._fresh):
                    self._wake.wait(MARKER_RETRY_BACKOFF_MS / 1000 if retry else 0.5)
                if self._stop:
                    return
                jobs = list(self._jobs)
                self._fresh = False
            try:
                self._round(jobs)
            except Exception:  # a bug: logged, the jobs are retried
                log.exception("%s marker round failed", self._prefix)
            finished = []
            with self._lock:
                for j in jobs:
                    if j.dropped or not j.remaining:
                        self._jobs.remove(j)
                        finished.append(j)
                retry = bool(self._jobs)
            for j in finished:
                j.done(not j.dropped)

    def _round(self, jobs: list[_Pending]) -> None:
        """One request per leader for every partition still lacking its marker."""
        by_leader: dict[int, list[tuple[_Pending, list[TP]]]] = {}
        for j in jobs:
            if not j.still_valid():
                j.dropped = True
                continue
            per: dict[int, list[TP]] = {}
            for tp in list(j.remaining):
                leader = self._leader_of(*tp)
                if leader is None:
                    j.remaining.discard(tp)  # the topic or partition was deleted
                elif leader >= 0:
                    per.setdefault(leader, []).append(tp)
            for leader, tps in per.items():
                by_leader.setdefault(leader, []).append((j, tps))
        for leader, items in by_leader.items():
            self._send_to(leader, items)

    def _send_to(self, leader: int, items: list[tuple[_Pending, list[TP]]]) -> None:
        if leader == self.node_id and self._local is not None:
            self._append_here_and_wait(items)
            return
        try:
            conn = self._conns.get(leader)
            if conn is None:
                endpoint = self._endpoint_of(leader)
                if endpoint is None:
                    raise ConnectionError(f"broker {leader} has no known endpoint")
                conn = self._conns[leader] = self._connect(endpoint)
            resp = conn.request(WRITE_TXN_MARKERS, marker_body([(j.job, tps) for j, tps in items]))
        except Exception as exc:  # connection lost, refused, or the API unknown: retried
            old = self._conns.pop(leader, None)
            if old is not None:
                old.close()
            if leader not in self._failing:
                self._failing.add(leader)
                log.warning("%s WriteTxnMarkers to broker %d failed (retrying every %d ms): %s",
                            self._prefix, leader, MARKER_RETRY_BACKOFF_MS, exc)  # fmt: skip
            return
        self._failing.discard(leader)
        answers = resp.get("markers") or []
        for i, (j, _tps) in enumerate(items):
            if i >= len(answers) or answers[i]["producer_id"] != j.job.producer_id:
                continue  # not answered: retried
            self._take_codes(j, {
                (t["name"], int(p["partition_index"])): int(p["error_code"])
                for t in answers[i]["topics"] for p in t["partitions"]
            }, leader)  # fmt: skip

    def _append_here_and_wait(self, items: list[tuple[_Pending, list[TP]]]) -> None:
        """The channel thread's round for partitions led here: appended without a request,
        waited for as a request's answer would be (bounded by the settings' timeout)."""
        assert self._local is not None
        got: list[list[Codes]] = []
        answered = threading.Event()

        def answer(codes: list[Codes]) -> None:
            got.append(codes)
            answered.set()

        self._local.append([_spec(j.job, tps) for j, tps in items], answer)
        if not answered.wait(self.settings.timeout_s):
            return  # (the appends' own timeout answers later; retried on the next round)
        for (j, _tps), codes in zip(items, got[0], strict=True):
            self._take_codes(j, codes, self.node_id)

    def _take_codes(self, j: _Pending, codes: Codes, leader: int) -> None:
        """One leader's answer for job `j`'s partitions: done ones leave `remaining`; a fencing
        error drops the job; anything else is retried."""
        for tp, code in codes.items():
            if code == 0:
                j.remaining.discard(tp)
            elif code in _DROP_JOB:
                if not j.dropped:
                    log.warning(
                        "%s markers of %s (producer %d epoch %d) refused by broker %d: "
                        "error %d; left to the current coordinator",
                        self._prefix, j.job.transactional_id, j.job.producer_id,
                        j.job.producer_epoch, leader, code,
                    )  # fmt: skip
                j.dropped = True
            else:
                log.debug("%s marker for %s-%d: error %d, retried", self._prefix,
                          tp[0], tp[1], code)  # fmt: skip
