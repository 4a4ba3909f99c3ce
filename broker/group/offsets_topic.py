"""The `__consumer_offsets` topic as FindCoordinator sees it, and the group settings.

- `partition_for(group_id, n)`: the partition (so the coordinator) of a group;
- `OffsetsTopic.find(group_id, controller)`: the coordinator's endpoint, creating the topic on
  first use (replication factor clamped to the live brokers, logged);
- `TopicRegex`: compiled subscription regexes (bounded cache) and the topics they match.

Threads: any (I/O threads); the creation request is rate-limited under a lock.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.group.state import GroupError
from client.config.loader import Config
from client.errors import ErrorCode
from client.partitioner import murmur2

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


def partition_for(group_id: str, num_partitions: int) -> int:
    """abs(murmur2(group_id)) % partitions, with Kafka's Utils.abs (MIN_VALUE -> 0)."""
    h = murmur2(group_id.encode("utf-8"))
    return (0 if h == -(2**31) else abs(h)) % num_partitions


@dataclass(frozen=True)
class GroupSettings:
    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    heartbeat_interval_ms: int = 5000
    offsets_partitions: int = 50
    offsets_replication_factor: int = 3
    offsets_segment_bytes: int = 100 * 1024 * 1024
    commit_timeout_ms: int = 5000
    max_size: int = 2**31 - 1

    @classmethod
    def from_config(cls, config: Config) -> GroupSettings:
        return cls(
            session_timeout_ms=int(config.group_consumer_session_timeout_ms),
            min_session_timeout_ms=int(config.group_min_session_timeout_ms),
            max_session_timeout_ms=int(config.group_max_session_timeout_ms),
            heartbeat_interval_ms=int(config.group_consumer_heartbeat_interval_ms),
            offsets_partitions=int(config.offsets_topic_num_partitions),
            offsets_replication_factor=int(config.offsets_topic_replication_factor),
            offsets_segment_bytes=int(config.offsets_topic_segment_bytes),
            commit_timeout_ms=int(config.offsets_commit_timeout_ms),
            max_size=int(config.group_max_size),
        )


class OffsetsTopic:
    def __init__(self, node_id: int, settings: GroupSettings, image: Callable[[], Any]) -> None:
        self.node_id = node_id
        self.settings = settings
        self._image = image
        self._lock = threading.Lock()
        self._creating_since = 0.0  # monotonic s of the last create request
        self._prefix = f"[broker={node_id} group-coordinator]"

    def find(self, group_id: str, controller: Any) -> tuple[int, int, str, int, str | None]:
        """(error code, node id, host, port, message) of the coordinator of `group_id`."""
        image = self._image()
        topic = image.topics.get(OFFSETS_TOPIC)
        if topic is None:
            self._create_offsets_topic(image, controller)
            return (int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, "", -1,
                    f"{OFFSETS_TOPIC} is being created")  # fmt: skip
        p = partition_for(group_id, len(topic.partitions))
        reg = topic.partitions.get(p)
        broker = image.brokers.get(reg.leader) if reg is not None else None
        if broker is None or broker.fenced:
            return (int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, "", -1,
                    f"{OFFSETS_TOPIC}-{p} has no leader")  # fmt: skip
        return 0, broker.broker_id, broker.host, broker.port, None

    def _create_offsets_topic(self, image: Any, controller: Any) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._creating_since < 5:
                return
            self._creating_since = now
        live = len(image.live_brokers())
        rf = max(1, min(self.settings.offsets_replication_factor, live))
        log.info(
            "%s creating %s: %d partitions, replication factor %d%s",
            self._prefix, OFFSETS_TOPIC, self.settings.offsets_partitions, rf,
            "" if rf == self.settings.offsets_replication_factor else
            f" (offsets.topic.replication.factor={self.settings.offsets_replication_factor}"
            f" clamped to the {live} live brokers)",
        )  # fmt: skip
        fut = controller.create_topics(
            [
                {
                    "name": OFFSETS_TOPIC,
                    "num_partitions": self.settings.offsets_partitions,
                    "replication_factor": rf,
                    "assignments": [],
                    "configs": [
                        {
                            "name": "segment.bytes",
                            "value": str(self.settings.offsets_segment_bytes),
                        },
                        # Compacted, never deleted by time or size: the latest commit of
                        # each (group, topic, partition) key stays, superseded commits and
                        # deleted groups' tombstones go (docs/groups.md).
                        {"name": "cleanup.policy", "value": "compact"},
                    ],
                }
            ]
        )
        fut.add_done_callback(self._created)

    def _created(self, fut: Any) -> None:
        exc = fut.exception()
        if exc is not None:
            log.warning("%s creating %s failed: %s", self._prefix, OFFSETS_TOPIC, exc)
            return
        for r in fut.result() or []:
            code = r.get("error_code", 0)
            if code and code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("%s creating %s failed: %s", self._prefix, OFFSETS_TOPIC, r)


class TopicRegex:
    """Subscription regexes, compiled once (at most 1000 kept)."""

    def __init__(self) -> None:
        self._regexes: dict[str, re.Pattern[str]] = {}

    def compiled(self, regex: str) -> re.Pattern[str]:
        got = self._regexes.get(regex)
        if got is None:
            try:
                got = re.compile(regex)
            except re.error as exc:
                raise GroupError(
                    ErrorCode.INVALID_REQUEST, f"subscribed_topic_regex {regex!r}: {exc}"
                ) from None
            if len(self._regexes) >= 1000:
                self._regexes.clear()
            self._regexes[regex] = got
        return got

    def matching(self, image: Any, regex: str) -> tuple[str, ...]:
        rx = self.compiled(regex)
        return tuple(t for t in image.topics if t != OFFSETS_TOPIC and rx.fullmatch(t))
