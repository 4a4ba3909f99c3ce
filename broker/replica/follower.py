"""The follower side of replication: apply one partition of a leader's Fetch answer to the
local log (append, truncate on divergence or out-of-range), and say what to fetch next.

    state = fetch_position(part)            # (fetch offset, last fetched epoch)
    appended = apply_fetched(part, entry)   # bytes appended (0: nothing, or truncated)
    appended = append_fetched(part, entry)  # the same, for an entry known not to diverge

Every applied answer also moves the local log start offset up to the leader's (DeleteRecords,
`follow_log_start`); the follower's next fetch reports its own, which the leader's
DelayedDeleteRecords waits on.

Divergence (KIP-320, docs/replication.md): the follower sends its last fetched epoch with
every fetch; when the leader's log ends that epoch earlier than the fetch offset, or does not
know it, the answer carries `diverging_epoch`/`diverging_end_offset` (the largest leader epoch
<= the follower's and its end offset on the leader). The follower truncates to the smaller of
that end offset and its own end offset for the same epoch, then fetches again: a follower that
still diverges at an earlier epoch is told so by the next answer. Never to its HW alone
(KIP-101's lost-write case).

Durability: the caller (the replica fetcher thread) fsyncs every log it appended to before its
next fetch, so the fetch offset a follower sends is its durable end: the leader's HW never
counts an unflushed follower byte.

Threads: the replica fetcher thread owning the partition; Log and Partition lock themselves.
"""

from __future__ import annotations

import logging
import struct

from broker.replica.partition import Partition
from broker.replica.state import out_of_range_truncation, truncation_target
from client.errors import CorruptRecordError
from client.protocol.body import Body
from client.records.header import HEADER_SIZE, LOG_OVERHEAD

_log = logging.getLogger(__name__)


def fetch_position(part: Partition) -> tuple[int, int]:
    """(fetch offset = the local log end, last fetched epoch = the latest epoch in the log)."""
    log = part.log
    return log.end_offset, log.latest_epoch


_BATCH_LENGTH = struct.Struct(">i")  # at byte 8 of a batch: its size after the first 12 bytes


def whole_end(data: bytes | memoryview) -> int:
    """The length of the prefix of `data` made of whole batches (a size-limited read may end
    mid-batch), by the batches' size fields alone (the append validates the batches);
    CorruptRecordError when a size is below the header size (a walk by such sizes would not
    move on)."""
    n = len(data)
    pos = 0
    unpack = _BATCH_LENGTH.unpack_from
    while n - pos >= HEADER_SIZE:
        size = LOG_OVERHEAD + unpack(data, pos + 8)[0]
        if size < HEADER_SIZE:
            raise CorruptRecordError(f"batch at position {pos}: size {size} is below the header")
        if pos + size > n:
            break
        pos += size
    return pos


def truncate_diverged(part: Partition, leader_epoch: int, leader_end: int) -> int:
    """Truncate after a diverging-epoch answer (the point: state.truncation_target); returns
    the new log end."""
    log = part.log
    target = truncation_target(
        leader_epoch, leader_end, log.end_offset_for_epoch, log.log_start_offset, log.end_offset
    )
    if target < log.end_offset:
        _log.info(
            "[%s-%d] diverged from leader %d at epoch %d (leader end %d): truncating %d -> %d",
            part.topic,
            part.partition,
            part.leader_id,
            leader_epoch,
            leader_end,
            log.end_offset,
            target,
        )
        if target < log.log_start_offset:
            log.truncate_fully_and_start_at(target)
        else:
            log.truncate_to(target)
    part.update_follower_high_watermark(part.high_watermark)  # clamp to the new end
    return log.end_offset


def truncate_out_of_range(part: Partition, leader_start: int, leader_end: int) -> None:
    """OFFSET_OUT_OF_RANGE from the leader: below its start, restart the log empty at the
    leader's start; above its end, truncate to its end (state.out_of_range_truncation)."""
    log = part.log
    action = out_of_range_truncation(log.end_offset, leader_start, leader_end)
    if action is None:
        return
    kind, offset = action
    if kind == "restart":
        _log.info(
            "[%s-%d] behind the leader's log start %d: restarting the log there",
            part.topic,
            part.partition,
            offset,
        )
        log.truncate_fully_and_start_at(offset)
    else:
        truncate_diverged(part, -1, offset)


def diverges(entry: Body) -> bool:
    """Whether an error-free partition entry of a Fetch answer says the logs diverged."""
    return (
        int(entry.get("diverging_end_offset", -1)) >= 0
        or int(entry.get("diverging_epoch", -1)) >= 0
    )


def apply_fetched(part: Partition, entry: Body) -> int:
    """Apply an error-free partition entry of a Fetch answer; returns bytes appended."""
    if diverges(entry):
        truncate_diverged(part, int(entry["diverging_epoch"]), int(entry["diverging_end_offset"]))
        return 0
    return append_fetched(part, entry)


def append_fetched(part: Partition, entry: Body) -> int:
    """`apply_fetched` for an error-free entry that does not diverge (the caller looked):
    append its whole batches, follow the leader's HW and log start. Returns bytes appended."""
    data = entry.get("records")
    log = part.log
    appended = 0
    if data:
        appended = whole_end(data)
        if appended:  # (all of it, mostly: no view to make)
            log.append_as_follower(data if appended == len(data) else memoryview(data)[:appended])
    part.update_follower_high_watermark(int(entry["high_watermark"]))
    leader_start = int(entry.get("log_start_offset", -1))
    if leader_start > log.log_start_offset:  # (else follow_log_start has nothing to do)
        follow_log_start(part, leader_start)
    return appended


def follow_log_start(part: Partition, leader_start: int) -> None:
    """Move the local log start offset up to the leader's (DeleteRecords, the leader's
    retention), never past the local log end: the segments wholly below go, as retention
    deletes them. The next fetch reports the new start to the leader."""
    log = part.log
    target = min(leader_start, log.end_offset)
    if target > log.log_start_offset:
        log.retention.delete_records_before(target)
