"""The Kafka APIs served, each a translation: kio request → Gregor's native handler
(broker/handlers/) → kio response. Nothing here touches logs, groups or metadata itself; the
native handlers do, so both listeners serve the same state through the same code.

    API             versions   native handler      notes
    ApiVersions     0-3        (answered here)     header v0 always; unknown version → v0
                                                   UNSUPPORTED_VERSION with the table
    Metadata        0-12       Metadata (3)        each broker's address on this listener;
                                                   auto-create as the native one
    Produce         0-9        Produce (0)         v0-2 advertised, refused (Kafka 4); batches
                                                   converted (broker/kafka/records.py)
    Fetch           4-12       Fetch (1)           whole batches, converted; no fetch sessions
                                                   (session_id 0 tells the client so)
    ListOffsets     1-7        ListOffsets (2)     -2 earliest, -1 latest, else by timestamp
    InitProducerId  0-4        InitProducerId (22) idempotence, and transactional ids (apis_txn.py)

Fetch with isolation_level 1 (read_committed) reads up to the last stable offset and returns
the aborted transactions of the range; ListOffsets' latest is then the last stable offset.
WriteTxnMarkers (27) is in apis_txn_markers.py.

Fetch stops at v12 (v13 names topics by id only) and Metadata at v12 to match.

The group and admin APIs register themselves the same way from apis_groups.py (offsets),
apis_classic.py (classic groups), apis_consumer_group.py (KIP-848), apis_group_admin.py and
apis_admin*.py; docs/kafka-compat.md has the whole table.

Threads: I/O threads; answers from whatever thread the native handler answers on.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from broker.kafka import records
from broker.kafka.codec import ZERO_UUID, millis
from broker.kafka.kio_requests import (
    ApiVersionsRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from broker.kafka.request import KafkaContext, whole_error
from client.errors import CorruptRecordError, ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body

if TYPE_CHECKING:
    from broker.services import Services

log = logging.getLogger(__name__)

UNSUPPORTED_COMPRESSION_TYPE = 76
UNKNOWN_TOPIC_ID = 100
TOPIC_AUTHORIZATION_FAILED = 29


@dataclass(frozen=True)
class KafkaApi:
    key: int
    min_version: int
    max_version: int
    # The body is the kio entity kio's index gives for (key, version): each translation names
    # the union of its versions (broker/kafka/kio_requests.py), which only run time can pick,
    # and tests/unit/kafka_listener/test_request_types.py checks that the two agree
    handle: Callable[[KafkaContext, Any], None]
    refused_below: int = 0  # versions advertised but refused (Produce v0-2, as Kafka 4)
    refused_why: str = "as Kafka 4, which still advertises them for librdkafka's sake"


APIS: dict[int, KafkaApi] = {}


B = TypeVar("B")


def api(
    key: int, min_version: int, max_version: int, refused_below: int = 0, refused_why: str = ""
) -> Callable[[Callable[[KafkaContext, B], None]], Callable[[KafkaContext, B], None]]:
    def register(fn: Callable[[KafkaContext, B], None]) -> Callable[[KafkaContext, B], None]:
        entry = KafkaApi(int(key), min_version, max_version, fn, refused_below)
        APIS[int(key)] = replace(entry, refused_why=refused_why) if refused_why else entry
        return fn

    return register


def api_versions_body(error_code: int = 0) -> Body:
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version}
            for a in sorted(APIS.values(), key=lambda a: a.key)
        ],
        "throttle_time": 0,
    }


@api(ApiKey.API_VERSIONS, 0, 3)
def api_versions(ctx: KafkaContext, body: ApiVersionsRequest) -> None:
    ctx.respond(api_versions_body())


# -- Metadata ----------------------------------------------------------------------------------
def _topic_id(services: Services, name: str) -> uuid.UUID:
    t = services.metadata.topics.get(name)
    raw = getattr(t, "topic_id", b"") if t is not None else b""
    return uuid.UUID(bytes=raw) if isinstance(raw, bytes) and len(raw) == 16 else ZERO_UUID


def _names_by_id(services: Services) -> dict[uuid.UUID, str]:
    out = {}
    for name, t in services.metadata.topics.items():
        raw = getattr(t, "topic_id", b"")
        if isinstance(raw, bytes) and len(raw) == 16:
            out[uuid.UUID(bytes=raw)] = name
    return out


def controller_for_clients(
    ctx: KafkaContext, controller_id: int | None, brokers: list[Body]
) -> int:
    """The controller id a Kafka client is told: the active controller when it is a broker too
    (a combined process), else this broker, which forwards what clients send "the controller"
    (CreateTopics, ...), as a Kafka broker in KRaft mode answers with an alive broker: Kafka
    clients can only reach brokers, and librdkafka waits for its controller to be one."""
    ids = {b["node_id"] if "node_id" in b else b["broker_id"] for b in brokers}
    if controller_id is not None and controller_id in ids:
        return controller_id
    return int(ctx.services.node_id)


@api(ApiKey.METADATA, 0, 12)
def metadata(ctx: KafkaContext, body: MetadataRequest) -> None:
    requested = body.topics
    unknown_ids: list[uuid.UUID | None] = []
    by_id_names: dict[str, uuid.UUID | None] = {}  # name -> the topic id it was asked by
    if requested is None or (ctx.api_version == 0 and not requested):
        names = None  # every topic (v0: an empty list meant all)
    else:
        names = []
        by_id = _names_by_id(ctx.services)
        for t in requested:  # v10+: by name or, name null, by topic id (KIP-848 clients)
            topic_id: uuid.UUID | None = getattr(t, "topic_id", None)
            name = t.name if t.name is not None else by_id.get(topic_id or ZERO_UUID)
            if name is not None:
                names.append({"name": name})
                if t.name is None:
                    by_id_names[name] = topic_id
            else:
                unknown_ids.append(topic_id)
    auto = getattr(body, "allow_auto_topic_creation", True)  # v0-3: always allowed

    def refused(t: Body) -> bool:
        return bool(t["error_code"] == TOPIC_AUTHORIZATION_FAILED)

    def answer(a: Body) -> None:
        # a topic asked for by id that the principal may not DESCRIBE: UNKNOWN_TOPIC_ID, as
        # Kafka answers (its name is not told)
        if whole_error(a):
            ctx.close(f"Metadata failed: {a.get('error_message')}")
            return
        ctx.respond(
            {
                "throttle_time": 0,
                "brokers": a["brokers"],
                "cluster_id": a["cluster_id"],
                "controller_id": controller_for_clients(ctx, a["controller_id"], a["brokers"]),
                "topics": [
                    {
                        "error_code": t["error_code"],
                        "name": t["name"],
                        "topic_id": ZERO_UUID  # not told to who may not DESCRIBE it
                        if t["error_code"] == TOPIC_AUTHORIZATION_FAILED
                        else _topic_id(ctx.services, t["name"]),
                        "is_internal": t["is_internal"],
                        "partitions": [
                            {**p, "partition_index": p["partition"]} for p in t["partitions"]
                        ],
                        "topic_authorized_operations": -2147483648,
                    }
                    for t in a["topics"]
                    if not (refused(t) and t["name"] in by_id_names)
                ]
                + [
                    {
                        "error_code": UNKNOWN_TOPIC_ID,
                        "name": None,
                        "topic_id": tid,
                        "is_internal": False,
                        "partitions": [],
                    }
                    for tid in unknown_ids
                    + [
                        by_id_names[t["name"]]
                        for t in a["topics"]
                        if refused(t) and t["name"] in by_id_names
                    ]
                ],
                "cluster_authorized_operations": -2147483648,
            }
        )

    ctx.call_native(
        ApiKey.METADATA, {"topics": names, "allow_auto_topic_creation": bool(auto)}, answer
    )


# -- Produce -----------------------------------------------------------------------------------
@api(ApiKey.PRODUCE, 0, 9, refused_below=3)
def produce(ctx: KafkaContext, body: ProduceRequest) -> None:
    acks = int(body.acks)
    early: dict[tuple[str, int], Body] = {}  # partitions refused before the native call
    order: list[tuple[str, list[int]]] = []
    topics = []
    for t in body.topic_data:
        parts = []
        indexes = []
        for p in t.partition_data:
            index = int(p.index)
            indexes.append(index)
            try:
                converted = records.from_kafka(p.records or b"")
            except records.UnsupportedCodec as exc:
                early[(t.name, index)] = _produce_error(index, UNSUPPORTED_COMPRESSION_TYPE, exc)
                continue
            except CorruptRecordError as exc:
                early[(t.name, index)] = _produce_error(index, ErrorCode.CORRUPT_MESSAGE, exc)
                continue
            parts.append({"partition": index, "records": converted})
        order.append((t.name, indexes))
        if parts:
            topics.append({"name": t.name, "partitions": parts})

    def answer(a: Body) -> None:
        code = whole_error(a)
        got: dict[tuple[str, int], Body] = {}
        for t in a.get("topics", ()):
            for p in t["partitions"]:
                got[(t["name"], p["partition"])] = {
                    "index": p["partition"],
                    "error_code": p["error_code"],
                    "error_message": p.get("error_message"),
                    "base_offset": p.get("base_offset", -1),
                    "log_append_time": p.get("log_append_time_ms", -1),
                    "log_start_offset": p.get("log_start_offset", -1),
                }
        responses = []
        for name, indexes in order:
            rows = []
            for i in indexes:
                row = early.get((name, i)) or got.get((name, i))
                if row is None:
                    row = _produce_error(i, code or ErrorCode.UNKNOWN_SERVER_ERROR, None)
                rows.append(row)
            responses.append({"name": name, "partition_responses": rows})
        ctx.respond({"responses": responses, "throttle_time": 0})

    if not topics:  # every partition refused here
        if acks == 0:
            ctx.no_response()
        else:
            answer({"topics": []})
        return
    native = {
        "transactional_id": body.transactional_id,
        "acks": acks,
        "timeout_ms": millis(body.timeout),
        "topics": topics,
    }
    ctx.call_native(ApiKey.PRODUCE, native, answer)


def _produce_error(index: int, code: int, exc: Exception | None) -> Body:
    return {
        "index": index,
        "error_code": int(code),
        "error_message": str(exc) if exc is not None else None,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
    }


# -- Fetch -------------------------------------------------------------------------------------
@api(ApiKey.FETCH, 4, 12)
def fetch(ctx: KafkaContext, body: FetchRequest) -> None:
    native = {
        "replica_id": -1,
        "max_wait_ms": millis(body.max_wait),
        "min_bytes": int(body.min_bytes),
        "max_bytes": int(body.max_bytes),
        "isolation_level": int(body.isolation_level),
        "topics": [
            {
                "name": t.topic,
                "partitions": [
                    {
                        "partition": int(p.partition),
                        "fetch_offset": int(p.fetch_offset),
                        "partition_max_bytes": int(p.partition_max_bytes),
                        "current_leader_epoch": int(getattr(p, "current_leader_epoch", -1)),
                        "last_fetched_epoch": int(getattr(p, "last_fetched_epoch", -1)),
                    }
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ],
    }

    committed = native["isolation_level"] == 1

    def answer(a: Body) -> None:
        code = whole_error(a)
        if code:
            ctx.respond({"throttle_time": 0, "error_code": code, "session_id": 0, "responses": []})
            return
        ctx.respond(
            {
                "throttle_time": 0,
                "error_code": 0,
                "session_id": 0,  # no fetch session: the client sends full fetches
                "responses": [
                    {
                        "topic": t["name"],
                        "partitions": [_fetched(t["name"], p, committed) for p in t["partitions"]],
                    }
                    for t in a["topics"]
                ],
            }
        )

    ctx.call_native(ApiKey.FETCH, native, answer)


def _fetched(topic: str, p: Body, read_committed: bool) -> Body:
    code = p["error_code"]
    data = b""
    if not code and p.get("records"):
        try:
            data = records.to_kafka(p["records"])
        except (CorruptRecordError, records.UnsupportedCodec) as exc:
            log.error(
                "%s-%d: stored batch cannot be converted for Kafka: %s", topic, p["partition"], exc
            )
            code = int(ErrorCode.CORRUPT_MESSAGE)
    hw = p.get("high_watermark", -1)
    lso = p.get("last_stable_offset", -1)
    return {
        "partition_index": p["partition"],
        "error_code": code,
        "high_watermark": hw,
        "last_stable_offset": hw if lso < 0 else lso,
        "log_start_offset": p.get("log_start_offset", -1),
        "diverging_epoch": {
            "epoch": p.get("diverging_epoch", -1),
            "end_offset": p.get("diverging_end_offset", -1),
        },
        "preferred_read_replica": -1,
        # null unless read_committed (Kafka's); the records keep the ABORT markers' offsets
        "aborted_transactions": p.get("aborted_transactions", []) if read_committed else None,
        "records": data,
    }


# -- ListOffsets -------------------------------------------------------------------------------
@api(ApiKey.LIST_OFFSETS, 1, 7)
def list_offsets(ctx: KafkaContext, body: ListOffsetsRequest) -> None:
    native = {
        "replica_id": int(body.replica_id),
        "isolation_level": int(getattr(body, "isolation_level", 0)),
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition": int(p.partition_index),
                        "timestamp": int(p.timestamp),
                        "current_leader_epoch": int(getattr(p, "current_leader_epoch", -1)),
                    }
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ],
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        ctx.respond(
            {
                "throttle_time": 0,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {
                                "partition_index": p.partition_index,
                                "error_code": code or ErrorCode.UNKNOWN_SERVER_ERROR,
                            }
                            for p in t.partitions
                        ],
                    }
                    for t in body.topics
                ]
                if code
                else [
                    {
                        "name": t["name"],
                        "partitions": [
                            {**p, "partition_index": p["partition"]} for p in t["partitions"]
                        ],
                    }
                    for t in a["topics"]
                ],
            }
        )

    ctx.call_native(ApiKey.LIST_OFFSETS, native, answer)


# -- InitProducerId ----------------------------------------------------------------------------
@api(ApiKey.INIT_PRODUCER_ID, 0, 4)
def init_producer_id(ctx: KafkaContext, body: InitProducerIdRequest) -> None:
    native = {
        "transactional_id": body.transactional_id,
        "transaction_timeout_ms": millis(body.transaction_timeout),
    }

    def answer(a: Body) -> None:
        ctx.respond(
            {
                "throttle_time": 0,
                "error_code": a["error_code"],
                "producer_id": a.get("producer_id", -1),
                "producer_epoch": a.get("producer_epoch", -1),
            }
        )

    ctx.call_native(ApiKey.INIT_PRODUCER_ID, native, answer)
