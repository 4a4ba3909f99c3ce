"""Option parsing for the `gregor` Spark data source (pure: no Spark, no network).

Options follow Spark's Kafka source (names are case-insensitive, as Spark passes them):

    bootstrap.servers | kafka.bootstrap.servers      required
    subscribe | subscribePattern | assign            exactly one
    startingOffsets        earliest | latest | {"t":{"0":12,"1":-2}}   (-2 earliest, -1 latest)
    endingOffsets          latest | {"t":{"0":50,"1":-1}}               (batch only)
    startingTimestamp      ms for every partition (wins over the two below)
    startingOffsetsByTimestamp  {"t":{"0":1700000000000}}              (wins over startingOffsets)
    startingOffsetsByTimestampStrategy  error | latest
    maxOffsetsPerTrigger   positive integer (streaming)
    minPartitions          positive integer
    failOnDataLoss         true | false (default true)
    includeHeaders         true | false (default false)
    useArrow               true | false (default true): tasks hand Spark Arrow record batches
    pollTimeoutMs | kafkaConsumer.pollTimeoutMs  positive integer (default 120000): how long a
                           task waits for data
    kafka.isolation.level  read_uncommitted (default) | read_committed (source): read_committed
                           plans each batch up to the last stable offset and never returns
                           records of aborted transactions or control records
    exactlyOnce            true | false (default false; streaming sink only): transactional
                           writes, each batch partition committed once (docs/spark.md)
    kafka.<client key>     a consumer key (source) or producer key (sink) of Gregor's client,
                           checked against the client config registry and passed to the clients;
                           kafka.sasl.jaas.config and PEM trust/key stores are translated to
                           Gregor's keys (client/spark/security.py)

A wrong or conflicting option raises `ConfigError` whose message names the option and the
values it accepts; `DataSource.reader()` / `streamReader()` call `parse_source_options`, so the
error surfaces at `load()`/first action on the driver. An option the source or sink does not
know is refused too, with the closest known name ("did you mean 'startingOffsets'?"); options
of Spark's Kafka source that Gregor does not have say so and what to use instead.

Any thread may call these functions.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from client.config import client_config
from client.errors import ConfigError
from client.spark.offsets import TOPIC_ID_KEY
from client.spark.security import translate

EARLIEST = -2
LATEST = -1

_STRATEGIES = ("subscribe", "subscribePattern", "assign")


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends.

    kind: "earliest" | "latest" | "offsets" (per-partition dict, -2/-1 allowed) |
    "timestamp" (one ms for all partitions) | "timestamps" (per-partition ms).
    """

    kind: str
    offsets: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, offset-or-ms)
    timestamp: int = 0
    topic_ids: tuple[tuple[str, str], ...] = ()  # ("offsets"): (topic, "topicId" given)

    def ids(self) -> dict[str, str]:
        return dict(self.topic_ids)

    def as_dict(self) -> dict[tuple[str, int], int]:
        return {(t, p): o for t, p, o in self.offsets}


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    strategy: str  # subscribe | subscribePattern | assign
    topics: tuple[str, ...] = ()  # subscribe
    pattern: str = ""  # subscribePattern
    assigned: tuple[tuple[str, int], ...] = ()  # assign
    starting: OffsetSpec = OffsetSpec("latest")
    ending: OffsetSpec = OffsetSpec("latest")
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    use_arrow: bool = True
    poll_timeout_ms: int = 120_000
    consumer_config: tuple[tuple[str, str], ...] = ()  # kafka.* options, prefix removed

    @property
    def read_committed(self) -> bool:
        """kafka.isolation.level=read_committed: plan up to the last stable offset, and the
        tasks' consumers skip aborted and control records (the registry checked the value)."""
        return dict(self.consumer_config).get("isolation.level") == "read_committed"

    def matches(self, topic: str) -> bool:
        """Does `topic` belong to the subscription (subscribe / subscribePattern only)?"""
        if self.strategy == "subscribe":
            return topic in self.topics
        if self.strategy == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None = None
    producer_config: tuple[tuple[str, str], ...] = ()
    exactly_once: bool = False


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


