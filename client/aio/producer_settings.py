"""What a producer reads from the resolved producer config, built once
(`ProducerSettings.from_config`) when the Producer is built, typed, instead of `config.<key>`
on every send: the accumulator's sizes, the blocking limits, the serializers, and the
transactional id with its timeout. Idempotence is decided here too (Kafka 3's rule,
client/aio/idempotence.py), so a conflicting setting fails when the Producer is built. The
keys are the producer keys of docs/configuration.md; the config itself is
`client.aio.config.resolve_config("producer", ...)`'s namespace. The sender reads its own
(`SenderSettings`, client/aio/link_settings.py). Any thread may read them (frozen)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

from client.aio.idempotence import idempotence_enabled

Serializer = Callable[[object], bytes | str | None]  # bytes, str and None need none


@dataclass(frozen=True)
class ProducerSettings:
    batch_size: int
    linger_ms: int
    buffer_memory: int  # bytes buffered before send() blocks (max.block.ms)
    max_request_size: int
    delivery_timeout_ms: int
    max_block_ms: int
    retry_backoff_ms: int
    allow_auto_create_topics: bool
    key_serializer: Serializer | None
    value_serializer: Serializer | None
    transactional_id: str | None
    transaction_timeout_ms: int
    idempotent: bool  # enable.idempotence after Kafka 3's rule (idempotence_enabled)

    @classmethod
    def from_config(cls, config: SimpleNamespace) -> ProducerSettings:
        """ConfigError when enable.idempotence or transactional.id conflicts with acks,
        retries or max.in.flight.requests.per.connection."""
        tid = config.transactional_id
        return cls(
            batch_size=int(config.batch_size),
            linger_ms=int(config.linger_ms),
            buffer_memory=int(config.buffer_memory),
            max_request_size=int(config.max_request_size),
            delivery_timeout_ms=int(config.delivery_timeout_ms),
            max_block_ms=int(config.max_block_ms),
            retry_backoff_ms=int(config.retry_backoff_ms),
            allow_auto_create_topics=bool(config.allow_auto_create_topics),
            key_serializer=config.key_serializer,
            value_serializer=config.value_serializer,
            transactional_id=None if tid is None else str(tid),
            transaction_timeout_ms=int(config.transaction_timeout_ms),
            idempotent=idempotence_enabled(config, bool(config.idempotence_explicit)),
        )
