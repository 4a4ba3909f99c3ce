"""DelayedProduce and DelayedFetch: the replica manager's parked requests (docs/architecture.md §5, §6).

DelayedProduce waits until every appended partition is acknowledged: for acks=all the high
watermark reaches the batch's end; for acks=1 the leader's durable end does (its fsync with
log.flush.on.ack=true). Keyed by ("produce", topic, partition); retried from the flusher's
on_flushed callback (HW moved) and when leadership changes. On expiry the partitions still
waiting answer REQUEST_TIMED_OUT (the records stay appended, as in Kafka).

DelayedFetch waits until the fetchable bytes reach min_bytes (or a partition errors, or the
leader changes) or max_wait_ms passes, then reads and answers. Keyed by ("fetch", topic,
partition); retried when the HW moves (consumers) or on append (followers).

DelayedDeleteRecords (at the end) waits for the ISR's log start offsets (DeleteRecords).

DelayedSessionFetch is a follower's fetch in an incremental fetch session (KIP-227): the
request may name none of the session's partitions, so it is keyed by the session
(fetch_session.session_key) and retried when any partition the session holds changes; its
condition and answer look at the named, dirty and recheck partitions (session_fetch.py).

Threads: try_complete runs on whichever thread retries the key (I/O workers, flusher threads,
the metadata publisher); on_complete exactly once on the winner (or the timer reaper).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.purgatory import DelayedOperation
from client.errors import ErrorCode
from client.protocol.body import Body

if TYPE_CHECKING:
    from broker.replica.fetch_session import FetchSession
    from broker.replica.manager import ReplicaManager
    from broker.replica.session_fetch import SessionFetches, SessionFetchResult
    from broker.replica.specs import FetchPartitionSpec


@dataclass
class ProducePartitionStatus:
    """One partition of a produce request. `required_offset`: the offset the ack must reach
    (last appended offset + 1); -1 when the partition already has its final answer."""

    error_code: int
    base_offset: int = -1
    log_start_offset: int = -1
    required_offset: int = -1
    error_message: str | None = None
    leader_epoch: int = -1

    def as_response(self, partition: int) -> Body:
        return {
            "partition": partition,
            "error_code": self.error_code,
            "error_message": self.error_message,
            "base_offset": self.base_offset,
            "log_append_time_ms": -1,
            "log_start_offset": self.log_start_offset,
        }


def produce_key(topic: str, partition: int) -> tuple[str, str, int]:
    return ("produce", topic, partition)


def fetch_key(topic: str, partition: int) -> tuple[str, str, int]:
    return ("fetch", topic, partition)


class DelayedProduce(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        acks: int,
        statuses: dict[tuple[str, int], ProducePartitionStatus],
        manager: ReplicaManager,
        callback: Callable[[dict[tuple[str, int], ProducePartitionStatus]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.acks = acks
        self.statuses = statuses
        self._manager = manager
        self._callback = callback
        # the partitions still waiting, in order; those before _next are answered. A request
        # over thousands of partitions is woken once per partition: each try resumes where
        # the last stopped, so a request costs O(partitions) checks, not O(partitions^2).
        self._waiting = self._pending()
        self._next = 0

    def _pending(self) -> list[tuple[tuple[str, int], ProducePartitionStatus]]:
        return [(tp, s) for tp, s in self.statuses.items() if s.required_offset >= 0]

    def try_complete(self) -> bool:
        """Under the operation's lock (safe_try_complete): one caller at a time."""
        waiting, check = self._waiting, self._manager.check_produce_acked
        while self._next < len(waiting):
            tp, status = waiting[self._next]
            if status.required_offset >= 0:
                code = check(tp, status, self.acks)
                if code is None:
                    return False
                status.error_code = code
                status.required_offset = -1
            self._next += 1
        return self.force_complete()

    def on_complete(self) -> None:
        for _tp, status in self._pending():
            status.required_offset = -1
            status.error_code = int(ErrorCode.REQUEST_TIMED_OUT)
            status.error_message = "the write was not acknowledged in time"
        self._callback(self.statuses)


class DelayedFetch(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        params: Any,
        partitions: list[FetchPartitionSpec],
        manager: ReplicaManager,
        callback: Callable[[list[dict[str, Any]]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.params = params
        self.partitions = partitions
        self._manager = manager
        self._callback = callback

    def try_complete(self) -> bool:
        if self._manager.fetch_satisfied(self.params, self.partitions):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        results = self._manager.read_partitions(self.params, self.partitions)
        self._callback(results)


class DelayedSessionFetch(DelayedOperation):
    def __init__(
        self,
        delay_ms: int,
        params: Any,
        session: FetchSession,
        named: list[tuple[str, int]],
        full: bool,
        manager: SessionFetches,
        callback: Callable[[SessionFetchResult], None],
    ) -> None:
        super().__init__(delay_ms)
        self.params = params
        self.session = session
        self.named = named
        self.full = full
        self._manager = manager
        self._callback = callback

    def try_complete(self) -> bool:
        if self._manager.session_fetch_satisfied(self.params, self.session, self.named):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        m = self._manager
        self._callback(m.session_answer(self.params, self.session, self.named, self.full))


@dataclass
class DeleteRecordsStatus:
    """One partition of a DeleteRecords request. `required_offset`: the offset the low
    watermark must reach; -1 once the partition has its final answer."""

    error_code: int
    low_watermark: int = -1
    required_offset: int = -1
    error_message: str | None = None
    leader_epoch: int = -1

    def as_response(self, topic: str, partition: int) -> Body:
        return {
            "topic": topic,
            "partition": partition,
            "low_watermark": self.low_watermark,
            "error_code": self.error_code,
            "error_message": self.error_message,
        }


class DelayedDeleteRecords(DelayedOperation):
    """Kafka's DelayedDeleteRecords: waits until the low watermark (the smallest log start
    offset over the ISR) of every partition reaches its requested offset. Watched in the
    produce purgatory under ("produce", topic, partition), so what retries produces retries
    it (the metadata touching the partition: leader or ISR change; the HW moving), and a
    follower reporting a higher log start offset retries that key too. On expiry the partitions still waiting answer REQUEST_TIMED_OUT (the
    leader's log start stays moved; the followers follow at their next fetches)."""

    def __init__(
        self,
        delay_ms: int,
        statuses: dict[tuple[str, int], DeleteRecordsStatus],
        check: Callable[[tuple[str, int], DeleteRecordsStatus], bool],
        callback: Callable[[dict[tuple[str, int], DeleteRecordsStatus]], None],
    ) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self._check = check
        self._callback = callback

    def try_complete(self) -> bool:
        """Under the operation's lock (safe_try_complete): one caller at a time."""
        done = True
        for tp, status in self.statuses.items():
            if status.required_offset >= 0 and not self._check(tp, status):
                done = False
        return self.force_complete() if done else False

    def on_complete(self) -> None:
        for status in self.statuses.values():
            if status.required_offset >= 0:
                status.required_offset = -1
                status.error_code = int(ErrorCode.REQUEST_TIMED_OUT)
                status.error_message = (
                    "not every in-sync replica moved its log start offset in time (the "
                    f"leader's did; the low watermark is {status.low_watermark})"
                )
        self._callback(self.statuses)