# Option names the source and the sink accept (Spark passes them lower-cased; the errors show
# these spellings). `kafka.*` keys are checked separately (`_kafka_settings`).
SOURCE_OPTIONS = (
    "bootstrap.servers",
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "maxOffsetsPerTrigger",
    "minPartitions",
    "failOnDataLoss",
    "includeHeaders",
    "useArrow",
    "pollTimeoutMs",
    "kafkaConsumer.pollTimeoutMs",
)
SINK_OPTIONS = ("bootstrap.servers", "topic", "checkpointLocation", "exactlyOnce")

# Options of Spark's Kafka source/sink that Gregor does not have: what to do instead.
_SPARK_KAFKA_ONLY = {
    "endingtimestamp": "give endingOffsets instead (not supported yet)",
    "endingoffsetsbytimestamp": "give endingOffsets instead (not supported yet)",
    "groupidprefix": "the gregor source reads without a consumer group (Spark's checkpoint "
    "holds the offsets), so there is no group id to prefix",
    "fetchoffset.numretries": "planning retries through the client (kafka.retry.backoff.ms, "
    "kafka.request.timeout.ms)",
    "fetchoffset.retryintervalms": "planning retries through the client (kafka.retry.backoff.ms)",
    "minoffsetspertrigger": "not supported yet; use maxOffsetsPerTrigger or a trigger interval",
    "maxtriggerdelay": "not supported yet (it goes with minOffsetsPerTrigger)",
    "maxrecordsperpartition": "not supported yet; use minPartitions to split large partitions",
    "path": "gregor reads and writes topics, not paths: call load()/save() without a path and "
    "name the topics with subscribe / topic",
}

# kafka.* keys the source or sink owns: refused as Spark's Kafka source refuses them (group.id
# too, which Spark accepts: the gregor source uses no consumer group, so it would do nothing).
_KAFKA_REFUSED = {
    "group.id": "the gregor source reads without a consumer group; Spark's checkpoint holds "
    "the offsets",
    "auto.offset.reset": "set the source option startingOffsets instead",
    "enable.auto.commit": "the source commits no offsets; Spark's checkpoint holds them",
    "key.deserializer": "keys are always read as bytes (cast the key column)",
    "value.deserializer": "values are always read as bytes (cast the value column)",
    "key.serializer": "keys are written from the key column (string or binary)",
    "value.serializer": "values are written from the value column (string or binary)",
}


def _check_names(opts: dict[str, str], known: tuple[str, ...], what: str) -> None:
    """Refuse an option `what` (source/sink) does not know, naming the closest known one."""
    by_lower = {n.lower(): n for n in known}
    for name in sorted(opts):
        if name in by_lower or name.startswith("kafka."):
            continue
        if name in _SPARK_KAFKA_ONLY:
            raise ConfigError(
                f"option {name!r} is an option of Spark's Kafka {what} that gregor does not "
                f"have: {_SPARK_KAFKA_ONLY[name]}"
            )
        close = difflib.get_close_matches(name, list(by_lower), n=1, cutoff=0.6)
        hint = f" — did you mean {by_lower[close[0]]}?" if close else ""
        raise ConfigError(
            f"unknown option {name!r} for the gregor {what}{hint} (accepted: "
            f"{', '.join(known)}, kafka.<client key>; names are case-insensitive)"
        )


def _kafka_settings(opts: dict[str, str], role: str) -> tuple[tuple[str, str], ...]:
    """`kafka.X` options -> ((X, value), ...) for the `role` client (consumer for the source,
    producer for the sink), each checked by the client config registry (unknown key, typo,
    bad value, key not built yet) as if given to the client itself."""
    given: dict[str, str] = {}
    for name in sorted(opts):
        if not name.startswith("kafka.") or name == "kafka.bootstrap.servers":
            continue
        key = name[len("kafka.") :]
        if key in _KAFKA_REFUSED:
            raise ConfigError(f"option {name!r} is not supported: {_KAFKA_REFUSED[key]}")
        given[key] = opts[name]
    out: list[tuple[str, str]] = []
    for key, value in sorted(translate(given).items()):
        try:
            client_config(role, {key: value})
        except ConfigError as exc:
            raise ConfigError(f"option 'kafka.{key}' (the {role} key {key!r}): {exc}") from None
        out.append((key, value))
    return tuple(out)


