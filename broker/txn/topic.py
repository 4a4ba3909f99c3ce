"""The `__transaction_state` topic as FindCoordinator (key_type 1) sees it, and the settings.

`TxnTopic.find(transactional_id, controller)`: the coordinator's endpoint (the leader of the
id's partition), creating the topic on first use, compacted, with
transaction.state.log.num.partitions partitions and the replication factor clamped to the live
brokers (logged), as `__consumer_offsets` (broker/group/offsets_topic.py).

Threads: any (I/O threads); the creation request is rate-limited under a lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.txn.log_format import TRANSACTION_STATE_TOPIC, partition_for
from client.errors import ErrorCode

if TYPE_CHECKING:
    from client.config.loader import Config
    from controller.channel import ControllerChannel
    from controller.metadata.image import MetadataImage
    from controller.results import CreateTopicResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TxnSettings:
    partitions: int = 50
    replication_factor: int = 3
    segment_bytes: int = 100 * 1024 * 1024
    max_timeout_ms: int = 900_000
    abort_check_interval_ms: int = 10_000
    write_timeout_ms: int = 5000
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    id_expiration_check_interval_ms: int = 3_600_000

    @classmethod
    def from_config(cls, config: Config) -> TxnSettings:
        return cls(
            partitions=int(config.transaction_state_log_num_partitions),
            replication_factor=int(config.transaction_state_log_replication_factor),
            segment_bytes=int(config.transaction_state_log_segment_bytes),
            max_timeout_ms=int(config.transaction_max_timeout_ms),
            abort_check_interval_ms=int(
                config.transaction_abort_timed_out_transaction_cleanup_interval_ms
            ),
            write_timeout_ms=int(config.transaction_state_log_write_timeout_ms),
            id_expiration_ms=int(config.transactional_id_expiration_ms),
            id_expiration_check_interval_ms=int(
                config.transaction_remove_expired_transaction_cleanup_interval_ms
            ),
        )


class TxnTopic:
    def __init__(
        self, node_id: int, settings: TxnSettings, image: Callable[[], MetadataImage]
    ) -> None:
        self.node_id = node_id
        self.settings = settings
        self._image = image
        self._lock = threading.Lock()
        self._creating_since = -1e9  # monotonic s of the last create request
        self._prefix = f"[broker={node_id} txn-coordinator]"

    def find(
        self, transactional_id: str, controller: ControllerChannel
    ) -> tuple[int, int, str, int, str | None]:
        """(error code, node id, host, port, message) of the coordinator of `transactional_id`."""
        image = self._image()
        topic = image.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            self._create(image, controller)
            return (int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, "", -1,
                    f"{TRANSACTION_STATE_TOPIC} is being created")  # fmt: skip
        p = partition_for(transactional_id, len(topic.partitions))
        reg = topic.partitions.get(p)
        broker = image.brokers.get(reg.leader) if reg is not None else None
        if broker is None or broker.fenced:
            return (int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, "", -1,
                    f"{TRANSACTION_STATE_TOPIC}-{p} has no leader")  # fmt: skip
        return 0, broker.broker_id, broker.host, broker.port, None

    def _create(self, image: MetadataImage, controller: ControllerChannel) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._creating_since < 5:
                return
            self._creating_since = now
        s = self.settings
        live = len(image.live_brokers())
        rf = max(1, min(s.replication_factor, live))
        log.info(
            "%s creating %s: %d partitions, replication factor %d%s",
            self._prefix, TRANSACTION_STATE_TOPIC, s.partitions, rf,
            "" if rf == s.replication_factor else
            f" (transaction.state.log.replication.factor={s.replication_factor}"
            f" clamped to the {live} live brokers)",
        )  # fmt: skip
        fut = controller.create_topics(
            [
                {
                    "name": TRANSACTION_STATE_TOPIC,
                    "num_partitions": s.partitions,
                    "replication_factor": rf,
                    "assignments": [],
                    "configs": [
                        {"name": "segment.bytes", "value": str(s.segment_bytes)},
                        # the latest state of each transactional id stays (docs/transactions.md)
                        {"name": "cleanup.policy", "value": "compact"},
                    ],
                }
            ]
        )
        fut.add_done_callback(self._created)

    def _created(self, fut: Future[list[CreateTopicResult]]) -> None:
        exc = fut.exception()
        if exc is not None:
            log.warning("%s creating %s failed: %s", self._prefix, TRANSACTION_STATE_TOPIC, exc)
            return
        for r in fut.result() or []:
            code = r.get("error_code", 0)
            if code and code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("%s creating %s failed: %s", self._prefix, TRANSACTION_STATE_TOPIC, r)
