"""IsrProposer: sends a partition leader's ISR changes to the controller (AlterPartition).

    proposer = IsrProposer(channel, node_id, broker_epoch=lambda: node.broker_epoch)
    replica_manager.isr_proposer = proposer.propose

The change takes effect only when the controller commits it and the metadata publisher applies
the new partition epoch (Partition.make_leader clears the pending proposal). A refusal that
proves the change was not made (INELIGIBLE_REPLICA, INVALID_REQUEST: checked against the
current epochs) clears it at once, so the next check may propose again, and recomputes the high
watermark without the refused follower (a follower of the maximal ISR that stopped fetching held
it back, and nothing else would have moved it: issue 22's 120 s stall). Any other failure (a
failed or unanswered call, a stale leader, partition or broker epoch) leaves the change's fate
unknown: an earlier send of it may have been committed, so it stays pending (counted towards the
HW) and is sent again after a back-off, until metadata settles it (broker/replica/state.py; the
replication simulation found the HW passing a follower the controller had just put in the ISR).
Guarded by the leader and partition epochs, as Kafka's AlterPartition.

Batched as Kafka's AlterPartitionManager: at most one AlterPartition in flight; the changes
proposed meanwhile (at most one per partition, the latest) wait and all go in the next request.
One request per partition made a restarted follower of 5,000 partitions wait for 5,000
controller round trips, and overran the controller channel's pending-call bound
(THROTTLING_QUOTA_EXCEEDED, then a retry per partition).

Threads: `propose` from any thread (I/O workers for expansion, the tasks thread for shrink);
the answer arrives on the channel's thread, which sends what was queued meanwhile.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from broker.replica.partition import Partition
from client.errors import ErrorCode
from client.protocol.body import Body
from controller.channel import ControllerChannel

_log = logging.getLogger(__name__)

_Queued = tuple[Partition, tuple[int, ...], Body]  # partition, new ISR, its AlterPartition entry
# answers proving the change was not made (the controller checked it against current epochs)
_NOT_MADE = frozenset({int(ErrorCode.INELIGIBLE_REPLICA), int(ErrorCode.INVALID_REQUEST)})


class IsrProposer:
    def __init__(
        self,
        channel: ControllerChannel,
        node_id: int,
        broker_epoch: Callable[[], int],
        hw_moved: Callable[[tuple[str, int]], None] = lambda tp: None,
    ) -> None:
        """`hw_moved(tp)`: a refusal moved the partition's high watermark (what waits on it
        must be completed: the replica manager's `high_watermark_moved`)."""
        self.channel = channel
        self.hw_moved = hw_moved
        self.node_id = node_id
        self.broker_epoch = broker_epoch
        self.proposed = 0
        self.refused = 0
        self.requests = 0  # AlterPartition requests sent
        self._lock = threading.Lock()
        self._queued: dict[tuple[str, int], _Queued] = {}
        self._in_flight = False

    def propose(self, part: Partition, new_isr: tuple[int, ...]) -> None:
        with self._lock:
            self.proposed += 1
            # the epochs new_isr was computed against, not the ones current at sending time
            entry = {
                "partition": part.partition,
                "leader_epoch": part.leader_epoch,
                "new_isr": list(new_isr),
                "partition_epoch": part.partition_epoch,
            }
            self._queued[(part.topic, part.partition)] = (part, new_isr, entry)
            if self._in_flight:
                return  # goes with the next request, once the one in flight is answered
            self._in_flight = True
        self._send_queued()

    def _send_queued(self) -> None:
        """Send everything queued in one request, or clear `_in_flight` when nothing is."""
        while True:
            with self._lock:
                batch, self._queued = self._queued, {}
                if not batch:
                    self._in_flight = False
                    return
            topics: dict[str, list[Body]] = {}
            for part, _, entry in batch.values():
                topics.setdefault(part.topic, []).append(entry)
            body = [{"name": name, "partitions": parts} for name, parts in topics.items()]
            try:
                fut = self.channel.alter_partition(self.node_id, self.broker_epoch(), body)
            except Exception as exc:
                for part, new_isr, _ in batch.values():
                    self._failed(part, new_isr, str(exc))
                continue  # what was queued meanwhile
            self.requests += 1
            fut.add_done_callback(functools.partial(self._answered, batch))
            return

    def _answered(self, batch: dict[tuple[str, int], _Queued], fut: Any) -> None:
        try:
            self._settle(batch, fut)
        finally:
            self._send_queued()

    def _settle(self, batch: dict[tuple[str, int], _Queued], fut: Any) -> None:
        try:
            resp = fut.result()
        except Exception as exc:
            for part, new_isr, _ in batch.values():
                self._failed(part, new_isr, f"{type(exc).__name__}: {exc}")
            return
        top = int(resp.get("error_code", 0))
        codes = {
            (t.get("name"), p.get("partition")): int(p.get("error_code", 0))
            for t in resp.get("topics", [])
            for p in t.get("partitions", [])
        }
        for key, (part, new_isr, _) in batch.items():
            code = top or codes.get(key)
            if code is None:
                self._failed(part, new_isr, "no answer for this partition")
            elif code != 0:
                self._failed(part, new_isr, _name(code), not_made=code in _NOT_MADE)
            else:
                _log.info(
                    "[%s-%d] ISR change to %s accepted", part.topic, part.partition, list(new_isr)
                )

    def _failed(
        self, part: Partition, new_isr: tuple[int, ...], why: str, not_made: bool = False
    ) -> None:
        with self._lock:
            self.refused += 1
        if not not_made:
            _log.info(
                "[%s-%d] ISR change to %s unsettled (%s): sending it again",
                part.topic,
                part.partition,
                list(new_isr),
                why,
            )
            part.isr_change_unsettled()
            return
        _log.info(
            "[%s-%d] ISR change to %s not made: %s", part.topic, part.partition, list(new_isr), why
        )
        if part.isr_change_failed():
            self.hw_moved(part.tp)


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
