"""WriteTxnMarkers on the Kafka listener, translated to the native handler:

    API               versions  native
    WriteTxnMarkers   1         WriteTxnMarkers (27)

v0 is not served: Kafka 4 removed it (KIP-896) and kio, generated from Kafka 4's schemas, has
no v0 class to decode it with (a v0 request used to fail in the decoder instead).

The shapes are Kafka's on both sides. A whole-request error (CLUSTER_AUTHORIZATION_FAILED: the
API is for brokers) is given to every partition, as the response has no top-level code.

Threads: I/O threads; answers from the thread the native handler answers on.
"""

from __future__ import annotations

from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest

from broker.kafka.apis import api
from broker.kafka.request import KafkaContext, whole_error
from client.protocol import ApiKey
from client.protocol.body import Body


@api(ApiKey.WRITE_TXN_MARKERS, 1, 1)
def write_txn_markers(ctx: KafkaContext, body: WriteTxnMarkersRequest) -> None:
    markers = [
        {
            "producer_id": int(m.producer_id),
            "producer_epoch": int(m.producer_epoch),
            "transaction_result": bool(m.transaction_result),
            "topics": [
                {"name": str(t.name), "partition_indexes": [int(p) for p in t.partition_indexes]}
                for t in m.topics
            ],
            "coordinator_epoch": int(m.coordinator_epoch),
        }
        for m in body.markers
    ]
    native: dict[str, object] = {"markers": markers}

    def answer(a: Body) -> None:
        code = whole_error(a)
        if not code:
            ctx.respond(a)
            return
        ctx.respond(
            {
                "markers": [
                    {
                        "producer_id": int(m.producer_id),
                        "topics": [
                            {
                                "name": str(t.name),
                                "partitions": [
                                    {"partition_index": int(p), "error_code": code}
                                    for p in t.partition_indexes
                                ],
                            }
                            for t in m.topics
                        ],
                    }
                    for m in body.markers
                ]
            }
        )

    ctx.call_native(ApiKey.WRITE_TXN_MARKERS, native, answer)
