"""Topic-level config keys the controller accepts in CreateTopics (Kafka's names) and their checks.

`validate_topic_config(name, value) -> str | None` returns an error message or None: for an
unknown name, the closest topic config ("did you mean"), the topic twin of a broker key, the
millisecond key and value for Kafka's broker-only hours/minutes names, or what Gregor does
instead of a Kafka topic config it lacks. Pure.

The bounds are those a partition log can use (broker/log/config.py `LogConfig`, which the
controller cannot import): a value accepted here never makes a broker fall back to its default.
"""

from __future__ import annotations

import difflib
import re
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

# Kafka's version strings as message.format.version takes them: 0.11.0, 0.11.0.2, 2.8, 3.0-IV1
_KAFKA_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+){0,2}(?:-IV\d+)?")


def _message_format_version(v: str) -> str | None:
    """Kafka's message.format.version: the record format a topic's log is written in (Kafka
    3.x ignores it once inter.broker.protocol.version is 3.0 or later, KIP-724, and 4.0
    removes it). Gregor writes only the v2 record batch format, so a version that means v2
    (0.11.0 and later) is accepted, and says what the log holds; an older one (v0/v1) is
    refused rather than ignored."""
    m = _KAFKA_VERSION.fullmatch(v.strip())
    if m is None or (m[1] == "0" and int(m[2]) > 11):
        return f"expected a Kafka version such as 3.0 or 0.11.0, got {v!r}"
    if m[1] == "0" and int(m[2]) < 11:
        return (
            f"{v} is a message format older than v2 (v0/v1, before Kafka 0.11.0): Gregor writes"
            " only the v2 record batch format (docs/record-format.md); set 0.11.0 or later,"
            " or leave it out"
        )
    return None


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
    "message.format.version": _message_format_version,
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


# Topic key -> the broker key that gives its default (Kafka's pairs; DescribeConfigs shows them).
TOPIC_DEFAULTS = {
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}
_TOPIC_OF_BROKER_KEY = {b: t for t, b in TOPIC_DEFAULTS.items() if b != t}

_HOUR = 3_600_000
# Time-unit names Kafka has for brokers only (or not at all): topics take milliseconds.
_TOPIC_UNIT_NAMES: dict[str, tuple[str, int]] = {
    "retention.hours": ("retention.ms", _HOUR),
    "retention.minutes": ("retention.ms", 60_000),
    "log.retention.hours": ("retention.ms", _HOUR),
    "log.retention.minutes": ("retention.ms", 60_000),
    "segment.hours": ("segment.ms", _HOUR),
    "roll.hours": ("segment.ms", _HOUR),
    "log.roll.hours": ("segment.ms", _HOUR),
}

# Kafka topic keys Gregor has no twin for, and what it does instead.
KAFKA_TOPIC_KEYS: dict[str, str] = {
    "segment.jitter.ms": "segments roll at exactly segment.ms of age",
    "preallocate": "segment files grow as written",
    "message.downconversion.enable": "there is one record batch format",
    "message.timestamp.difference.max.ms": "record timestamps are not checked against the broker's clock",
    "message.timestamp.before.max.ms": "record timestamps are not checked against the broker's clock",
    "message.timestamp.after.max.ms": "record timestamps are not checked against the broker's clock",
    "leader.replication.throttled.replicas": "replication is not throttled",
    "follower.replication.throttled.replicas": "replication is not throttled",
    "remote.storage.enable": "tiered storage is not built: logs stay in the brokers' log.dirs",
    "local.retention.ms": "tiered storage is not built: retention.ms applies to the whole log",
    "local.retention.bytes": "tiered storage is not built: retention.bytes applies to the whole log",
}  # fmt: skip


def _unknown(name: str, value: str | None) -> str:
    """Why `name` is not a topic config, and what to set instead."""
    msg = f"unknown topic config {name!r}"
    if name in _TOPIC_UNIT_NAMES:
        target, unit_ms = _TOPIC_UNIT_NAMES[name]
        try:
            n = int(value) if value is not None else None
        except ValueError:
            n = None
        use = f"{target}={-1 if n < 0 else n * unit_ms}" if n is not None else target
        return (
            f"{msg}: as in Kafka, topics take {target} (milliseconds; the hours and minutes"
            f" names are broker keys): set {use}"
        )
    if name in _TOPIC_OF_BROKER_KEY:
        topic_key = _TOPIC_OF_BROKER_KEY[name]
        return f"{msg}: {name} is the broker-wide default; the topic config is {topic_key!r}"
    if name in KAFKA_TOPIC_KEYS:
        return (
            f"{msg}: it is a Kafka topic config that Gregor does not have: {KAFKA_TOPIC_KEYS[name]}"
        )
    close = difflib.get_close_matches(name, list(TOPIC_CONFIGS), n=1, cutoff=0.6)
    return f"{msg} — did you mean {close[0]!r}?" if close else msg


def validate_topic_config(name: str, value: str | None) -> str | None:
    check = TOPIC_CONFIGS.get(name)
    if check is None:
        return _unknown(name, value)
    if value is None:
        return None
    err = check(value)
    if err is None and name in NOT_YET:
        off, why = NOT_YET[name]
        if value != off:
            return f"{name}={value} is not supported yet: {why}"
    return err
