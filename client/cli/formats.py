"""How `gregor consume` writes records and `gregor produce --json` reads them: kcat's format
strings (`-f`), Kafka's console-consumer columns (`--print-*`) and kcat's JSON envelope (`-J`).

Format string tokens (kcat's):

    %s value      %S value length (-1 for null)     %k key     %K key length (-1 for null)
    %t topic      %p partition     %o offset        %T timestamp (ms since the epoch, UTC)
    %h headers as n=v pairs, comma-separated         %% a literal %

and the escapes \\n \\r \\t \\\\ and \\xHH (one byte, two hex digits). As in kcat nothing is
added: a format that should end its lines says `\\n`. A null key or value prints as nothing.

JSON (one compact object per line, kcat's field names and order):

    {"topic": str, "partition": int, "offset": int, "tstype": "create", "ts": int,
     "headers": [name, value, name, value, ...], "key": str|null, "payload": str|null}

Bytes that are not UTF-8 come out as `\\udcXX` escapes (Python's surrogateescape), which
`produce --json` turns back into the same bytes, so consume --json | produce --json copies
records exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from client.records.record import ConsumerRecord

Piece = bytes | Callable[[ConsumerRecord], bytes]

TOKENS = "stkKSpoTh%"


class FormatError(ValueError):
    """A format string or JSON input that cannot be used; the message says why."""


def _text(b: bytes | None) -> bytes:
    return b"" if b is None else b


def _length(b: bytes | None) -> bytes:
    return b"-1" if b is None else str(len(b)).encode()


def _csv_headers(r: ConsumerRecord) -> bytes:
    return b",".join(k.encode() + b"=" + _text(v) for k, v in r.headers)


_FIELDS: dict[str, Callable[[ConsumerRecord], bytes]] = {
    "s": lambda r: _text(r.value),
    "S": lambda r: _length(r.value),
    "k": lambda r: _text(r.key),
    "K": lambda r: _length(r.key),
    "t": lambda r: r.topic.encode(),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "T": lambda r: str(r.timestamp).encode(),
    "h": _csv_headers,
}

_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\"}


def compile_format(fmt: str) -> list[Piece]:
    """`fmt` as literal byte strings and field getters; FormatError names a bad token."""
    pieces: list[Piece] = []
    literal = bytearray()
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c == "%":
            if i + 1 >= len(fmt):
                raise FormatError("format ends with a lone '%' (%% prints a percent sign)")
            t = fmt[i + 1]
            if t == "%":
                literal += b"%"
            elif t in _FIELDS:
                if literal:
                    pieces.append(bytes(literal))
                    literal.clear()
                pieces.append(_FIELDS[t])
            else:
                raise FormatError(
                    f"unknown format token %{t} (tokens: " + " ".join(f"%{x}" for x in TOKENS) + ")"
                )
            i += 2
        elif c == "\\" and i + 1 < len(fmt):
            e = fmt[i + 1]
            if e in _ESCAPES:
                literal += _ESCAPES[e]
                i += 2
            elif e == "x":
                digits = fmt[i + 2 : i + 4]
                try:
                    if len(digits) != 2:
                        raise ValueError
                    literal.append(int(digits, 16))
                except ValueError:
                    raise FormatError(f"\\x needs two hex digits, got {digits!r}") from None
                i += 4
            else:
                literal += c.encode()  # an unknown escape stays as written, backslash included
                i += 1
        else:
            literal += c.encode()
            i += 1
    if literal:
        pieces.append(bytes(literal))
    return pieces


def render(pieces: list[Piece], r: ConsumerRecord) -> bytes:
    return b"".join(p if isinstance(p, bytes) else p(r) for p in pieces)


def kafka_columns(
    *,
    timestamp: bool,
    partition: bool,
    offset: bool,
    headers: bool,
    key: bool,
    separator: bytes,
) -> Callable[[ConsumerRecord], bytes]:
    """Kafka's console-consumer line (DefaultMessageFormatter): the chosen columns in its order,
    `CreateTime:TS`, `Partition:P`, `Offset:O`, headers as `k:v,k:v` (`NO_HEADERS`), key
    (`null`), then the value (`null`), joined by `separator`, ended by a newline."""

    def line(r: ConsumerRecord) -> bytes:
        cols: list[bytes] = []
        if timestamp:
            cols.append(b"CreateTime:%d" % r.timestamp)
        if partition:
            cols.append(b"Partition:%d" % r.partition)
        if offset:
            cols.append(b"Offset:%d" % r.offset)
        if headers:
            cols.append(
                b",".join(k.encode() + b":" + (b"null" if v is None else v) for k, v in r.headers)
                or b"NO_HEADERS"
            )
        if key:
            cols.append(b"null" if r.key is None else r.key)
        cols.append(b"null" if r.value is None else r.value)
        return separator.join(cols) + b"\n"

    return line


def _json_str(b: bytes | None) -> str:
    """One JSON string (or null) for `b`: UTF-8 text as is, other bytes as \\udcXX escapes."""
    if b is None:
        return "null"
    try:
        return json.dumps(b.decode(), ensure_ascii=False)
    except UnicodeDecodeError:
        return json.dumps(b.decode("utf-8", "surrogateescape"))  # ASCII, \udcXX for bad bytes


def to_json(r: ConsumerRecord) -> bytes:
    """kcat's -J envelope for `r`, on one line, newline included."""
    hdrs = ",".join(f"{json.dumps(k, ensure_ascii=False)},{_json_str(v)}" for k, v in r.headers)
    return (
        f'{{"topic":{json.dumps(r.topic)},"partition":{r.partition},"offset":{r.offset},'
        f'"tstype":"create","ts":{r.timestamp},"headers":[{hdrs}],'
        f'"key":{_json_str(r.key)},"payload":{_json_str(r.value)}}}\n'
    ).encode()


