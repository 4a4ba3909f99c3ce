"""LogConfig: the typed settings of one partition log (snake_case, units last).

The broker maps its config registry (`log.segment.bytes` ...) and topic overrides onto this
dataclass; broker/log never reads the registry itself. Immutable; safe to share between threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from client.errors import ConfigError

MAX_SEGMENT_BYTES = (1 << 31) - 1  # positions in the offset index are uint32


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    index_interval_bytes: int = 4096
    index_size_max_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: unlimited
    retention_bytes: int = -1  # -1: unlimited
    flush_on_ack: bool = True  # acks wait for fsync (group commit); False: Kafka's behaviour
    flush_messages: int = (1 << 63) - 1  # with flush_on_ack=False: flush after this many records
    flush_ms: int = (1 << 63) - 1  # with flush_on_ack=False: flush after this many ms
    max_message_bytes: int = 1024 * 1024 + 12  # largest batch accepted by append_as_leader
    cleanup_policy: tuple[str, ...] = ("delete",)  # "delete" and/or "compact" (cleaner.py)
    delete_retention_ms: int = 24 * 3600 * 1000  # compacted tombstones kept this long
    min_cleanable_dirty_ratio: float = 0.5  # the cleaner skips a log whose dirty ratio is lower
    min_compaction_lag_ms: int = 0  # records younger than this are not compacted
    # producer.id.expiration.ms (broker-wide, KIP-854): a producer's state with no batch or
    # marker for this long (by its last timestamp) is dropped, unless its transaction is open
    producer_id_expiration_ms: int = 86_400_000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Time and size retention apply (cleanup.policy delete, alone or with compact)."""
        return "delete" in self.cleanup_policy

    def __post_init__(self) -> None:
        if not 14 + 61 <= self.segment_bytes <= MAX_SEGMENT_BYTES:
            raise ConfigError(
                f"segment_bytes={self.segment_bytes}: expected 75..{MAX_SEGMENT_BYTES}"
            )
        if self.segment_ms < 1:
            raise ConfigError(f"segment_ms={self.segment_ms}: expected >= 1")
        if self.index_interval_bytes < 0:
            raise ConfigError(f"index_interval_bytes={self.index_interval_bytes}: expected >= 0")
        if self.index_size_max_bytes < 12:
            raise ConfigError(
                f"index_size_max_bytes={self.index_size_max_bytes}: expected >= 12 (one entry)"
            )
        bad = [p for p in self.cleanup_policy if p not in ("delete", "compact")]
        if bad or not self.cleanup_policy:
            raise ConfigError(
                f"cleanup_policy={self.cleanup_policy}: expected delete and/or compact"
            )
        if self.delete_retention_ms < 0:
            raise ConfigError(f"delete_retention_ms={self.delete_retention_ms}: expected >= 0")
        if self.min_compaction_lag_ms < 0:
            raise ConfigError(f"min_compaction_lag_ms={self.min_compaction_lag_ms}: expected >= 0")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ConfigError(
                f"min_cleanable_dirty_ratio={self.min_cleanable_dirty_ratio}: expected 0..1"
            )
        if self.producer_id_expiration_ms < 1:
            raise ConfigError(
                f"producer_id_expiration_ms={self.producer_id_expiration_ms}: expected >= 1"
            )
        if self.max_message_bytes < 61:
            raise ConfigError(f"max_message_bytes={self.max_message_bytes}: expected >= 61")
