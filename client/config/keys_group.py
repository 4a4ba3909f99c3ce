"""Group coordinator keys (broker): consumer groups and the offsets topic. One line per key."""

from __future__ import annotations

from client.config.keydef import IGNORED, key
from client.config.types import at_least

B = ("broker",)
MiB = 1024 * 1024

KEYS = [
    key("group.initial.rebalance.delay.ms", "duration_ms", 3000, "classic groups (Kafka clients on a KAFKA listener): the first rebalance of an empty group waits this long for more members, each newcomer extending the wait by as much, up to the rebalance timeout; Gregor's own (KIP-848) groups assign at once on every heartbeat and have no join phase to delay", B, at_least(0)),
    key("group.min.session.timeout.ms", "duration_ms", 6000, "smallest session timeout a member may ask for", B, at_least(1)),
    key("group.max.session.timeout.ms", "duration_ms", 1_800_000, "largest session timeout a member may ask for", B, at_least(1)),
    key("group.max.size", "int", 2**31 - 1, "members per group", B, at_least(1)),
    key("group.consumer.session.timeout.ms", "duration_ms", 45_000, "session timeout of members using ConsumerGroupHeartbeat", B, at_least(1)),
    key("group.consumer.heartbeat.interval.ms", "duration_ms", 5000, "heartbeat interval told to ConsumerGroupHeartbeat members", B, at_least(1)),
    key("offsets.topic.num.partitions", "int", 50, "partitions of the __consumer_offsets topic", B, at_least(1)),
    key("offsets.topic.replication.factor", "int", 3, "replication factor of __consumer_offsets, as Kafka; clamped (and logged) to the live brokers when the topic is created on first use", B, at_least(1)),
    key("offsets.topic.segment.bytes", "size", 100 * MiB, "segment size of __consumer_offsets", B, at_least(1024)),
    key("offsets.retention.ms", "duration_ms", 7 * 86_400_000, "committed offsets of an empty group expire after this long", B, at_least(1), unit_aliases=(("offsets.retention.minutes", 60_000),), status=IGNORED, why='committed offsets of empty groups do not expire yet (__consumer_offsets is compacted: one record per partition stays)'),
    key("offsets.commit.timeout.ms", "duration_ms", 5000, "an offset commit waits this long for replication", B, at_least(1)),
]  # fmt: skip
