"""DescribeProducers (61): the active producers of each named partition, as its leader's
producer state (broker/log/producer_state.py) holds them: what Kafka's
`kafka-transactions.sh describe-producers` shows, and what its `abort --start-offset` form
reads to find the producer of a hanging transaction. READ on the TOPIC, as Kafka's
(TOPIC_AUTHORIZATION_FAILED per partition otherwise). Runs on an I/O thread (the producer
state may be built from the log on first use).
"""

from __future__ import annotations

from broker.handlers.base import RequestContext, by_topic, handler
from broker.security.access import split_partitions
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation


@handler(ApiKey.DESCRIBE_PRODUCERS, access="READ on TOPIC")
def handle(ctx: RequestContext, body: Body) -> Body:
    reqs = [(t["name"], int(p)) for t in body["topics"] for p in t["partition_indexes"]]
    reqs, refused = split_partitions(ctx, AclOperation.READ, reqs)
    results = ctx.services.replica_manager.offsets.describe_producers(reqs)
    rows = by_topic(results + refused)
    for t in rows:
        for p in t["partitions"]:
            p["partition_index"] = p.pop("partition")
    return {"topics": rows, "throttle_time_ms": 0}
