"""Atomic batches: a controller call's records apply together; a batch cut short is dropped."""

from __future__ import annotations

from controller.metadata import (
    BatchAssembler,
    BatchBegin,
    MetadataImage,
    NoOp,
    Partition,
    Topic,
    replay_committed,
)

A, B = b"\x01" * 16, b"\x02" * 16


def test_records_outside_batches_pass_through():
    asm = BatchAssembler()
    assert asm.feed(0, NoOp()) == [(0, NoOp())]
    assert asm.feed(1, Topic("a", A)) == [(1, Topic("a", A))]


def test_a_batch_is_ready_when_complete():
    asm = BatchAssembler()
    assert asm.feed(0, BatchBegin(2)) == []
    assert asm.feed(1, Topic("a", A)) == []
    assert asm.open_records == 2
    ready = asm.feed(2, Partition(A, 0, (1,), (1,), 1))
    assert [o for o, _ in ready] == [0, 1, 2] and asm.open_records == 0
    assert asm.feed(3, BatchBegin(0)) == [(3, BatchBegin(0))]


def test_a_batch_cut_short_is_dropped_when_the_next_one_begins():
    asm = BatchAssembler()
    asm.feed(0, BatchBegin(3))
    asm.feed(1, Topic("a", A))
    asm.feed(2, Partition(A, 0, (1,), (1,), 1))  # the third record never came
    assert asm.feed(3, BatchBegin(1)) == []
    assert asm.dropped == 3
    assert [o for o, _ in asm.feed(4, Topic("b", B))] == [3, 4]


def test_replay_committed_applies_complete_batches_only():
    records = [
        (0, BatchBegin(3)),
        (1, Topic("a", A)),
        (2, Partition(A, 0, (1,), (1,), 1)),
        # a new leader wrote on top of the cut batch
        (4, BatchBegin(2)),
        (5, Topic("b", B)),
        (6, Partition(B, 0, (1,), (1,), 1)),
        (7, BatchBegin(1)),  # still open at the end: not applied yet
    ]
    image = replay_committed(MetadataImage.EMPTY, records)
    assert set(image.topics) == {"b"} and image.offset == 6
