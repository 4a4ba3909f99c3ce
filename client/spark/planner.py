"""Driver side of the `gregor` source: what the cluster holds now, and where reading starts.

`Planner` wraps an Admin client (opened lazily, closed by `close()`), and answers:

- `state()`: {(topic, partition): PartitionState(log_start, high_watermark)} for every partition
  the subscription covers right now (`subscribe` topics that exist, topics matching
  `subscribePattern` — so new topics and new partitions appear here — or the `assign` list).
- `topic_ids`: after `state()`, {topic: id} as the cluster names them now (the id the
  controller gave each topic); `forget_recreated(spec, state, name, sentinel)` reports a topic
  whose id in a startingOffsets/endingOffsets JSON is not its id now (deleted and recreated) and
  reads the new topic from its earliest (start) or to its latest (end) offset instead.
- `resolve(spec, state, default)`: turn startingOffsets / endingOffsets / startingTimestamp /
  startingOffsetsByTimestamp into concrete offsets. The broker answers timestamp lookups per
  batch, so the driver reads forward from that batch to the first record at or after the
  timestamp.

Runs on the Spark driver's Python worker (one thread). Not picklable while open: readers keep a
Planner only between calls and drop it in `__getstate__`.
"""

from __future__ import annotations

import difflib
import logging
import time
from typing import Any

from client.errors import (
    ConfigError,
    GregorError,
    GregorTimeoutError,
    UnknownTopicOrPartitionError,
)
from client.spark.errors import GregorSparkError
from client.spark.offsets import (
    EARLIEST_SENTINEL,
    LATEST_SENTINEL,
    READ_NEW_TOPIC,
    TP,
    PartitionState,
    recreated,
    recreated_reason,
    report_data_loss,
)
from client.spark.options import OffsetSpec, SourceOptions

log = logging.getLogger(__name__)

_LEADER_WAIT_S = 10.0


