"""The idempotent producer's state (Kafka's TransactionManager, without transactions): its
producer id and epoch from InitProducerId, and the next sequence number of each partition.

A batch is numbered when it is first encoded (in partition order: the sender encodes a
partition's batches head first) and keeps its payload, so every retry carries the same
producer id, epoch and sequence and the partition leader stores it once, answering a
duplicate with the original offsets. The sender sends at most one batch per partition per
request (the broker's rule) and one request per partition at a time (muted partitions), so
sequences reach the leader in order.

When a numbered batch fails for good (an error that is not retried, delivery.timeout.ms, or
the leader refusing its sequence or producer id), the partition's sequence has a gap that
the leader would refuse from then on. The producer then starts over with a new producer id
(`reset`): sequences restart at 0 and queued batches that were never sent are numbered again;
batches already sent keep their old numbering, which the leader still knows. Loop-owned.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from client.aio.types import TopicPartition
from client.errors import ConfigError, error_for_code
from client.protocol import ApiKey
from client.records.header import seq_add

log = logging.getLogger(__name__)


def idempotence_enabled(cfg: SimpleNamespace, explicit: bool) -> bool:
    """Kafka 3's rule: on by default; set explicitly, it needs acks=all, retries > 0 and at most
    5 requests in flight (ConfigError naming the conflict); left at its default, a conflicting
    setting turns it off (logged once). A transactional.id needs idempotence: the same
    conflicts are a ConfigError then, whether enable.idempotence was set or not."""
    transactional = cfg.transactional_id is not None
    if not cfg.enable_idempotence:
        if transactional:
            raise ConfigError(
                f"transactional.id={cfg.transactional_id!r} needs enable.idempotence=true"
            )
        return False
    explicit = explicit or transactional
    conflicts = []
    if cfg.acks != -1:
        conflicts.append(f"acks={cfg.acks} (needs all)")
    if cfg.retries == 0:
        conflicts.append("retries=0 (needs > 0)")
    if cfg.max_in_flight_requests_per_connection > 5:
        conflicts.append(
            f"max.in.flight.requests.per.connection={cfg.max_in_flight_requests_per_connection}"
            " (needs <= 5)"
        )
    if not conflicts:
        return True
    if explicit:
        what = "transactional.id" if transactional else "enable.idempotence=true"
        raise ConfigError(f"{what} conflicts with {', '.join(conflicts)}")
    log.info(
        "idempotence off: %s (enable.idempotence is left at its default)", ", ".join(conflicts)
    )
    return False


class IdempotenceState:
    def __init__(self) -> None:
        self.producer_id = -1
        self.epoch = -1
        self._next_seq: dict[TopicPartition, int] = {}

    @property
    def ready(self) -> bool:
        return self.producer_id >= 0

    async def init(self, cluster: Any) -> None:
        """InitProducerId from any broker: a new producer id, epoch 0."""
        resp = await cluster.send_any(ApiKey.INIT_PRODUCER_ID, {"transactional_id": None})
        if resp["error_code"]:
            raise error_for_code(resp["error_code"])("InitProducerId")
        self.producer_id, self.epoch = resp["producer_id"], resp["producer_epoch"]
        self._next_seq.clear()
        log.info("producer id %d epoch %d", self.producer_id, self.epoch)

    def clear_sequences(self) -> None:
        """A new producer id or epoch (a transactional InitProducerId): sequences from 0."""
        self._next_seq.clear()

    def number(self, b: Any) -> tuple[int, int, int]:
        """The batch's (producer id, epoch, base sequence): given the next sequence of its
        partition the first time, kept after that (a retry carries the same numbers)."""
        if b.producer is None:
            seq = self._next_seq.get(b.tp, 0)
            self._next_seq[b.tp] = seq_add(seq, len(b.entries))
            b.producer = (self.producer_id, self.epoch, seq)
        producer: tuple[int, int, int] = b.producer
        return producer

    def reset(self, why: str, queued: list[Any]) -> None:
        """Start over with a new producer id (asked for before the next send). Queued batches
        never sent lose their numbering and are encoded again."""
        if self.producer_id < 0:
            return
        # INFO: the failure itself is the sender's WARNING ("failed to deliver ...")
        log.info("producer id %d: %s; starting over with a new producer id", self.producer_id, why)
        self.producer_id = self.epoch = -1
        self._next_seq.clear()
        for b in queued:
            if b.attempts == 0 and b.producer is not None:
                b.payload = None
                b.producer = None
