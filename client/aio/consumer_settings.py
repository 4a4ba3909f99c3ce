"""What a consumer's fetcher and group member read from the resolved consumer config, built
once (`FetchSettings.from_config`, `MemberSettings.from_config`) when the Consumer (or the
Admin's offsets reader) is built, typed, instead of reading the config's attributes on every
fetch round and heartbeat. The keys are the consumer keys of docs/configuration.md; the
config itself is `client.aio.config.resolve_config("consumer", ...)`'s namespace.
Any thread may read them (frozen)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

Deserializer = Callable[[bytes], object]


@dataclass(frozen=True)
class FetchSettings:
    request_timeout_ms: int
    retry_backoff_ms: int
    auto_offset_reset: str  # earliest | latest | none
    fetch_min_bytes: int
    fetch_max_wait_ms: int
    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    fetch_buffer_bytes: int  # buffered, undrained bytes above which no fetch is sent
    read_committed: bool  # isolation.level=read_committed
    check_crcs: bool
    key_deserializer: Deserializer | None
    value_deserializer: Deserializer | None

    @classmethod
    def from_config(cls, config: SimpleNamespace) -> FetchSettings:
        return cls(
            request_timeout_ms=int(config.request_timeout_ms),
            retry_backoff_ms=int(config.retry_backoff_ms),
            auto_offset_reset=str(config.auto_offset_reset),
            fetch_min_bytes=int(config.fetch_min_bytes),
            fetch_max_wait_ms=int(config.fetch_max_wait_ms),
            fetch_max_bytes=int(config.fetch_max_bytes),
            max_partition_fetch_bytes=int(config.max_partition_fetch_bytes),
            fetch_buffer_bytes=int(config.fetch_buffer_bytes),
            read_committed=config.isolation_level == "read_committed",
            check_crcs=bool(config.check_crcs),
            key_deserializer=config.key_deserializer,
            value_deserializer=config.value_deserializer,
        )


@dataclass(frozen=True)
class MemberSettings:
    group_id: str
    group_instance_id: str | None  # static membership
    group_remote_assignor: str | None  # None: the coordinator's default
    session_timeout_ms: int | None  # None: the broker's group.consumer.session.timeout.ms
    max_poll_interval_ms: int  # also the rebalance timeout sent in heartbeats
    enable_auto_commit: bool
    auto_commit_interval_ms: int
    auto_offset_reset: str  # earliest | latest | none
    request_timeout_ms: int
    retry_backoff_ms: int

    @classmethod
    def from_config(cls, config: SimpleNamespace) -> MemberSettings:
        session = config.session_timeout_ms
        return cls(
            group_id=str(config.group_id),
            group_instance_id=config.group_instance_id,
            group_remote_assignor=config.group_remote_assignor,
            session_timeout_ms=None if session is None else int(session),
            max_poll_interval_ms=int(config.max_poll_interval_ms),
            enable_auto_commit=bool(config.enable_auto_commit),
            auto_commit_interval_ms=int(config.auto_commit_interval_ms),
            auto_offset_reset=str(config.auto_offset_reset),
            request_timeout_ms=int(config.request_timeout_ms),
            retry_backoff_ms=int(config.retry_backoff_ms),
        )
