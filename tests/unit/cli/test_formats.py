"""kcat format strings, Kafka console-consumer columns and kcat's JSON envelope
(client/cli/formats.py), and the progress line's text."""

from __future__ import annotations

import json

import pytest

from client.cli.common import Progress
from client.cli.formats import (
    FormatError,
    compile_format,
    from_json,
    kafka_columns,
    render,
    to_json,
)
from client.records.record import ConsumerRecord

REC = ConsumerRecord("t", 2, 17, 1700000000123, b"k1", b"hello", (("a", b"1"), ("b", b"2")))
BARE = ConsumerRecord("t", 0, 0, 5, None, None, ())


def fmt(f: str, r: ConsumerRecord = REC) -> bytes:
    return render(compile_format(f), r)


def test_every_kcat_token() -> None:
    assert fmt("%t %p %o %T %k %K %h %s %S\n") == b"t 2 17 1700000000123 k1 2 a=1,b=2 hello 5\n"
    assert fmt("Topic %t [%p] at offset %o: key %k: %s\\n") == (
        b"Topic t [2] at offset 17: key k1: hello\n"
    )


def test_nulls_print_nothing_and_lengths_minus_one() -> None:
    assert fmt("[%k][%K][%s][%S][%h]", BARE) == b"[][-1][][-1][]"


def test_escapes_and_percent() -> None:
    assert fmt("%s\\t%%\\r\\n\\x41\\\\") == b"hello\t%\r\nA\\"
    assert fmt("%s") == b"hello"  # nothing added, as kcat


@pytest.mark.parametrize("bad", ["%q", "abc%", "\\x4", "\\xzz"])
def test_bad_formats_are_refused(bad: str) -> None:
    with pytest.raises(FormatError):
        compile_format(bad)


def test_kafka_columns_order_and_nulls() -> None:
    line = kafka_columns(
        timestamp=True, partition=True, offset=True, headers=True, key=True, separator=b"\t"
    )
    assert line(REC) == b"CreateTime:1700000000123\tPartition:2\tOffset:17\ta:1,b:2\tk1\thello\n"
    assert line(BARE) == b"CreateTime:5\tPartition:0\tOffset:0\tNO_HEADERS\tnull\tnull\n"
    only_value = kafka_columns(
        timestamp=False, partition=False, offset=False, headers=False, key=False, separator=b"|"
    )
    assert only_value(REC) == b"hello\n"


def test_json_envelope_has_kcat_fields() -> None:
    out = to_json(REC)
    assert out.endswith(b"\n") and out.count(b"\n") == 1
    assert json.loads(out) == {
        "topic": "t",
        "partition": 2,
        "offset": 17,
        "tstype": "create",
        "ts": 1700000000123,
        "headers": ["a", "1", "b", "2"],
        "key": "k1",
        "payload": "hello",
    }
    assert json.loads(to_json(BARE))["key"] is None


def test_json_round_trips_bytes_that_are_not_utf8() -> None:
    r = ConsumerRecord("t", 0, 1, 9, b"\xff\x00k", "é€".encode() + b"\xfe", (("h", b"\x80"),))
    back = from_json(to_json(r).decode())
    assert back["key"] == r.key and back["value"] == r.value
    assert back["headers"] == [("h", b"\x80")]
    assert back["partition"] == 0 and back["timestamp_ms"] == 9


def test_from_json_forms() -> None:
    got = from_json('{"value": "v", "key": null, "headers": {"x": "1"}, "partition": 3}')
    assert got == {
        "value": b"v",
        "key": None,
        "headers": [("x", b"1")],
        "partition": 3,
        "timestamp_ms": None,
    }
    assert from_json('{"value": {"a": [1]}}')["value"] == b'{"a":[1]}'
    assert from_json('{"value": "v", "headers": [["x", "1"], ["y", null]]}')["headers"] == [
        ("x", b"1"),
        ("y", None),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        '{"value": "v", "nope": 1}',
        '{"value": "v", "payload": "w"}',
        '{"value": "v", "partition": -1}',
        '{"value": "v", "partition": "1"}',
        '{"value": "v", "ts": "now"}',
        '{"value": "v", "key": 5}',
        '{"value": "v", "headers": ["odd"]}',
        '{"value": "v", "headers": 3}',
    ],
)
def test_from_json_refuses_what_it_cannot_send(line: str) -> None:
    with pytest.raises(FormatError):
        from_json(line)


def test_progress_line_rate_and_latency() -> None:
    p = Progress("sent", 100, enabled=True)
    try:
        p.count = 50
        p.observe(0.010, 3)
        p.observe(0.020)
        text = p.line(p._last_t + 1.0)
        assert text.startswith("sent: 50/100 records, 50 records/s")
        assert "12.5 ms avg latency, 20.0 ms max latency" in text
        p.count = 60
        assert p.line(p._last_t + 2.0) == "sent: 60/100 records, 5 records/s"
    finally:
        p._stop.set()  # no terminal here: stop the thread without writing


def test_progress_disabled_starts_no_thread() -> None:
    p = Progress("x", enabled=False)
    p.observe(1.0)
    p.close()
    assert not p._thread.is_alive()
