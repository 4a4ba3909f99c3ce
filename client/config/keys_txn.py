"""Transaction keys (broker): the `__transaction_state` topic, transaction timeouts, the
expiry of transactional ids and of partitions' producer state (docs/transactions.md). One
line per key."""

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
    key("transactional.id.expiration.ms", "duration_ms", 604_800_000, "a transactional id whose state is Empty, CompleteCommit or CompleteAbort and that has not been updated for this long is expired: a tombstone is written to __transaction_state, DescribeTransactions then answers TRANSACTIONAL_ID_NOT_FOUND and the next InitProducerId starts afresh", B, at_least(1)),
    key("transaction.remove.expired.transaction.cleanup.interval.ms", "duration_ms", 3_600_000, "how often the coordinator looks for transactional ids to expire (transactional.id.expiration.ms)", B, at_least(1)),
    key("producer.id.expiration.ms", "duration_ms", 86_400_000, "a partition drops the state of a producer (idempotent or transactional) with no batch or marker for this long, by its last timestamp, unless its transaction is open there (KIP-854); its next batch is a new producer's", B, at_least(1)),
    key("producer.id.expiration.check.interval.ms", "duration_ms", 600_000, "how often partitions look for producer state to expire (producer.id.expiration.ms)", B, at_least(1)),
]  # fmt: skip
