"""client/protocol/fast_checks.py against the schema check: a fast check accepts a body only
when the schema check returns that same body (nothing filled, nothing dropped), and never
accepts one the schema check refuses. Hypothesis-generated bodies: valid ones, valid ones with
fields left out (optional), and mutated ones (a field's value replaced by anything msgpack can
carry, a field removed, a key added)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import for_type, msgpack_values

from client.errors import InvalidRequestError
from client.protocol import API_SPECS
from client.protocol.fast_checks import RESPONSE_FAST_CHECKS

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _agree(key: int, body: Any) -> None:
    spec = API_SPECS[key]
    fast = RESPONSE_FAST_CHECKS[key](body)
    for version in range(spec.min_version, spec.max_version + 1):
        try:
            checked = spec.response.check(body, version)  # the schema walk alone
        except InvalidRequestError:
            assert fast is None, f"fast check accepted what v{version} refuses: {body!r}"
            continue
        if fast is not None:
            assert fast is body and checked == body, (checked, body)


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Every (container path) in a body: where a mutation can land."""
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*path, i)))
    return out


def _at(body: Any, path: tuple) -> Any:
    for step in path:
        body = body[step]
    return body


def test_every_fast_check_agrees_with_the_schema() -> None:
    for key in RESPONSE_FAST_CHECKS:
        _fuzz(key)


def _fuzz(key: int) -> None:
    spec = API_SPECS[key]

    @SETTINGS
    @given(
        body=for_type(spec.response, spec.max_version)
        | for_type(spec.response, spec.max_version, full=False),
        data=st.data(),
    )
    def check(body: Any, data: st.DataObject) -> None:
        _agree(key, body)
        if RESPONSE_FAST_CHECKS[key](body) is None:
            return
        path = data.draw(st.sampled_from(_paths(body)))
        what = data.draw(st.sampled_from(["replace", "drop", "add"]))
        if not path:
            target, last = None, None
        else:
            target, last = _at(body, path[:-1]), path[-1]
        if what == "replace" and target is not None:
            target[last] = data.draw(msgpack_values)
        elif what == "drop" and isinstance(target, dict):
            del target[last]
        elif what == "add":
            holder = _at(body, path)
            if isinstance(holder, dict):
                holder[data.draw(st.text(max_size=6))] = data.draw(msgpack_values)
        _agree(key, body)

    check()


def test_produce_fast_check_edges() -> None:
    from client.protocol import ApiKey

    part = {
        "partition": 0,
        "error_code": 0,
        "error_message": None,
        "base_offset": 2**63 - 1,
        "log_append_time_ms": -1,
        "log_start_offset": 0,
    }
    body = {"topics": [{"name": "t", "partitions": [part]}], "throttle_time_ms": 0}
    _agree(ApiKey.PRODUCE, body)
    assert RESPONSE_FAST_CHECKS[ApiKey.PRODUCE](body) is body
    for field, bad in (("base_offset", 2**63), ("error_code", 2**15), ("partition", True)):
        broken = {**part, field: bad}
        b = {"topics": [{"name": "t", "partitions": [broken]}], "throttle_time_ms": 0}
        assert RESPONSE_FAST_CHECKS[ApiKey.PRODUCE](b) is None
        _agree(ApiKey.PRODUCE, b)
    only_code = {"error_code": 35}  # a whole-request error body: the schema path handles it
    assert RESPONSE_FAST_CHECKS[ApiKey.PRODUCE](only_code) is None


def test_fetch_fast_check_fills_what_a_follower_answer_leaves_out() -> None:
    from client.protocol import ApiKey

    def body(**changes: Any) -> dict:
        part = {
            "partition": 3,
            "error_code": 0,
            "high_watermark": 7,
            "last_stable_offset": 7,
            "log_start_offset": 0,
            "records": b"\x00" * 70,
            **changes,
        }
        return {"error_code": 0, "session_id": 9, "topics": [{"name": "t", "partitions": [part]}]}

    spec = API_SPECS[ApiKey.FETCH]
    raw = body()
    checked = spec.check_response(body(), 0)
    assert RESPONSE_FAST_CHECKS[ApiKey.FETCH](raw) is raw
    assert raw == checked  # the leader's omitted fields filled as the schema fills them
    part = raw["topics"][0]["partitions"][0]
    assert (part["diverging_epoch"], part["diverging_end_offset"]) == (-1, -1)
    assert part["aborted_transactions"] == [] and raw["throttle_time_ms"] == 0
    view = body(records=memoryview(b"\x00" * 70))
    assert RESPONSE_FAST_CHECKS[ApiKey.FETCH](view) is view
    for field, bad in (
        ("high_watermark", 2**63),
        ("diverging_epoch", 2**31),
        ("error_code", 2**15),
        ("partition", True),
        ("records", "x"),
        ("aborted_transactions", [{"producer_id": 1}]),
        ("unknown", 1),
    ):
        b = body(**{field: bad})
        assert RESPONSE_FAST_CHECKS[ApiKey.FETCH](b) is None, field
        _agree(ApiKey.FETCH, body(**{field: bad}))
    assert RESPONSE_FAST_CHECKS[ApiKey.FETCH]({"error_code": 35}) == {
        "error_code": 35,
        "session_id": 0,
        "topics": [],
        "throttle_time_ms": 0,
    }
