"""client/protocol/fast_checks.py against the schema check: a fast check accepts a body only
when the schema check returns that same body (nothing filled, nothing dropped), and never
accepts one the schema check refuses. Hypothesis-generated bodies: valid ones, valid ones with
fields left out (optional), and mutated ones (a field's value replaced by anything msgpack can
carry, a field removed, a key added). Each test runs on both implementations: the Python
functions and their C twins (client/protocol/_checks.c, which RESPONSE_FAST_CHECKS holds when
built); and the two are held to the same answers and the same fills on every fuzzed body."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import for_type, msgpack_values

from client.errors import InvalidRequestError
from client.protocol import API_SPECS
from client.protocol.fast_checks import PYTHON_FAST_CHECKS, RESPONSE_FAST_CHECKS, FastCheck
from client.records.extensions import optional_extension

Checks = dict[int, FastCheck]
_C = optional_extension("client.protocol._checks")


@pytest.fixture(params=["python", "c"])
def checks(request: pytest.FixtureRequest) -> Checks:
    if request.param == "python":
        return PYTHON_FAST_CHECKS
    if _C is None:
        pytest.skip("client.protocol._checks is not built (no compiler, or GREGOR_NO_EXTENSIONS)")
    from client.protocol import ApiKey

    return {ApiKey.PRODUCE: _C.produce_response, ApiKey.FETCH: _C.fetch_response}


def test_the_c_checks_are_the_ones_used_when_built() -> None:
    from client.protocol import ApiKey

    if _C is None:
        assert RESPONSE_FAST_CHECKS is PYTHON_FAST_CHECKS
    else:
        assert RESPONSE_FAST_CHECKS[ApiKey.FETCH] is _C.fetch_response
        assert RESPONSE_FAST_CHECKS[ApiKey.PRODUCE] is _C.produce_response


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _copy(value: Any) -> Any:
    """A copy of a body's dicts and lists (the leaves shared)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _twins(key: int, body: Any) -> None:
    """The Python check and the C one give the same answer and leave the same body."""
    if _C is None:
        return
    from client.protocol import ApiKey

    c_check = {ApiKey.PRODUCE: _C.produce_response, ApiKey.FETCH: _C.fetch_response}[key]
    py_body, c_body = _copy(body), _copy(body)
    py, c = PYTHON_FAST_CHECKS[key](py_body), c_check(c_body)
    assert (py is None) == (c is None), (body, py, c)
    assert py_body == c_body and repr(py_body) == repr(c_body)  # (the fills' key order too)


def _agree(key: int, body: Any, checks: Checks) -> None:
    _twins(key, body)
    spec = API_SPECS[key]
    fast = checks[key](body)
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


def test_every_fast_check_agrees_with_the_schema(checks: Checks) -> None:
    for key in checks:
        _fuzz(key, checks)


def _fuzz(key: int, checks: Checks) -> None:
    spec = API_SPECS[key]

    @SETTINGS
    @given(
        body=for_type(spec.response, spec.max_version)
        | for_type(spec.response, spec.max_version, full=False),
        data=st.data(),
    )
    def check(body: Any, data: st.DataObject) -> None:
        _agree(key, body, checks)
        if checks[key](body) is None:
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
        _agree(key, body, checks)

    check()


def test_produce_fast_check_edges(checks: Checks) -> None:
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
    _agree(ApiKey.PRODUCE, body, checks)
    assert checks[ApiKey.PRODUCE](body) is body
    for field, bad in (("base_offset", 2**63), ("error_code", 2**15), ("partition", True)):
        broken = {**part, field: bad}
        b = {"topics": [{"name": "t", "partitions": [broken]}], "throttle_time_ms": 0}
        assert checks[ApiKey.PRODUCE](b) is None
        _agree(ApiKey.PRODUCE, b, checks)
    only_code = {"error_code": 35}  # a whole-request error body: the schema path handles it
    assert checks[ApiKey.PRODUCE](only_code) is None