def _bootstrap(opts: dict[str, str]) -> str:
    plain, prefixed = opts.get("bootstrap.servers"), opts.get("kafka.bootstrap.servers")
    if plain is not None and prefixed is not None and plain.strip() != prefixed.strip():
        raise ConfigError(
            f"options 'bootstrap.servers' ({plain!r}) and 'kafka.bootstrap.servers' "
            f"({prefixed!r}) disagree: give one of them"
        )
    val = plain or prefixed
    if not val or not val.strip():
        raise ConfigError(
            "option 'bootstrap.servers' (or 'kafka.bootstrap.servers') is required: "
            "a comma-separated list of host:port"
        )
    for hp in val.split(","):
        host, sep, port = hp.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(
                f"option 'bootstrap.servers': {hp.strip()!r} is not host:port "
                "(accepted: a comma-separated list of host:port)"
            )
    return val.strip()


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ConfigError(f"option {name!r}: {raw!r} is not a boolean (accepted: true, false)")


def _pos_int(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        v = int(raw.strip())
    except ValueError:
        v = 0
    if v <= 0:
        raise ConfigError(f"option {name!r}: {raw!r} is not valid (accepted: a positive integer)")
    return v


def _json_obj(name: str, raw: str, accepted: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"option {name!r}: invalid JSON ({exc}); accepted: {accepted}") from exc
    if not isinstance(obj, dict) or not obj:
        raise ConfigError(
            f"option {name!r}: expected a non-empty JSON object; accepted: {accepted}"
        )
    return obj


def parse_partition_json(
    name: str, raw: str, accepted: str, ids: dict[str, str] | None = None
) -> tuple[tuple[str, int, int], ...]:
    """'{"t":{"0":5}}' -> (("t", 0, 5),); errors name the option. With `ids` (a dict to fill),
    a topic may also carry "topicId": "<id>" (the offset JSON a query wrote)."""
    out: list[tuple[str, int, int]] = []
    for topic, parts in _json_obj(name, raw, accepted).items():
        if ids is not None and isinstance(parts, dict) and TOPIC_ID_KEY in parts:
            parts = dict(parts)
            tid = parts.pop(TOPIC_ID_KEY)
            if not isinstance(tid, str) or not tid:
                raise ConfigError(
                    f"option {name!r}: topic {topic!r}: {TOPIC_ID_KEY!r} must be a non-empty "
                    f"string (a topic id), got {tid!r}"
                )
            ids[topic] = tid
        if not isinstance(parts, dict) or not parts:
            raise ConfigError(
                f"option {name!r}: topic {topic!r} must map to an object of partition -> value; "
                f"accepted: {accepted}"
            )
        for p, off in parts.items():
            try:
                pn = int(p)
            except ValueError:
                pn = -1
            if pn < 0 or isinstance(off, bool) or not isinstance(off, int):
                raise ConfigError(
                    f"option {name!r}: bad entry {topic!r}/{p!r}: {off!r}; accepted: {accepted}"
                )
            out.append((topic, pn, off))
    return tuple(sorted(out))


def _offset_spec(opts: dict[str, str], name: str, batch: bool | None, starting: bool) -> OffsetSpec:
    raw = opts.get(name.lower())
    if starting:
        default = "earliest" if batch else "latest"
        words = ("earliest",) if batch is True else ("earliest", "latest")
        allowed = {EARLIEST} if batch is True else {EARLIEST, LATEST}
    else:
        default, words, allowed = "latest", ("latest",), {LATEST}
    sentinel = " or ".join(str(a) for a in sorted(allowed))
    accepted = (
        f'{" | ".join(words)} | JSON like {{"topic":{{"0":23}}}} (offsets >= 0, or {sentinel}; '
        f'optionally "{TOPIC_ID_KEY}":"<id>" per topic)'
    )
    if raw is None:
        return OffsetSpec(default)
    v = raw.strip()
    if v.lower() in words:
        return OffsetSpec(v.lower())
    if v.lower() in ("earliest", "latest"):
        raise ConfigError(
            f"option {name!r}: {v!r} is not allowed for "
            f"{'batch' if batch else 'streaming'} queries; accepted: {accepted}"
        )
    if not v.startswith("{"):
        raise ConfigError(f"option {name!r}: {raw!r} is not valid; accepted: {accepted}")
    ids: dict[str, str] = {}
    entries = parse_partition_json(name, v, accepted, ids)
    for topic, p, off in entries:
        if off < 0 and off not in allowed:
            raise ConfigError(
                f"option {name!r}: {topic}/{p} = {off} is not allowed here; accepted: {accepted}"
            )
    return OffsetSpec("offsets", entries, topic_ids=tuple(sorted(ids.items())))


def _subscription(
    opts: dict[str, str],
) -> tuple[str, tuple[str, ...], str, tuple[tuple[str, int], ...]]:
    given = [s for s in _STRATEGIES if s.lower() in opts]
    if len(given) != 1:
        raise ConfigError(
            "exactly one of the options 'subscribe', 'subscribePattern', 'assign' must be "
            f"given (got {', '.join(given) if given else 'none'})"
        )
    strategy = given[0]
    raw = opts[strategy.lower()].strip()
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise ConfigError(
                "option 'subscribe': no topic given (accepted: a comma-separated list of topics)"
            )
        return strategy, topics, "", ()
    if strategy == "subscribePattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise ConfigError(
                f"option 'subscribePattern': {raw!r} is not a valid regular expression ({exc})"
            ) from exc
        if not raw:
            raise ConfigError("option 'subscribePattern': empty (accepted: a regular expression)")
        return strategy, (), raw, ()
    accepted = 'JSON like {"topicA":[0,1],"topicB":[2]}'
    obj = _json_obj("assign", raw, accepted)
    tps: list[tuple[str, int]] = []
    for topic, parts in obj.items():
        if (
            not isinstance(parts, list)
            or not parts
            or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)
        ):
            raise ConfigError(
                f"option 'assign': topic {topic!r} must map to a non-empty list of partition "
                f"numbers; accepted: {accepted}"
            )
        tps.extend((topic, p) for p in parts)
    return strategy, (), "", tuple(sorted(set(tps)))


