"""IsrProposer: sends a partition leader's ISR change to the controller (AlterPartition).

    proposer = IsrProposer(channel, node_id, broker_epoch=lambda: node.broker_epoch)
    replica_manager.isr_proposer = proposer.propose

The change takes effect only when the controller commits it and the metadata publisher applies
the new partition epoch (Partition.make_leader clears the pending proposal); a refusal
(FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, a stale broker epoch) or a failed call clears it
at once, so the next check may propose again. Guarded by the leader and partition epochs, as
Kafka's AlterPartition.

Threads: `propose` from any thread (I/O workers for expansion, the tasks thread for shrink);
the answer arrives on the channel's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from broker.replica.partition import Partition
from client.errors import ErrorCode
from controller.channel import ControllerChannel

_log = logging.getLogger(__name__)


class IsrProposer:
    def __init__(
        self, channel: ControllerChannel, node_id: int, broker_epoch: Callable[[], int]
    ) -> None:
        self.channel = channel
        self.node_id = node_id
        self.broker_epoch = broker_epoch
        self.proposed = 0
        self.refused = 0

    def propose(self, part: Partition, new_isr: tuple[int, ...]) -> None:
        self.proposed += 1
        body = [
            {
                "name": part.topic,
                "partitions": [
                    {
                        "partition": part.partition,
                        "leader_epoch": part.leader_epoch,
                        "new_isr": list(new_isr),
                        "partition_epoch": part.partition_epoch,
                    }
                ],
            }
        ]
        try:
            fut = self.channel.alter_partition(self.node_id, self.broker_epoch(), body)
        except Exception as exc:
            self._failed(part, new_isr, str(exc))
            return
        fut.add_done_callback(lambda f: self._answered(part, new_isr, f))

    def _answered(self, part: Partition, new_isr: tuple[int, ...], fut: Any) -> None:
        try:
            resp = fut.result()
        except Exception as exc:
            self._failed(part, new_isr, f"{type(exc).__name__}: {exc}")
            return
        code = int(resp.get("error_code", 0))
        if code == 0:
            for t in resp.get("topics", []):
                for p in t.get("partitions", []):
                    code = code or int(p.get("error_code", 0))
        if code != 0:
            self._failed(part, new_isr, _name(code))
        else:
            _log.info(
                "[%s-%d] ISR change to %s accepted", part.topic, part.partition, list(new_isr)
            )

    def _failed(self, part: Partition, new_isr: tuple[int, ...], why: str) -> None:
        self.refused += 1
        _log.info(
            "[%s-%d] ISR change to %s not made: %s", part.topic, part.partition, list(new_isr), why
        )
        part.isr_change_failed()


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
