"""broker/log/batches.py validate_batches: the C path (client/records/_crc.c, when built) and
the Python path answer alike: the same (position, header) list, or the same error."""

from __future__ import annotations

import struct

import pytest

from broker.log.batches import validate_batches
from client.errors import CorruptRecordError, MessageTooLargeError
from client.records import build_batch
from client.records import header as header_mod


def _batch(n: int, seq: int = 0) -> bytes:
    return build_batch([(None, b"v" * 50)] * n, producer_id=7, producer_epoch=0, base_sequence=seq)


def _cases() -> list[tuple[bytearray, int | None]]:
    good = _batch(3) + _batch(2, 3)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    bad_count = bytearray(_batch(3))
    struct.pack_into(">i", bad_count, 57, 9)
    return [
        (bytearray(good), None),
        (bytearray(good), 10**6),
        (bytearray(good), len(_batch(3)) - 1),
        (bytearray(good[:-1]), None),
        (bytearray(good[:30]), None),
        (bytearray(good[:30]), 10),
        (bytearray(b""), None),
        (bad_crc, None),
        (bad_magic, None),
        (bad_count, None),
    ]


def _answer(buf: bytearray, max_bytes: int | None) -> object:
    try:
        return validate_batches(buf, max_bytes, "[t-0]")
    except (CorruptRecordError, MessageTooLargeError) as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize("case", range(len(_cases())))
def test_c_and_python_paths_answer_alike(case, monkeypatch):
    buf, max_bytes = _cases()[case]
    with_c = _answer(buf, max_bytes)
    monkeypatch.setattr(header_mod, "_c_validate_batches", None)
    assert _answer(buf, max_bytes) == with_c
    if isinstance(with_c, list):
        assert [p for p, _h in with_c] == [0, len(_batch(3))][: len(with_c)]
