"""RecordFilter (client/aio/record_filter.py) over real batches: read_committed drops an aborted
transaction's records and every marker, keeps a committed one's; read_uncommitted keeps both
transactions' records but not the markers; the first record returned is the one at the offset
asked; the readable end is the LSO under read_committed, the HW otherwise."""

from __future__ import annotations

import pytest

from client.aio.record_filter import RecordFilter
from client.aio.types import TopicPartition
from client.errors import GregorError
from client.records import build_batch
from client.records.control import build_marker

TP = TopicPartition("t", 0)


def _log() -> bytes:
    """Offsets 0-1 plain, 2-3 producer 7's aborted transaction, 4 its ABORT marker, 5-6
    producer 8's committed transaction, 7 its COMMIT marker, 8 plain."""
    return b"".join([
        build_batch([(b"k0", b"a"), (b"k1", b"b")], base_offset=0),
        build_batch([(b"x", b"aborted1"), (b"x", b"aborted2")], base_offset=2, producer_id=7,
                    producer_epoch=0, base_sequence=0, is_transactional=True),
        build_marker(7, 0, False, 0, 1_000, base_offset=4),
        build_batch([(b"y", b"kept1"), (b"y", b"kept2")], base_offset=5, producer_id=8,
                    producer_epoch=0, base_sequence=0, is_transactional=True),
        build_marker(8, 0, True, 0, 1_000, base_offset=7),
        build_batch([(b"k8", b"c")], base_offset=8),
    ])  # fmt: skip


def _values(f: RecordFilter, offset: int, aborted: list | None) -> tuple[list[bytes], int]:
    records, start = f.decode(TP, _log(), offset, aborted)
    return [r.value for r in records], start


def test_read_committed_drops_aborted_records_and_markers() -> None:
    f = RecordFilter(read_committed=True, check_crcs=True)
    answer = {"aborted_transactions": [{"producer_id": 7, "first_offset": 2}]}
    aborted = f.aborted(answer)
    assert aborted == [{"producer_id": 7, "first_offset": 2}]
    assert _values(f, 0, aborted) == ([b"a", b"b", b"kept1", b"kept2", b"c"], 0)
    assert f.isolation_level == 1


def test_read_uncommitted_keeps_both_transactions_but_no_marker() -> None:
    f = RecordFilter(read_committed=False, check_crcs=True)
    assert f.aborted({"aborted_transactions": [{"producer_id": 7, "first_offset": 2}]}) is None
    got, start = _values(f, 0, None)
    assert got == [b"a", b"b", b"aborted1", b"aborted2", b"kept1", b"kept2", b"c"]
    assert start == 0 and f.isolation_level == 0


def test_records_before_the_offset_asked_are_skipped() -> None:
    f = RecordFilter(read_committed=False, check_crcs=True)
    records, start = f.decode(TP, _log(), 6, None)  # the batch at 5 begins before 6
    assert [r.offset for r in records[start:]] == [6, 8]


def test_readable_end_is_the_last_stable_offset_under_read_committed() -> None:
    p = {"high_watermark": 9, "last_stable_offset": 2}
    assert RecordFilter(True, True).readable_end(p) == 2
    assert RecordFilter(False, True).readable_end(p) == 9
    assert (
        RecordFilter(True, True).readable_end({"high_watermark": 9, "last_stable_offset": -1}) == 9
    )


def test_corrupt_bytes_raise() -> None:
    data = bytearray(_log())
    data[40] ^= 0xFF  # inside the first batch's CRC-covered part
    with pytest.raises(GregorError):
        RecordFilter(False, True).decode(TP, bytes(data), 0, None)
