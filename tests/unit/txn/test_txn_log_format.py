"""`__transaction_state` records in Kafka's TransactionLog format, and the partition of an id."""

from __future__ import annotations

import struct

import pytest

from broker.txn.log_format import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    java_string_hash,
    partition_for,
)
from broker.txn.state import TxnMetadata, TxnState


def test_java_string_hash_matches_java() -> None:
    # values printed by java.lang.String.hashCode (OpenJDK)
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("transactional-id-1") == 1051133891
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\U0001f600") == 1772899  # a surrogate pair counts as two chars


def test_partition_for_uses_kafka_utils_abs() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert partition_for("transactional-id-1", 50) == 1051133891 % 50
    assert partition_for("hello", 7) == 99162322 % 7


def test_key_bytes_are_kafkas() -> None:
    assert encode_key("t1") == b"\x00\x00\x00\x02t1"
    assert decode_key(encode_key("é-id")) == "é-id"


def test_value_round_trip_and_layout() -> None:
    md = TxnMetadata(
        "tid", 4242, 7, 60_000, TxnState.ONGOING,
        frozenset({("b", 1), ("a", 3), ("a", 0)}), 1_700_000_000_000, 1_700_000_000_123,
    )  # fmt: skip
    raw = encode_value(md)
    assert decode_value("tid", raw) == md
    # version 0, producer id, epoch, timeout, state, then 2 topics sorted by name
    assert raw[:21] == struct.pack(">hqhib", 0, 4242, 7, 60_000, 1) + struct.pack(">i", 2)
    assert raw[21:] == (
        b"\x00\x01a" + struct.pack(">iii", 2, 0, 3) + b"\x00\x01b" + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)
    )  # fmt: skip


@pytest.mark.parametrize("state", list(TxnState))
def test_every_state_round_trips(state: TxnState) -> None:
    md = TxnMetadata("x", 1, 0, 1000, state, frozenset(), -1, 5)
    assert decode_value("x", encode_value(md)) == md


def test_unknown_versions_and_truncation_are_refused() -> None:
    with pytest.raises(ValueError, match="version 1"):
        decode_key(b"\x00\x01\x00\x01t")
    raw = encode_value(TxnMetadata("x", 1, 0, 1000, TxnState.EMPTY))
    with pytest.raises(ValueError, match="version 3"):
        decode_value("x", b"\x00\x03" + raw[2:])
    with pytest.raises(ValueError, match="ends early"):
        decode_value("x", raw[:-3])
