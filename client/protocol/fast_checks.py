"""Hand-written checks for the hottest responses, used before the schema walk.

A Produce answer carries one entry per partition. A producer spreading records over thousands
of partitions gets thousands of one-batch entries per answer, and the generic schema check
(client/protocol/schema.py: a closure per field, a new dict per entry) cost ~0.8 us each.
`produce_response` accepts a body only when it is exactly what that check would return (every
field present, of its type and range, no other keys), and then returns it as it is (~0.25 us
per entry); anything else returns None, and the caller runs the schema check, which fills
defaults or names the bad field. tests/unit/protocol/test_protocol_fast_checks.py holds the
two to the same answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from client.protocol.api_keys import ApiKey
from client.protocol.body import Body

_I16 = 1 << 15
_I32 = 1 << 31
_I64 = 1 << 63


def produce_response(raw: Any) -> Body | None:
    """`raw` if it is a complete, valid Produce response (any version so far), else None."""
    if type(raw) is not dict or len(raw) != 2:
        return None
    throttle = raw.get("throttle_time_ms")
    topics = raw.get("topics")
    if type(throttle) is not int or not -_I32 <= throttle < _I32 or type(topics) is not list:
        return None
    for t in topics:
        if type(t) is not dict or len(t) != 2 or type(t.get("name")) is not str:
            return None
        parts = t.get("partitions")
        if type(parts) is not list:
            return None
        for p in parts:
            if type(p) is not dict or len(p) != 6:
                return None
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
                return None
    return raw


# api key -> check of its response body (any version): the body as it is, or None
RESPONSE_FAST_CHECKS: dict[int, Callable[[Any], Body | None]] = {
    ApiKey.PRODUCE: produce_response,
}
