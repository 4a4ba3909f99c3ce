"""Replication keys (broker): ISR, follower fetching, leader election. One line per key."""

from __future__ import annotations

from client.config.keydef import key
from client.config.types import at_least

B = ("broker",)
BC = ("broker", "controller")
MiB = 1024 * 1024

KEYS = [
    key("replica.lag.time.max.ms", "duration_ms", 30_000, "a follower that has not caught up for this long leaves the ISR", B, at_least(1)),
    key("min.insync.replicas", "int", 1, "acks=all produce fails with NOT_ENOUGH_REPLICAS below this ISR size", BC, at_least(1)),
    key("unclean.leader.election.enable", "bool", False, "allow an out-of-sync replica to become leader (may lose data)", BC),
    key("num.replica.fetchers", "int", 1, "follower fetcher threads per source broker", B, at_least(1)),
    key("replica.fetch.max.bytes", "size", 1 * MiB, "bytes per partition a follower fetch asks for", B, at_least(1)),
    key("replica.fetch.min.bytes", "size", 1, "a follower fetch waits for at least this many bytes", B, at_least(1)),
    key("replica.fetch.wait.max.ms", "duration_ms", 500, "... or at most this long", B, at_least(0)),
    key("replica.fetch.response.max.bytes", "size", 10 * MiB, "bytes per whole follower fetch response", B, at_least(1)),
    key("replica.fetch.catchup.max.bytes", "size", 8 * MiB, "bytes per partition a follower fetch asks for while the partition is behind the leader's high watermark (a new or restarted replica catching up: fewer round trips and fsyncs per MB); replica.fetch.max.bytes otherwise (this key is never below it); the whole answer stays within replica.fetch.response.max.bytes", B, at_least(1)),
    key("replica.fetch.backoff.ms", "duration_ms", 1000, "follower back-off after a fetch error (the longest: a leader behind on metadata is asked again after 10 ms, doubling)", B, at_least(0)),
    key("max.incremental.fetch.session.cache.slots", "int", 1000, "incremental fetch sessions (KIP-227) a leader keeps for its followers, least recently used evicted first; 0: followers fetch every partition every time", B, at_least(0)),
    key("replica.fetch.session.idle.ms", "duration_ms", 120_000, "a leader drops a follower's fetch session unused this long", B, at_least(1)),
    key("replica.socket.timeout.ms", "duration_ms", 30_000, "follower fetch request timeout", B, at_least(1)),
    key("replica.high.watermark.checkpoint.interval.ms", "duration_ms", 5000, "how often high watermarks are checkpointed to disk", B, at_least(1)),
]  # fmt: skip