def test_fetch_fast_check_fills_what_a_follower_answer_leaves_out(checks: Checks) -> None:
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
    assert checks[ApiKey.FETCH](raw) is raw
    assert raw == checked  # the leader's omitted fields filled as the schema fills them
    part = raw["topics"][0]["partitions"][0]
    assert (part["diverging_epoch"], part["diverging_end_offset"]) == (-1, -1)
    assert part["aborted_transactions"] == [] and raw["throttle_time_ms"] == 0
    view = body(records=memoryview(b"\x00" * 70))
    assert checks[ApiKey.FETCH](view) is view
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
        assert checks[ApiKey.FETCH](b) is None, field
        _agree(ApiKey.FETCH, body(**{field: bad}), checks)
    assert checks[ApiKey.FETCH]({"error_code": 35}) == {
        "error_code": 35,
        "session_id": 0,
        "topics": [],
        "throttle_time_ms": 0,
    }


def test_fetch_fast_check_bounds_and_fills_each_entry(checks: Checks) -> None:
    """Every int field at both ends of its range, one past them, and beyond 64 bits; entries
    that need filling beside entries that do not, in one list (each filled in its own dict, a
    list of its own)."""
    from client.protocol import ApiKey

    def entry(**changes: Any) -> dict:
        return {"partition": 1, "error_code": 0, "high_watermark": 5, "records": b"", **changes}

    full = {**entry(), "last_stable_offset": 5, "log_start_offset": 0, "diverging_epoch": -1,
            "diverging_end_offset": -1, "aborted_transactions": [{"producer_id": 7, "first_offset": 2}]}  # fmt: skip
    bits = {"partition": 32, "error_code": 16, "high_watermark": 64, "diverging_epoch": 32}
    for field, n in bits.items():
        for value, ok in ((-(2**(n - 1)), True), (2**(n - 1) - 1, True), (-(2**(n - 1)) - 1, False),
                          (2**(n - 1), False), (2**70, False), (-(2**70), False)):  # fmt: skip
            parts = [entry(**{field: value}), dict(full), entry()]
            body = {"topics": [{"name": "t", "partitions": parts}]}
            kept = list(parts)
            _agree(ApiKey.FETCH, _copy(body), checks)
            got = checks[ApiKey.FETCH](body)
            assert (got is body) == ok, (field, value)
            assert all(a is b for a, b in zip(parts, kept, strict=True))  # (in place)
            assert parts[0]["aborted_transactions"] == []  # (filled before it was refused)
            if ok:  # (a refusal stops at the first bad entry: the last is not looked at)
                assert parts[0]["aborted_transactions"] is not parts[2]["aborted_transactions"]


def test_the_checks_keep_no_reference_and_no_memory(checks: Checks) -> None:
    """Twenty thousand answers checked and dropped (filled, complete, refused, with a made
    `topics`): what the checks made goes with them, and the records they point at are held
    by nothing else (a reference the C kept would show in both)."""
    import gc
    import sys
    import tracemalloc

    from client.protocol import ApiKey

    records = b"\x00" * 61

    def answers() -> list[tuple[int, dict]]:
        part = {"partition": 1, "error_code": 0, "high_watermark": 5, "records": records}
        return [
            (ApiKey.FETCH, {"topics": [{"name": "t", "partitions": [dict(part), dict(part)]}]}),
            (ApiKey.FETCH, {"topics": [{"name": "t", "partitions": [{**part, "error_code": 2**15}]}]}),
            (ApiKey.FETCH, {"error_code": 3}),
            (ApiKey.PRODUCE, {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [
                {"partition": 0, "error_code": 0, "error_message": None, "base_offset": 1,
                 "log_append_time_ms": -1, "log_start_offset": 0}]}]}),
        ]  # fmt: skip

    def run(n: int) -> None:
        for _ in range(n):
            for key, body in answers():
                checks[key](body)

    run(1000)
    gc.collect()
    held = sys.getrefcount(records)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        run(20_000)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sys.getrefcount(records) == held
    assert after - before < 64 * 1024, after - before
