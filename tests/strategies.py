"""Hypothesis strategies built from the protocol schemas themselves (one definition), shared by
the protocol unit tests and the fuzz tests against a live broker (`from strategies import ...`)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from client.protocol.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    Array,
    Nullable,
    Struct,
    Type,
)

_PRIMITIVES: dict[int, st.SearchStrategy[Any]] = {
    id(INT8): st.integers(-(2**7), 2**7 - 1),
    id(INT16): st.integers(-(2**15), 2**15 - 1),
    id(INT32): st.integers(-(2**31), 2**31 - 1),
    id(INT64): st.integers(-(2**63), 2**63 - 1),
    id(FLOAT64): st.floats(allow_nan=False),
    id(BOOL): st.booleans(),
    id(STRING): st.text(max_size=20),
    id(BYTES): st.binary(max_size=64),
}


def for_type(
    t: Type,
    version: int,
    full: bool = True,
    primitives: dict[int, st.SearchStrategy[Any]] | None = None,
) -> st.SearchStrategy[Any]:
    """Values valid for `t`. With full=False, optional struct fields may be left out.
    `primitives` replaces the strategy of some primitive types (keyed by `id(INT32)` etc.)."""
    if isinstance(t, Nullable):
        return st.none() | for_type(t.inner, version, full, primitives)
    if isinstance(t, Array):
        return st.lists(for_type(t.of, version, full, primitives), max_size=3)
    if isinstance(t, Struct):
        required: dict[str, st.SearchStrategy[Any]] = {}
        optional: dict[str, st.SearchStrategy[Any]] = {}
        for f in t.fields:
            if f.since > version:
                continue
            target = required if (full or f.required) else optional
            target[f.name] = for_type(f.type, version, full, primitives)
        return st.fixed_dictionaries(required, optional=optional)
    if primitives and id(t) in primitives:
        return primitives[id(t)]
    return _PRIMITIVES[id(t)]


# Anything msgpack can carry: what a hostile or buggy peer might send as a body.
msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=10)
    | st.binary(max_size=10),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(-5, 5), children, max_size=4)
    ),
    max_leaves=20,
)
