"""Topic-level config keys the controller accepts in CreateTopics (Kafka's names) and their checks.

`validate_topic_config(name, value) -> str | None` returns an error message or None. Pure.

The bounds are those a partition log can use (broker/log/config.py `LogConfig`, which the
controller cannot import): a value accepted here never makes a broker fall back to its default.
"""

from __future__ import annotations

from collections.abc import Callable

from client.records.header import HEADER_SIZE


def _int(lo: int, hi: int = 2**63 - 1) -> Callable[[str], str | None]:
    def check(v: str) -> str | None:
        try:
            n = int(v)
        except ValueError:
            return f"expected an integer, got {v!r}"
        return None if lo <= n <= hi else f"{n} out of range [{lo}, {hi}]"

    return check


def _choice(*opts: str, multi: bool = False) -> Callable[[str], str | None]:
    def check(v: str) -> str | None:
        parts = [p.strip() for p in v.split(",")] if multi else [v]
        bad = [p for p in parts if p not in opts]
        return f"{v!r} not one of {list(opts)}" if bad or not parts else None

    return check


_BOOL = _choice("true", "false")

INT32_MAX = 2**31 - 1
BATCH_HEADER_BYTES = HEADER_SIZE  # 61: the smallest record batch
# LogConfig's bounds: segments of at least 75 bytes (14 + one batch header), at most 2^31 - 1
# (offset-index positions are uint32).
MIN_SEGMENT_BYTES = 14 + BATCH_HEADER_BYTES
MIN_SEGMENT_INDEX_BYTES = 12  # one offset-index entry

TOPIC_CONFIGS: dict[str, Callable[[str], str | None]] = {
    "cleanup.policy": _choice("delete", "compact", multi=True),
    "compression.type": _choice("producer", "uncompressed", "none", "gzip", "lz4", "zstd"),
    "delete.retention.ms": _int(0),
    "file.delete.delay.ms": _int(0),
    "flush.messages": _int(1),
    "flush.ms": _int(0),
    "index.interval.bytes": _int(0),
    "max.compaction.lag.ms": _int(1),
    "max.message.bytes": _int(BATCH_HEADER_BYTES, INT32_MAX),
    "message.timestamp.type": _choice("CreateTime", "LogAppendTime"),
    "min.cleanable.dirty.ratio": lambda v: (
        None if _is_ratio(v) else f"expected a number in [0, 1], got {v!r}"
    ),
    "min.compaction.lag.ms": _int(0),
    "min.insync.replicas": _int(1),
    "retention.bytes": _int(-1),
    "retention.ms": _int(-1),
    "segment.bytes": _int(MIN_SEGMENT_BYTES, INT32_MAX),
    "segment.index.bytes": _int(MIN_SEGMENT_INDEX_BYTES, INT32_MAX),
    "segment.ms": _int(1),
    "unclean.leader.election.enable": _BOOL,
}


def _is_ratio(v: str) -> bool:
    try:
        return 0.0 <= float(v) <= 1.0
    except ValueError:
        return False


_COMPACTION_LAG = "the log cleaner has no maximum compaction lag: it cleans by dirty ratio"
# Kafka's topic keys whose feature is not built yet: the value that means "off" (None: any value
# is refused) and what is missing. Setting them otherwise is refused, never accepted silently.
NOT_YET: dict[str, tuple[str | None, str]] = {
    "compression.type": ("producer", "the broker keeps batches as the producer compressed them"),
    "message.timestamp.type": ("CreateTime", "LogAppendTime is not built yet"),
    "max.compaction.lag.ms": (None, _COMPACTION_LAG),
    "file.delete.delay.ms": (None, "segments leave the log and their files are deleted at once"),
}


def validate_topic_config(name: str, value: str | None) -> str | None:
    check = TOPIC_CONFIGS.get(name)
    if check is None:
        return f"unknown topic config {name!r}"
    if value is None:
        return None
    err = check(value)
    if err is None and name in NOT_YET:
        off, why = NOT_YET[name]
        if value != off:
            return f"{name}={value} is not supported yet: {why}"
    return err
