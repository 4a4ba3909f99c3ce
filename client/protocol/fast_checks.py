"""Hand-written checks for the hottest responses, used before the schema walk.

A Produce answer carries one entry per partition. A producer spreading records over thousands
of partitions gets thousands of one-batch entries per answer, and the generic schema check
(client/protocol/schema.py: a closure per field, a new dict per entry) cost ~0.8 us each.
`produce_response` accepts a body only when it is exactly what that check would return (every
field present, of its type and range, no other keys), and then returns it as it is (~0.25 us
per entry); anything else returns None, and the schema check runs, which fills defaults or
names the bad field. `ApiSpec.check_response` (schema.py) tries these first, so the broker
checking what it sends and the client or a follower checking what it receives all take them.
tests/unit/protocol/test_protocol_fast_checks.py holds the two to the same answers.

A Fetch answer to a follower carries ~333 one-batch entries (one producer over 1,000 RF=3
partitions), each without the fields the leader leaves at their defaults
(`aborted_transactions`, `diverging_epoch`, `diverging_end_offset`): the schema check cost
~2-3 us per entry there, `fetch_response` ~1.3 us. It fills the omitted optional fields with
the schema's defaults in place (in the entry's own dict: the bodies checked are their
sender's or receiver's own, made for the message), then checks every field as that check would: it returns the
body only when it then equals what the schema check returns (a body it refuses may have had
defaults filled in, which changes nothing the schema check then says).

Both have a C implementation (client/protocol/_checks.c, the same answers and fills, ~0.1 us an
entry), which RESPONSE_FAST_CHECKS holds when it is built (client/records/extensions.py: not
with GREGOR_NO_EXTENSIONS); the Python functions here stay its definition and its fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from client.protocol.api_keys import ApiKey
from client.protocol.body import Body
from client.records.extensions import optional_extension

_I16 = 1 << 15
_I32 = 1 << 31
_I64 = 1 << 63


def _topics(topics: list[object], partitions: Callable[[list[object]], bool]) -> bool:
    """The topic entries of a Produce or Fetch response ({name, partitions} each), each
    topic's partition list checked by `partitions`."""
    for t in topics:
        if type(t) is not dict or len(t) != 2 or type(t.get("name")) is not str:
            return False
        parts = t.get("partitions")
        if type(parts) is not list or not partitions(parts):
            return False
    return True


def produce_response(raw: Any) -> Body | None:
    """`raw` if it is a complete, valid Produce response (any version so far), else None."""
    if type(raw) is not dict or len(raw) != 2:
        return None
    throttle = raw.get("throttle_time_ms")
    topics = raw.get("topics")
    if type(throttle) is not int or not -_I32 <= throttle < _I32 or type(topics) is not list:
        return None
    return raw if _topics(topics, _produce_partitions) else None


def _produce_partitions(parts: list[object]) -> bool:
    """The partition entries of one topic of a Produce response: every field present."""
    for p in parts:
        if type(p) is not dict or len(p) != 6:
            return False
        partition = p.get("partition")
        code = p.get("error_code")
        message = p.get("error_message", 0)
        base = p.get("base_offset")
        append_time = p.get("log_append_time_ms")
        start = p.get("log_start_offset")
        if (
            type(partition) is not int
            or type(code) is not int
            or type(base) is not int
            or type(append_time) is not int
            or type(start) is not int
            or (message is not None and type(message) is not str)
            or not -_I32 <= partition < _I32
            or not -_I16 <= code < _I16
            or not -_I64 <= base < _I64
            or not -_I64 <= append_time < _I64
            or not -_I64 <= start < _I64
        ):
            return False
    return True


_MISSING = object()
# what the schema check fills in for omitted partition fields (aborted_transactions: a new
# list each time, so it is filled apart)
_FETCH_PARTITION_DEFAULTS = {
    "high_watermark": -1,
    "last_stable_offset": -1,
    "log_start_offset": -1,
    "records": b"",
    "diverging_epoch": -1,
    "diverging_end_offset": -1,
}
_FETCH_PARTITION_FIELDS = 9  # those, partition, error_code and aborted_transactions