# -- produce --json ------------------------------------------------------------------------------

# Fields of consume's output that produce --json accepts and ignores, so that its output can be
# piped back in: the target topic is the command's, the offset the log's.
_IGNORED = {"topic", "offset", "tstype", "broker"}
_KNOWN = {"value", "payload", "key", "headers", "partition", "timestamp", "ts"}


def _as_bytes(v: Any, what: str) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if what == "value":  # a JSON value that is not a string is sent as its JSON text
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()
    raise FormatError(f"{what} must be a string or null, got {type(v).__name__}")


def _headers_from(v: Any) -> list[tuple[str, bytes | None]]:
    if v is None:
        return []
    if isinstance(v, dict):
        items: Iterable[Any] = v.items()
    elif isinstance(v, list) and all(isinstance(x, list) and len(x) == 2 for x in v) and v:
        items = v  # [[name, value], ...]
    elif isinstance(v, list):  # kcat's flat [name, value, name, value, ...]
        if len(v) % 2:
            raise FormatError("headers as a flat list need name, value pairs (even length)")
        items = zip(v[::2], v[1::2], strict=True)
    else:
        raise FormatError(f"headers must be an object or a list, got {type(v).__name__}")
    out = []
    for name, value in items:
        if not isinstance(name, str):
            raise FormatError(f"header name must be a string, got {name!r}")
        out.append((name, _as_bytes(value, f"header {name!r}")))
    return out


def from_json(line: str) -> dict[str, Any]:
    """One `produce --json` input line -> {value, key, headers, partition, timestamp_ms}."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise FormatError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FormatError(f"expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _KNOWN - _IGNORED)
    if unknown:
        raise FormatError(
            f"unknown field(s) {', '.join(unknown)} (known: value or payload, key, headers,"
            " partition, timestamp or ts)"
        )
    if "value" in obj and "payload" in obj:
        raise FormatError("both value and payload: give one")
    partition = obj.get("partition")
    if partition is not None and (type(partition) is not int or partition < 0):
        raise FormatError(f"partition must be a non-negative integer, got {partition!r}")
    ts = obj.get("timestamp", obj.get("ts"))
    if ts is not None and type(ts) is not int:
        raise FormatError(f"timestamp must be an integer (ms since the epoch), got {ts!r}")
    return {
        "value": _as_bytes(obj.get("value", obj.get("payload")), "value"),
        "key": _as_bytes(obj.get("key"), "key"),
        "headers": _headers_from(obj.get("headers")),
        "partition": partition,
        "timestamp_ms": ts,
    }
