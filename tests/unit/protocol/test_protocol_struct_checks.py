"""The compiled struct checks (schema.py `_compile_struct`: generated code, primitives inline)
answer as a naive field-by-field walk of the schema: the same output, key order included (the
msgpack bytes), the same defaults, and for a bad body the same error naming the same path.
Valid bodies, bodies with fields left out, and valid bodies with one value anywhere in them
replaced by garbage or removed, for every registered API's request and response."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import for_type, msgpack_values

from client.errors import InvalidRequestError
from client.protocol import API_SPECS
from client.protocol.schema import Array, Nullable, Struct, Type, _Primitive

SPECS = sorted(API_SPECS.values(), key=lambda s: s.key)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def walk(t: Type, v: object, version: int, path: str) -> object:
    """The naive check: raises InvalidRequestError with the message the schema promises."""
    if isinstance(t, _Primitive):
        types = t._pytypes
        if type(v) not in types and not (types == (float,) and type(v) is int):
            raise InvalidRequestError(
                f"{path or 'body'}: expected {t.name}, got {type(v).__name__}"
            )
        if t._lo is not None and not t._lo <= v <= t._hi:  # type: ignore[operator]
            raise InvalidRequestError(f"{path}: {v} out of range for {t.name}")
        return v
    if isinstance(t, Nullable):
        return None if v is None else walk(t.inner, v, version, path)
    if isinstance(t, Array):
        if type(v) is not list:
            raise InvalidRequestError(f"{path}: expected array, got {type(v).__name__}")
        if t.max_items is not None and len(v) > t.max_items:
            raise InvalidRequestError(f"{path}: {len(v)} items exceed {t.max_items}")
        return [walk(t.of, item, version, f"{path}[{i}]") for i, item in enumerate(v)]
    assert isinstance(t, Struct)
    if type(v) is not dict:
        raise InvalidRequestError(f"{path or 'body'}: expected map, got {type(v).__name__}")
    out = {}
    for f in t.fields:
        if f.since > version:
            continue
        at = f"{path}.{f.name}" if path else f.name
        if f.name not in v:
            if f.required:
                raise InvalidRequestError(f"{at}: required field missing")
            out[f.name] = f.default() if callable(f.default) else f.default
        else:
            out[f.name] = walk(f.type, v[f.name], version, at)
    return out


def _outcome(fn, *args) -> tuple[str, object]:
    try:
        return ("ok", msgpack.packb(fn(*args), use_bin_type=True))
    except InvalidRequestError as exc:
        return ("bad", exc.message)


def _same(struct: Struct, body: object, version: int) -> None:
    assert _outcome(struct.check, body, version) == _outcome(walk, struct, body, version, "")


def _spoil(data: st.DataObject, body: object) -> object:
    """`body` with one value somewhere inside replaced by garbage, or a map key removed."""
    if isinstance(body, dict) and body:
        key = data.draw(st.sampled_from(sorted(body)))
        out = dict(body)
        how = data.draw(st.sampled_from(["deeper", "garbage", "remove"]))
        if how == "remove":
            del out[key]
        elif how == "garbage":
            out[key] = data.draw(msgpack_values)
        else:
            out[key] = _spoil(data, body[key])
        return out
    if isinstance(body, list) and body:
        i = data.draw(st.integers(0, len(body) - 1))
        out_list = list(body)
        out_list[i] = _spoil(data, body[i])
        return out_list
    return data.draw(msgpack_values)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_compiled_checks_answer_as_the_schema_walk(spec) -> None:
    @FAST
    @given(data=st.data(), full=st.booleans(), response=st.booleans())
    def check(data: st.DataObject, full: bool, response: bool) -> None:
        struct = spec.response if response else spec.request
        version = data.draw(st.integers(spec.min_version, spec.max_version))
        body = data.draw(for_type(struct, version, full=full))
        _same(struct, body, version)
        _same(struct, _spoil(data, body), version)

    check()
