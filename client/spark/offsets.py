"""Offsets and range planning for the `gregor` Spark source (pure: no Spark, no network).

A streaming offset is Spark-side JSON: `{"topic": {"0": 12, "1": 40, "topicId": "AbC..."}}` —
the next offset to read per partition, and the id the controller gave the topic (Kafka's text
form), so a topic deleted and recreated under the same name is told apart from the one the
offsets were taken in. Spark hands it back with string partition keys, so every function here
takes and returns that shape via `to_json` / `from_json` / `ids_from_json`. An offset written
before ids were kept (no "topicId") still loads: its topics have no id to compare, and the next
offset written carries them.

Planning works on `PartitionState(log_start, high_watermark)` snapshots taken on the driver:

- `recreated(old_ids, new_ids)`: topics whose id changed (deleted and recreated), reported
  through `report_data_loss` with `recreated_reason`: the new topic is read from its earliest
  offset (failOnDataLoss=false), never from the old topic's offsets.
- `reconcile(start, current, fail)`: checks the wanted start offsets against what the broker
  still has and names the reason when they are gone (retention or DeleteRecords moved the log
  start past them, topic/partition deleted, or offset beyond the end after a truncation). `fail=True` raises
  `DataLossError`; otherwise the reason is logged and the start skips ahead.
- `rate_limit(start, end, limit)`: maxOffsetsPerTrigger split over partitions in proportion to
  their backlog (largest-remainder rounding, so a batch never exceeds the limit and the split
  is deterministic).
- `plan_ranges(start, end, min_partitions)`: one range per partition, split further into
  offset sub-ranges when `minPartitions` asks for more tasks than there are partitions
  (Spark's KafkaOffsetRangeCalculator rule).

Any thread may call these functions.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import NamedTuple

from client.errors import GregorError

log = logging.getLogger(__name__)

TP = tuple[str, int]
EARLIEST_SENTINEL = -2
LATEST_SENTINEL = -1
TOPIC_ID_KEY = "topicId"  # beside the partition keys of a topic in the offset JSON
SKIP_AHEAD = "skip ahead"
READ_NEW_TOPIC = "read the new topic from its earliest offset"


class DataLossError(GregorError):
    """Wanted offsets are no longer available (failOnDataLoss=true)."""


class PartitionState(NamedTuple):
    log_start: int
    high_watermark: int


class OffsetRange(NamedTuple):
    topic: str
    partition: int
    start: int  # inclusive
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


# Spark's offset JSON as an object: {"topic": {"0": offset, ..., "topicId": id}}
OffsetsJson = dict[str, dict[str, int | str]]


def to_json(offsets: Mapping[TP, int], topic_ids: Mapping[str, str] | None = None) -> OffsetsJson:
    """{(t, p): o} -> {"t": {"p": o, "topicId": id}} with sorted partition keys (stable
    checkpoints); "topicId" only for topics whose id is known."""
    out: dict[str, dict[str, int | str]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    for t, parts in out.items():
        tid = (topic_ids or {}).get(t)
        if tid:
            parts[TOPIC_ID_KEY] = tid
    return out


def from_json(obj: Mapping[str, Mapping[str, int | str]] | None) -> dict[TP, int]:
    """{"t": {"p": o, "topicId": id}} (partition keys as strings or ints) -> {(t, p): o}."""
    out: dict[TP, int] = {}
    for t, parts in (obj or {}).items():
        for p, o in parts.items():
            if p != TOPIC_ID_KEY:
                out[(t, int(p))] = int(o)
    return out


def ids_from_json(obj: Mapping[str, Mapping[str, int | str]] | None) -> dict[str, str]:
    """{"t": {..., "topicId": id}} -> {t: id}; topics without an id (older offsets) left out."""
    out: dict[str, str] = {}
    for t, parts in (obj or {}).items():
        tid = parts.get(TOPIC_ID_KEY)
        if isinstance(tid, str) and tid:
            out[t] = tid
    return out


def recreated(old_ids: Mapping[str, str], new_ids: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """{topic: (old id, new id)} for topics known to both whose id changed."""
    return {
        t: (old_ids[t], new)
        for t, new in sorted(new_ids.items())
        if t in old_ids and old_ids[t] != new
    }


def recreated_reason(topic: str, old: str, new: str, where: str = "the checkpoint") -> str:
    return f"topic {topic} was deleted and recreated (id {old} in {where}, {new} now)"


def data_loss_reason(tp: TP, wanted: int, state: PartitionState | None) -> str | None:
    """Why offset `wanted` of `tp` cannot be read, or None if it can."""
    t, p = tp
    if state is None:
        return f"{t}-{p}: topic or partition deleted; offsets from {wanted} can no longer be read"
    if wanted < state.log_start:
        return (
            f"{t}-{p}: offsets {wanted}..{state.log_start - 1} were removed by retention "
            f"or DeleteRecords (log start offset moved to {state.log_start})"
        )
    if wanted > state.high_watermark:
        return (
            f"{t}-{p}: offset {wanted} is beyond the end of the log (high watermark "
            f"{state.high_watermark}); the log was truncated"
        )
    return None


def report_data_loss(reason: str, fail: bool, instead: str = SKIP_AHEAD) -> None:
    """Raise (fail=True) or log the reason, naming the option and what false does."""
    if fail:
        raise DataLossError(
            f"data loss: {reason}. Set failOnDataLoss=false to {instead} instead of failing."
        )
    log.warning("data loss (failOnDataLoss=false, so %s): %s", instead, reason)


def reconcile(
    start: Mapping[TP, int], current: Mapping[TP, PartitionState], fail: bool
) -> dict[TP, int]:
    """Effective start offsets: partitions still present, clamped into [log_start, hw].

    Partitions in `current` but not in `start` (new partitions/topics) start at their log
    start. Lost data is reported (raise or log) per `report_data_loss`.
    """
    out: dict[TP, int] = {}
    for tp, wanted in sorted(start.items()):
        st = current.get(tp)
        reason = data_loss_reason(tp, wanted, st)
        if reason is not None:
            report_data_loss(reason, fail)
            if st is None:
                continue
            out[tp] = st.log_start if wanted < st.log_start else st.high_watermark
        else:
            out[tp] = wanted
    for tp, st in current.items():
        if tp not in out and tp not in start:
            out[tp] = st.log_start
    return out


def rate_limit(start: Mapping[TP, int], end: Mapping[TP, int], limit: int) -> dict[TP, int]:
    """End offsets reading at most `limit` records in total, split by backlog.

    Each partition gets floor(limit * backlog / total); the remainder goes one record at a
    time to the largest fractional parts (ties by topic, partition), never beyond a
    partition's backlog. The sum of the returned ranges is exactly min(limit, total backlog).
    """
    backlog = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= limit:
        return dict(end)
    share: dict[TP, int] = {}
    rema: list[tuple[int, TP]] = []
    for tp in sorted(backlog):
        q, r = divmod(limit * backlog[tp], total)
        share[tp] = q
        rema.append((-r, tp))
    left = limit - sum(share.values())
    for _, tp in sorted(rema):
        if left <= 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            left -= 1
    return {tp: (start.get(tp, end[tp]) + share[tp]) if backlog[tp] else end[tp] for tp in end}


def plan_ranges(
    start: Mapping[TP, int], end: Mapping[TP, int], min_partitions: int | None = None
) -> list[OffsetRange]:
    """Non-empty [start, end) ranges, split to reach `min_partitions` tasks when asked."""
    ranges = [
        OffsetRange(t, p, start[(t, p)], end[(t, p)])
        for (t, p) in sorted(end)
        if (t, p) in start and end[(t, p)] > start[(t, p)]
    ]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(round(r.size / total * min_partitions), 1)
        remaining = r.size
        s = r.start
        for i in range(parts):
            n = remaining // (parts - i)
            remaining -= n
            e = min(s + n, r.end)
            if e > s:
                out.append(OffsetRange(r.topic, r.partition, s, e))
            s = e
    return out
