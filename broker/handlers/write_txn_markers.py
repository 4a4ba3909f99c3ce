"""WriteTxnMarkers (27): append COMMIT/ABORT markers as partition leader, for the transaction
coordinator (an inter-broker API: CLUSTER_ACTION on the cluster).

Each marker is one control batch (client/records/control.py) per partition, appended with
acks=all semantics through the produce path (broker/replica: a DelayedProduce answers once the
high watermark passed the marker, or REQUEST_TIMED_OUT after MARKER_TIMEOUT_MS). Per
partition: not in the metadata → UNKNOWN_TOPIC_OR_PARTITION; not leader (or no replica here) →
NOT_LEADER_OR_FOLLOWER;
an epoch older than the producer's → INVALID_PRODUCER_EPOCH; a coordinator epoch older than
the producer's last marker's → TRANSACTION_COORDINATOR_FENCED (the log's checks). A marker
appended to a `__consumer_offsets` partition tells the group coordinator, which commits or
drops the producer's pending transactional offsets there (TxnOffsetCommit). The request
is answered once every marker of every partition has its answer. Runs on an I/O thread; the
late answer on a flusher/timer thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.group.offsets_topic import OFFSETS_TOPIC
from broker.handlers.base import RequestContext, handler
from broker.security.access import cluster_action
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.records.control import build_marker

if TYPE_CHECKING:
    from broker.replica.delayed import ProducePartitionStatus

    Statuses = dict[tuple[str, int], ProducePartitionStatus]

MARKER_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms default, which its markers wait


@handler(ApiKey.WRITE_TXN_MARKERS, access="CLUSTER_ACTION on CLUSTER")
def handle(ctx: RequestContext, body: Body) -> Body | None:
    cluster_action(ctx)
    rm = ctx.services.replica_manager
    image = ctx.services.metadata
    markers = body["markers"]
    # per marker: (topic, partition) -> error code, filled in as the appends are answered
    codes: list[dict[tuple[str, int], int]] = [{} for _ in markers]
    order: list[list[tuple[str, list[int]]]] = []
    lock = threading.Lock()
    pending = [len(markers)]

    def respond() -> None:
        out = []
        for m, got, topics in zip(markers, codes, order, strict=True):
            out.append(
                {
                    "producer_id": m["producer_id"],
                    "topics": [
                        {
                            "name": name,
                            "partitions": [
                                {"partition_index": p, "error_code": got[(name, p)]} for p in parts
                            ],
                        }
                        for name, parts in topics
                    ],
                }
            )
        ctx.respond({"markers": out})

    def done(i: int, results: Statuses) -> None:
        m = markers[i]
        for tp, status in results.items():
            if tp[0] == OFFSETS_TOPIC and status.error_code == 0:
                ctx.services.group_coordinator.on_txn_marker(
                    tp[1], int(m["producer_id"]), bool(m["transaction_result"])
                )
        with lock:
            for tp, status in results.items():
                code = status.error_code
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:  # in the metadata, not here
                    code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                codes[i][tp] = code
            pending[0] -= 1
            last = pending[0] == 0
        if last:
            respond()

    def answer_of(i: int) -> Callable[[Statuses], None]:
        return lambda results: done(i, results)

    now = int(time.time() * 1000)
    for i, m in enumerate(markers):
        batch = build_marker(
            int(m["producer_id"]),
            int(m["producer_epoch"]),
            bool(m["transaction_result"]),
            int(m["coordinator_epoch"]),
            now,
        )
        entries: dict[tuple[str, int], bytes] = {}
        topics = []
        for t in m["topics"]:
            name = t["name"]
            parts = [int(p) for p in t["partition_indexes"]]
            topics.append((name, parts))
            for p in parts:
                if image.partition(name, p) is None:
                    codes[i][(name, p)] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                else:
                    entries[(name, p)] = batch
        order.append(topics)
        if not entries:
            done(i, {})
            continue
        results = rm.append_records(-1, MARKER_TIMEOUT_MS, entries, answer_of(i), control=True)
        if results is not None:
            done(i, results)
    if not markers:
        return {"markers": []}
    return None  # answered by the last marker's answer
