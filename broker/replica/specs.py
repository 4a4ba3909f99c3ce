"""What a fetch asks for (FetchParams, FetchPartitionSpec), the replica manager's per-partition
error, and KIP-320's divergence check on the leader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from broker.replica import state
from broker.replica.partition import Partition
from client.errors import ErrorCode


class FetchPartitionSpec(NamedTuple):
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1  # followers: the epoch of the last batch they hold
    log_start_offset: int = -1  # followers: their log start offset (DeleteRecords waits on it)


@dataclass(frozen=True)
class FetchParams:
    replica_id: int  # -1 consumer, else a follower's broker id
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = 0  # consumers: 1 read_committed (up to the last stable offset)

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == 1 and self.replica_id < 0

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def diverging(part: Partition, spec: FetchPartitionSpec) -> tuple[int, int] | None:
    """KIP-320 on the leader (the rule: broker/replica/state.py `diverging`): (largest epoch
    <= the fetcher's last fetched epoch, its end offset here) when what the follower holds, or
    what the consumer read, diverged from this log, else None.

    The common case is answered without the log's lock (every fetch of every partition asks
    this, up to three times): a fetcher whose last fetched epoch is this log's latest, at an
    offset within the log. `end_offset_for_epoch` then gives (that epoch, the log end) and the
    rule None. The end is read before the epoch: on a leader both only grow, so the two reads
    hold together as of the second one, as the locked lookup would have seen them then."""
    last_epoch = spec.last_fetched_epoch
    if last_epoch < 0:
        return None
    log = part.log
    if spec.fetch_offset <= log.end_offset and last_epoch == log.latest_epoch:
        return None
    return state.diverging(
        spec.fetch_offset, last_epoch, log.end_offset_for_epoch, log.log_start_offset
    )


class ReplicaError(Exception):
    """A per-partition error inside the replica manager (never escapes it)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message or _error_name(int(code))
