"""WriteTxnMarkers (27): append COMMIT/ABORT markers as partition leader, for the transaction
coordinator of another broker (an inter-broker API: CLUSTER_ACTION on the cluster).

The appending is broker/txn/marker_append.py's (shared with the coordinator's markers for
partitions it leads itself); this handler turns the request into its specs and the codes into
the answer, given once every marker of every partition has its answer. Runs on an I/O thread;
the late answer on a flusher/timer thread.
"""

from __future__ import annotations

from broker.handlers.base import RequestContext, handler
from broker.security.access import cluster_action
from broker.txn.marker_append import Codes, MarkerSpec, append_markers
from client.protocol import ApiKey
from client.protocol.body import Body


@handler(ApiKey.WRITE_TXN_MARKERS, access="CLUSTER_ACTION on CLUSTER")
def handle(ctx: RequestContext, body: Body) -> Body | None:
    cluster_action(ctx)
    markers = body["markers"]
    if not markers:
        return {"markers": []}
    order: list[list[tuple[str, list[int]]]] = []
    specs = []
    for m in markers:
        topics = [(t["name"], [int(p) for p in t["partition_indexes"]]) for t in m["topics"]]
        order.append(topics)
        specs.append(
            MarkerSpec(
                int(m["producer_id"]),
                int(m["producer_epoch"]),
                bool(m["transaction_result"]),
                int(m["coordinator_epoch"]),
                [(name, p) for name, parts in topics for p in parts],
            )
        )

    def respond(codes: list[Codes]) -> None:
        ctx.respond(
            {
                "markers": [
                    {
                        "producer_id": m["producer_id"],
                        "topics": [
                            {
                                "name": name,
                                "partitions": [
                                    {"partition_index": p, "error_code": got[(name, p)]}
                                    for p in parts
                                ],
                            }
                            for name, parts in topics
                        ],
                    }
                    for m, got, topics in zip(markers, codes, order, strict=True)
                ]
            }
        )

    services = ctx.services
    append_markers(
        services.replica_manager,
        services.metadata,
        services.group_coordinator.on_txn_marker,
        specs,
        respond,
    )
    return None  # answered by the last marker's answer
