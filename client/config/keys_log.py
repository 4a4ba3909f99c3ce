"""Log storage keys (broker): segments, indexes, retention, flushing. One line per key."""

from __future__ import annotations

from client.config.keydef import IGNORED, REFUSED, key
from client.config.types import at_least, at_least_or_minus_one, in_range, items_in

B = ("broker",)
MiB = 1024 * 1024
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
LONG_MAX = 2**63 - 1

KEYS = [
    key("log.segment.bytes", "size", 1024 * MiB, "roll a new segment when the active one reaches this size", B, in_range(75, 2**31 - 1)),
    key("log.roll.ms", "duration_ms", 7 * DAY_MS, "roll a new segment when the active one is this old", B, at_least(1), aliases=("log.segment.ms",), unit_aliases=(("log.roll.hours", HOUR_MS),)),
    key("log.roll.jitter.ms", "duration_ms", 0, "most random time taken off log.roll.ms per segment, so the segments of many partitions do not roll at once", B, at_least(0), status=IGNORED, why="segments roll at exactly log.roll.ms (topic: segment.ms) of age", unit_aliases=(("log.roll.jitter.hours", HOUR_MS),)),
    key("log.index.interval.bytes", "size", 4096, "bytes of records between offset-index entries", B, at_least(0)),
    key("log.index.size.max.bytes", "size", 10 * MiB, "largest offset/time index file; the segment rolls when it is full", B, at_least(12)),
    key("log.retention.ms", "duration_ms", 7 * DAY_MS, "delete segments older than this; -1: keep forever", B, at_least_or_minus_one(1), unit_aliases=(("log.retention.minutes", 60_000), ("log.retention.hours", HOUR_MS))),
    key("log.retention.bytes", "size", -1, "delete old segments while a partition is bigger than this; -1: no limit", B, at_least_or_minus_one(0)),
    key("log.retention.check.interval.ms", "duration_ms", 300_000, "how often retention is checked", B, at_least(1)),
    key("log.segment.delete.delay.ms", "duration_ms", 60_000, "wait before deleting a segment's files after it leaves the log", B, at_least(0), status=IGNORED, why='segments leave the log and their files are deleted at once'),
    key("log.max.open.files", "int", -1, "segment files a broker keeps open at once (an LRU over all log dirs; index files hold none); -1: half the process's open-files limit (RLIMIT_NOFILE); must stay below that limit", B, at_least_or_minus_one(16)),
    key("log.flush.on.ack", "bool", True, "fsync appended records before acknowledging them (group commit); false: Kafka's page-cache behaviour", B),
    key("log.flush.interval.messages", "int", LONG_MAX, "with log.flush.on.ack=false: fsync after this many records", B, at_least(1)),
    key("log.flush.interval.ms", "duration_ms", LONG_MAX, "with log.flush.on.ack=false: fsync after this many ms", B, at_least(1)),
    key("log.cleanup.policy", "list", ("delete",), "delete (time and size retention) and/or compact (the log cleaner keeps the latest record per key); topic key cleanup.policy", B, items_in(("delete", "compact"))),
    key("log.cleaner.enable", "bool", True, "run the log cleaner thread that compacts cleanup.policy=compact logs (false: they are never compacted and grow)", B),
    key("log.cleaner.threads", "int", 1, "log cleaner threads", B, at_least(1), status=REFUSED, why='one cleaner thread per broker'),
    key("log.cleaner.dedupe.buffer.size", "size", 128 * MiB, "memory of the cleaner's key -> offset map (112 bytes a key); a full map cleans in several passes", B, at_least(1024)),
    key("log.cleaner.backoff.ms", "duration_ms", 15_000, "the cleaner's sleep when no log is dirty enough", B, at_least(1)),
    key("log.cleaner.min.cleanable.ratio", "float", 0.5, "clean a log only when this share of its cleanable bytes is dirty (not yet cleaned); topic key min.cleanable.dirty.ratio", B, in_range(0.0, 1.0)),
    key("log.cleaner.min.compaction.lag.ms", "duration_ms", 0, "a record stays uncompacted at least this long after its timestamp (the cleaner stops at the first segment holding a younger one); topic key min.compaction.lag.ms", B, at_least(0)),
    key("log.cleaner.delete.retention.ms", "duration_ms", DAY_MS, "a tombstone (null value) in a compacted log is kept at least this long after its timestamp, and until a clean has passed it; topic key delete.retention.ms", B, at_least(0)),
    key("log.message.timestamp.type", "enum", "CreateTime", "record timestamps as sent (CreateTime) or set on append (LogAppendTime)", B, choices=("CreateTime", "LogAppendTime"), status=REFUSED, why='LogAppendTime is not built yet'),
    key("num.recovery.threads.per.data.dir", "int", 1, "threads recovering logs at start-up, per log dir", B, at_least(1), status=IGNORED, why='recovery runs on one thread per start-up'),
]  # fmt: skip