def _fetch_partitions(
    parts: list[object],
    lo16: int = -_I16,
    hi16: int = _I16,
    lo32: int = -_I32,
    hi32: int = _I32,
    lo64: int = -_I64,
    hi64: int = _I64,
) -> bool:
    """Check the partition entries of one topic of a Fetch response, their omitted fields
    filled in place. (The bounds are arguments: locals, not a global lookup and a negation
    per field.)"""
    defaults = _FETCH_PARTITION_DEFAULTS
    for p in parts:
        if type(p) is not dict:
            return False
        if len(p) < _FETCH_PARTITION_FIELDS:
            for k, v in defaults.items():
                p.setdefault(k, v)
            p.setdefault("aborted_transactions", [])
        get = p.get
        partition = get("partition")
        code = get("error_code")
        hw = get("high_watermark")
        lso = get("last_stable_offset")
        start = get("log_start_offset")
        div_epoch = get("diverging_epoch")
        div_end = get("diverging_end_offset")
        records = get("records")
        aborted = get("aborted_transactions")
        if (
            len(p) != _FETCH_PARTITION_FIELDS  # (filled: no other key)
            or type(partition) is not int
            or type(code) is not int
            or type(hw) is not int
            or type(lso) is not int
            or type(start) is not int
            or type(div_epoch) is not int
            or type(div_end) is not int
            or (type(records) is not bytes and type(records) is not memoryview)
            or type(aborted) is not list
            or not lo32 <= partition < hi32
            or not lo16 <= code < hi16
            or not lo64 <= hw < hi64
            or not lo64 <= lso < hi64
            or not lo64 <= start < hi64
            or not lo32 <= div_epoch < hi32
            or not lo64 <= div_end < hi64
        ):
            return False
        for a in aborted:
            if type(a) is not dict or len(a) != 2:
                return False
            pid = a.get("producer_id")
            first = a.get("first_offset")
            if (
                type(pid) is not int
                or type(first) is not int
                or not lo64 <= pid < hi64
                or not lo64 <= first < hi64
            ):
                return False
    return True


def fetch_response(raw: object) -> Body | None:
    """`raw`, its omitted optional fields filled in place, if it is then exactly what the
    schema check returns (any version so far), else None."""
    if type(raw) is not dict:
        return None
    code = raw.get("error_code", 0)
    session_id = raw.get("session_id", 0)
    throttle = raw.get("throttle_time_ms", 0)
    topics = raw.get("topics", _MISSING)
    if (
        type(code) is not int
        or type(session_id) is not int
        or type(throttle) is not int
        or not -_I16 <= code < _I16
        or not -_I32 <= session_id < _I32
        or not -_I32 <= throttle < _I32
    ):
        return None
    if topics is _MISSING:
        topics = []
    elif type(topics) is not list:
        return None
    if not _topics(topics, _fetch_partitions):
        return None
    raw.setdefault("error_code", 0)
    raw.setdefault("session_id", 0)
    raw.setdefault("throttle_time_ms", 0)
    raw.setdefault("topics", topics)
    return raw if len(raw) == 4 else None  # (filled: no other key)


# a check of a response body (any version): the body (Fetch: its defaults filled in place),
# or None
FastCheck = Callable[[Any], Body | None]
# api key -> its check; the C ones when built
PYTHON_FAST_CHECKS: dict[int, FastCheck] = {
    ApiKey.PRODUCE: produce_response,
    ApiKey.FETCH: fetch_response,
}
_ext = optional_extension("client.protocol._checks")
RESPONSE_FAST_CHECKS: dict[int, FastCheck] = (
    PYTHON_FAST_CHECKS
    if _ext is None
    else {ApiKey.PRODUCE: _ext.produce_response, ApiKey.FETCH: _ext.fetch_response}
)