def parse_source_options(options: Mapping[str, Any], *, batch: bool | None) -> SourceOptions:
    """Validate reader options; `batch` selects batch (True) or streaming (False) rules, None
    checks only what holds for both (at load(), before Spark says which it is)."""
    opts = _lower(options)
    _check_names(opts, SOURCE_OPTIONS, "source")
    bootstrap = _bootstrap(opts)
    consumer_config = _kafka_settings(opts, "consumer")
    strategy, topics, pattern, assigned = _subscription(opts)
    starting = _offset_spec(opts, "startingOffsets", batch, starting=True)
    if batch is not False:
        ending = _offset_spec(opts, "endingOffsets", batch, starting=False)
    else:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if name.lower() in opts:
                raise ConfigError(
                    f"option {name!r} is not valid for streaming queries (batch reads only)"
                )
        ending = OffsetSpec("latest")
    if "startingoffsetsbytimestamp" in opts:
        accepted = 'JSON like {"topic":{"0":1700000000000}} (timestamps in ms >= 0)'
        entries = parse_partition_json(
            "startingOffsetsByTimestamp", opts["startingoffsetsbytimestamp"], accepted
        )
        if any(ts < 0 for _, _, ts in entries):
            raise ConfigError(
                f"option 'startingOffsetsByTimestamp': negative; accepted: {accepted}"
            )
        starting = OffsetSpec("timestamps", entries)
    if "startingtimestamp" in opts:
        raw = opts["startingtimestamp"].strip()
        if not raw.isdigit():
            raise ConfigError(
                f"option 'startingTimestamp': {raw!r} is not valid "
                "(accepted: milliseconds since the epoch, an integer >= 0)"
            )
        starting = OffsetSpec("timestamp", timestamp=int(raw))
    ts_strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if ts_strategy not in ("error", "latest"):
        raise ConfigError(
            f"option 'startingOffsetsByTimestampStrategy': {ts_strategy!r} is not valid "
            "(accepted: error, latest)"
        )
    max_per_trigger = _pos_int(opts, "maxOffsetsPerTrigger")
    if batch is True and max_per_trigger is not None:
        raise ConfigError("option 'maxOffsetsPerTrigger' is only valid for streaming queries")
    if strategy == "assign":
        wanted = set(assigned)
        for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
            extra = [(t, p) for t, p, _ in spec.offsets if (t, p) not in wanted]
            if extra:
                raise ConfigError(
                    f"option {name!r} names {extra[0][0]}/{extra[0][1]} which is not in 'assign'"
                )
    poll = _pos_int(opts, "pollTimeoutMs")
    spark_poll = _pos_int(opts, "kafkaConsumer.pollTimeoutMs")
    if poll is not None and spark_poll is not None and poll != spark_poll:
        raise ConfigError(
            "options 'pollTimeoutMs' and 'kafkaConsumer.pollTimeoutMs' (the same setting, by "
            "Gregor's and by Spark's name) disagree: give one of them"
        )
    poll = poll if poll is not None else spark_poll
    return SourceOptions(
        bootstrap_servers=bootstrap,
        strategy=strategy,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        starting=starting,
        ending=ending,
        timestamp_strategy=ts_strategy,
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_pos_int(opts, "minPartitions"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        use_arrow=_bool(opts, "useArrow", True),
        poll_timeout_ms=poll if poll is not None else 120_000,
        consumer_config=consumer_config,
    )


_SINK_COLUMNS = {"key", "value", "topic", "partition", "headers"}


def parse_sink_options(options: Mapping[str, Any], columns: list[str]) -> SinkOptions:
    """Validate writer options against the DataFrame's column names."""
    opts = _lower(options)
    for name in SOURCE_OPTIONS:
        if name.lower() in opts and name.lower() not in (n.lower() for n in SINK_OPTIONS):
            raise ConfigError(f"option {name!r} is a reader option; it is not valid for writes")
    _check_names(opts, SINK_OPTIONS, "sink")
    bootstrap = _bootstrap(opts)
    producer_config = _kafka_settings(opts, "producer")
    topic = opts.get("topic")
    cols = {c.lower() for c in columns}
    if "value" not in cols:
        raise ConfigError(
            "the DataFrame written to gregor needs a 'value' column (string or binary); "
            f"accepted columns: {', '.join(sorted(_SINK_COLUMNS))}"
        )
    if topic is None and "topic" not in cols:
        raise ConfigError("no topic: give the option 'topic' or a 'topic' column in the DataFrame")
    if topic is not None and not topic.strip():
        raise ConfigError("option 'topic': empty (accepted: a topic name)")
    exactly_once = _bool(opts, "exactlyOnce", False)
    if exactly_once:
        for key in ("transactional.id", "enable.idempotence", "acks"):
            if key in dict(producer_config):
                raise ConfigError(
                    f"option 'kafka.{key}' cannot be combined with exactlyOnce=true: the sink "
                    "sets it (transactional id per query and partition, idempotence, acks=all)"
                )
        if topic is None:
            raise ConfigError(
                "exactlyOnce=true needs the option 'topic' (the batch progress of each task is "
                "committed with its rows against that topic's name; a 'topic' column may still "
                "route rows elsewhere)"
            )
    return SinkOptions(
        bootstrap_servers=bootstrap,
        topic=topic.strip() if topic else None,
        producer_config=producer_config,
        exactly_once=exactly_once,
    )