class Planner:
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._admin: Any = None
        self.topic_ids: dict[str, str] = {}
        self.missing: list[str] = []

    @property
    def admin(self) -> Any:
        if self._admin is None:
            from client import Admin

            self._admin = Admin(
                self._admin_settings(), bootstrap_servers=self.opts.bootstrap_servers
            )
        return self._admin

    def _admin_settings(self) -> dict[str, str]:
        """The kafka.* options an Admin accepts (client.id, request.timeout.ms ...); the
        consumer-only ones (fetch sizes ...) are for the tasks' consumers."""
        from client.config import REGISTRY

        admin_keys = REGISTRY.for_role("admin")
        out = {}
        for k, v in self.opts.consumer_config:
            known = REGISTRY.get(k)
            if known is not None and known.name in admin_keys:
                out[k] = v
        return out

    def close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            admin.close()

    def _topics(self) -> list[str]:
        o = self.opts
        if o.strategy == "subscribe":
            return list(o.topics)
        if o.strategy == "assign":
            return sorted({t for t, _ in o.assigned})
        return sorted(t for t in self.admin.list_topics() if o.matches(t))

    def _describe(self, topic: str) -> dict[int, PartitionState] | None:
        """Partitions of `topic` with their offsets; None if the topic does not exist."""
        deadline = time.monotonic() + _LEADER_WAIT_S
        while True:
            try:
                desc = self.admin.describe_topic(topic)
            except UnknownTopicOrPartitionError:
                return None
            if desc.topic_id:
                self.topic_ids[topic] = desc.topic_id
            parts = {
                p.partition: PartitionState(p.log_start_offset, p.high_watermark)
                for p in desc.partitions
            }
            if all(s.log_start >= 0 and s.high_watermark >= 0 for s in parts.values()):
                return parts
            if time.monotonic() > deadline:
                raise GregorTimeoutError(f"topic {topic!r}: partitions without a leader")
            time.sleep(0.1)  # leader election in progress: retry with a short backoff

    def state(self) -> dict[TP, PartitionState]:
        """Partitions the subscription covers now. Topics named by subscribe/assign that do
        not exist are left out and remembered in `missing` (see `check_missing`)."""
        out: dict[TP, PartitionState] = {}
        wanted = set(self.opts.assigned) if self.opts.strategy == "assign" else None
        self.missing = []
        self.topic_ids = {}
        for topic in self._topics():
            parts = self._describe(topic)
            if parts is None:
                self.missing.append(topic)
                continue
            for p, st in parts.items():
                if wanted is None or (topic, p) in wanted:
                    out[(topic, p)] = st
        if self.opts.read_committed and out:
            out = self._stable(out)
        return out

    def _stable(self, state: dict[TP, PartitionState]) -> dict[TP, PartitionState]:
        """read_committed: the end of each partition is its last stable offset (ListOffsets
        latest with isolation_level 1), so a batch never waits on an open transaction."""
        from client import Consumer, TopicPartition

        tps = [TopicPartition(t, p) for t, p in state]
        with Consumer(
            dict(self.opts.consumer_config),
            bootstrap_servers=self.opts.bootstrap_servers,
            enable_auto_commit=False,
        ) as consumer:
            lso = consumer.end_offsets(tps)
        return {
            (tp.topic, tp.partition): PartitionState(
                state[(tp.topic, tp.partition)].log_start,
                min(lso[tp], state[(tp.topic, tp.partition)].high_watermark),
            )
            for tp in tps
        }

    def check_missing(self, state: dict[TP, PartitionState], batch: bool) -> None:
        """The missing-topic rule (docs/spark.md "Missing topics"), after `state()`:

        - assign: a named partition that does not exist fails the query (batch and streaming),
          as Spark's Kafka source does;
        - subscribe, batch: a named topic that does not exist fails the query with
          failOnDataLoss=true (the default) instead of reading 0 rows; with
          failOnDataLoss=false it is logged and read as empty;
        - subscribe, streaming: a topic not created yet is waited for (logged once): it is read
          from its beginning once it exists, as a Kafka consumer does (Spark 3.4+ fails here;
          docs/spark.md says why Gregor does not);
        - subscribePattern: matching no topic is not an error (logged).
        """
        o = self.opts
        if o.strategy == "assign":
            gone = [(t, p) for t, p in o.assigned if (t, p) not in state]
            if gone:
                t, p = gone[0]
                if t in self.missing:
                    what = f"topic {t!r} does not exist{self._hint(t)}"
                else:
                    n = self._partition_count(t)
                    has = f" (topic {t!r} has partitions 0..{n - 1})" if n else ""
                    what = f"partition {t}-{p} does not exist{has}"
                raise GregorSparkError(f"option 'assign': {what}")
            return
        if o.strategy == "subscribePattern":
            if not state:
                log.warning("subscribePattern %r matches no topic (yet)", o.pattern)
            return
        for t in self.missing:
            if not batch:
                log.warning(
                    "topic %r (subscribe) does not exist yet: the query reads it from its "
                    "beginning once it is created",
                    t,
                )
            elif o.fail_on_data_loss:
                raise GregorSparkError(
                    f"option 'subscribe': topic {t!r} does not exist{self._hint(t)} (a batch "
                    "read fails rather than return 0 rows: create the topic, or set "
                    "failOnDataLoss=false to read a missing topic as empty)"
                )
            else:
                log.warning(
                    "topic %r (subscribe) does not exist: read as empty (failOnDataLoss=false)",
                    t,
                )

    def _hint(self, topic: str) -> str:
        try:
            names = sorted(self.admin.list_topics())
        except GregorError:
            return ""
        close = difflib.get_close_matches(topic, names, n=1, cutoff=0.6)
        return f" — did you mean {close[0]!r}?" if close else ""

    def _partition_count(self, topic: str) -> int | None:
        try:
            return len(self.admin.describe_topic(topic).partitions)
        except GregorError:
            return None

    def forget_recreated(
        self, spec: OffsetSpec, state: dict[TP, PartitionState], name: str, sentinel: int
    ) -> OffsetSpec:
        """`spec` with the offsets of topics recreated since it was written (its "topicId" is
        not the topic's id now, per `state()`) replaced by `sentinel` (earliest/latest) for
        every partition of the new topic; each such topic is reported as data loss first
        (raised with failOnDataLoss=true)."""
        if spec.kind != "offsets" or not spec.topic_ids:
            return spec
        gone = recreated(spec.ids(), self.topic_ids)
        if not gone:
            return spec
        for t, (old, new) in gone.items():
            report_data_loss(
                recreated_reason(t, old, new, f"option {name!r}"),
                self.opts.fail_on_data_loss,
                READ_NEW_TOPIC,
            )
        kept = [e for e in spec.offsets if e[0] not in gone]
        kept += [(t, p, sentinel) for t, p in state if t in gone]
        ids = tuple((t, i) for t, i in spec.topic_ids if t not in gone)
        return OffsetSpec("offsets", tuple(sorted(kept)), topic_ids=ids)

    def resolve(
        self, spec: OffsetSpec, state: dict[TP, PartitionState], default: str, name: str
    ) -> dict[TP, int]:
        """Concrete offsets for every partition in `state` per `spec`."""

        def word(kind: str, st: PartitionState) -> int:
            return st.log_start if kind == "earliest" else st.high_watermark

        if spec.kind in ("earliest", "latest"):
            return {tp: word(spec.kind, st) for tp, st in state.items()}
        if spec.kind == "offsets":
            given = spec.as_dict()
            missing = [tp for tp in given if tp not in state]
            if missing:
                t, p = missing[0]
                raise ConfigError(
                    f"option {name!r} names {t}/{p}, which does not exist (or is not "
                    "covered by the subscription)"
                )
            out = {}
            for tp, st in state.items():
                o = given.get(tp)
                if o is None:
                    out[tp] = word(default, st)
                elif o == EARLIEST_SENTINEL:
                    out[tp] = st.log_start
                elif o == LATEST_SENTINEL:
                    out[tp] = st.high_watermark
                else:
                    out[tp] = o
            return out
        # timestamps
        if spec.kind == "timestamp":
            query = dict.fromkeys(state, spec.timestamp)
        else:
            query = {tp: ts for tp, ts in spec.as_dict().items() if tp in state}
        from client import TopicPartition

        got = (
            self.admin.list_offsets({TopicPartition(*tp): ts for tp, ts in query.items()})
            if query
            else {}
        )
        out = {}
        for tp, st in state.items():
            if tp not in query:
                out[tp] = word(default, st)
                continue
            off = got.get(TopicPartition(*tp), -1)
            if off is None or off < 0:
                if self.opts.timestamp_strategy == "latest":
                    off = st.high_watermark
                else:
                    raise ConfigError(
                        f"no record at or after timestamp {query[tp]} in {tp[0]}-{tp[1]} "
                        "(startingTimestamp / startingOffsetsByTimestamp); set "
                        "startingOffsetsByTimestampStrategy=latest to start at the end instead"
                    )
            out[tp] = self._refine(tp, off, query[tp], st.high_watermark)
        return out

    def _refine(self, tp: TP, offset: int, ts: int, end: int) -> int:
        """First offset >= `offset` whose record timestamp >= `ts` (ListOffsets answers with
        batch granularity: the base offset of the first batch whose max timestamp >= ts)."""
        if offset >= end:
            return offset
        from client import Consumer, TopicPartition

        t = TopicPartition(*tp)
        with Consumer(
            dict(self.opts.consumer_config),
            bootstrap_servers=self.opts.bootstrap_servers,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        ) as c:
            c.assign([t])
            c.seek(t, offset)
            deadline = time.monotonic() + _LEADER_WAIT_S
            pos = offset
            while pos < end:
                recs = c.poll(timeout_ms=200)
                for r in recs:
                    if r.timestamp >= ts:
                        return r.offset
                    pos = r.offset + 1
                if not recs and time.monotonic() > deadline:
                    raise GregorTimeoutError(f"{tp[0]}-{tp[1]}: no record at offset {pos}")
            return end
