"""Transaction coordinator keys (broker): the `__transaction_state` topic and transaction
timeouts (docs/transactions.md). One line per key."""

from __future__ import annotations

from client.config.keydef import key
from client.config.types import at_least

B = ("broker",)
MiB = 1024 * 1024

KEYS = [
    key("transaction.state.log.num.partitions", "int", 50, "partitions of the __transaction_state topic (a transactional id lives in partition abs(Java hashCode(id)) % partitions)", B, at_least(1)),
    key("transaction.state.log.replication.factor", "int", 3, "replication factor of __transaction_state, as Kafka; clamped (and logged) to the live brokers when the topic is created on first use", B, at_least(1)),
    key("transaction.state.log.segment.bytes", "size", 100 * MiB, "segment size of __transaction_state", B, at_least(1024)),
    key("transaction.max.timeout.ms", "duration_ms", 900_000, "largest transaction.timeout.ms a producer may ask for in InitProducerId (larger: INVALID_TRANSACTION_TIMEOUT)", B, at_least(1)),
    key("transaction.abort.timed.out.transaction.cleanup.interval.ms", "duration_ms", 10_000, "how often the coordinator looks for transactions open longer than their timeout, and aborts them (bumping the producer epoch)", B, at_least(1)),
    key("transaction.state.log.write.timeout.ms", "duration_ms", 5000, "a write to __transaction_state waits this long for replication (acks=all)", B, at_least(1)),
]  # fmt: skip
