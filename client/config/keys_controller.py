"""Controller keys: the Raft metadata quorum, metadata log, broker liveness. One line per key."""

from __future__ import annotations

from client.config.keydef import IGNORED, key
from client.config.types import at_least, in_range, voters

C = ("controller",)
BC = ("broker", "controller")
MiB = 1024 * 1024

KEYS = [
    key("controller.quorum.voters", "str", "1@127.0.0.1:9093", "the metadata quorum's voters: ID@HOST:PORT, comma-separated", BC, voters()),
    key("controller.quorum.listener", "str", None, "HOST:PORT a controller listens on when its node.id is not in controller.quorum.voters (one that joins a running quorum with gregor quorum add-controller); empty: its controller.quorum.voters entry", C),
    key("metadata.log.dir", "str", "gregor-data/controller", "directory of the metadata (Raft) log and snapshots", C),
    key("controller.quorum.election.timeout.ms", "duration_ms", 1000, "a voter with no leader for this long starts an election", BC, at_least(1)),
    key("controller.quorum.election.backoff.max.ms", "duration_ms", 1000, "longest random back-off before a new election", BC, at_least(1), status=IGNORED, why='the Raft timers derive from controller.quorum.election.timeout.ms'),
    key("controller.quorum.fetch.timeout.ms", "duration_ms", 2000, "a follower without a fetch answer for this long starts an election", BC, at_least(1), status=IGNORED, why='the Raft timers derive from controller.quorum.election.timeout.ms'),
    key("controller.quorum.request.timeout.ms", "duration_ms", 2000, "timeout of quorum requests", BC, at_least(1), status=IGNORED, why='the Raft timers derive from controller.quorum.election.timeout.ms'),
    key("broker.session.timeout.ms", "duration_ms", 9000, "a broker without a heartbeat for this long is fenced", BC, at_least(1)),
    key("broker.heartbeat.interval.ms", "duration_ms", 2000, "how often a broker heartbeats to the controller", BC, at_least(1)),
    key("metadata.log.segment.bytes", "size", 1024 * MiB, "segment size of the metadata log", C, at_least(1024), status=IGNORED, why='the metadata log is compacted by snapshots (metadata.log.max.records.between.snapshots), not rolled'),
    key("metadata.log.segment.ms", "duration_ms", 604_800_000, "roll a metadata log segment this old", C, at_least(1), status=IGNORED, why='the metadata log is compacted by snapshots (metadata.log.max.records.between.snapshots), not rolled'),
    key("metadata.log.max.records.between.snapshots", "int", 10_000, "take a metadata snapshot after this many committed records", C, at_least(1)),
    key("metadata.log.max.snapshot.interval.ms", "duration_ms", 3_600_000, "take a metadata snapshot at least this often (if anything changed)", C, at_least(1), status=IGNORED, why='snapshots are taken by record count (metadata.log.max.records.between.snapshots)'),
    key("auto.leader.rebalance.enable", "bool", True, "move leadership back to preferred replicas", C),
    key("leader.imbalance.check.interval.ms", "duration_ms", 300_000, "how often leader imbalance is checked", C, at_least(1), unit_aliases=(("leader.imbalance.check.interval.seconds", 1000),)),
    key("leader.imbalance.per.broker.percentage", "int", 10, "rebalance a broker's leaders above this imbalance percentage", C, in_range(0, 100)),
    key("auto.balance.mode", "enum", "node-add", "automatic balancing (Redpanda's partition_autobalancing_mode): off; node-add: a broker registered for the first time receives its share of replicas; continuous: also, the replicas of a broker fenced longer than auto.balance.unavailable.timeout.ms are re-created on the others", C, choices=("off", "node-add", "continuous")),
    key("auto.balance.unavailable.timeout.ms", "duration_ms", 900_000, "with auto.balance.mode continuous: a broker fenced this long has its replicas re-created on the other brokers", C, at_least(1)),
    key("auto.balance.max.concurrent.moves", "int", 50, "most partition reassignments in flight (any, an operator's too) for automatic balancing to start more", C, in_range(1, 5000)),
]  # fmt: skip
