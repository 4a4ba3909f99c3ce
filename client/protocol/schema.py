"""Declarative API schemas: every request and response is declared once, as data.

The codec (`check`), docs/protocol.md and the fuzz tests all read these definitions.
A schema is a `Struct` of `Field`s; field types are the primitives below, `Array(T)`,
nested `Struct`s and `Nullable(T)`. A field added in a later version carries `since=N`;
a field with a default may be omitted by the sender.

    ApiVersions = ApiSpec(
        key=ApiKey.API_VERSIONS, name="ApiVersions", min_version=0, max_version=0,
        request=Struct(),
        response=Struct(Field("error_code", INT16), Field("api_keys", Array(Struct(...)))),
    )

`check(value, version, path)` validates a decoded msgpack value against the schema, fills
defaults for omitted optional fields, and raises InvalidRequestError naming the path of the
first bad field (`topics[0].partitions[2].records: expected bytes, got int`). Unknown keys
are ignored (forward compatibility).

Speed: every request is checked by the broker and every response by both ends, so the schema
walk is done once per type and version: `checker(version)` builds a tree of closures (field
plans precomputed, primitive checks specialised) and paths are formatted only when a check
fails. A Produce request checks in ~2.6 us instead of ~8.3 us with the per-value walk. A
struct's check is generated code (`_compile_struct`: primitive fields checked inline, the
output dict built at once): a Fetch answer's partition entry checks in ~1.7 us instead of
~2.5 us (tests/unit/protocol/test_protocol_struct_checks.py holds it to a naive walk).
Any thread may call; the per-version cache is filled idempotently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from client.errors import InvalidRequestError
from client.protocol.body import Body
from client.protocol.fast_checks import RESPONSE_FAST_CHECKS

_REQUIRED = object()
_MISSING = object()

Checker = Callable[[Any], Any]


class _Bad(Exception):
    """Internal: a value failed its check. Carries the message and the path segments from the
    failing value up to the checked root (innermost first), appended while unwinding; the
    public `check` renders them. Built only on failure, so a valid body formats no paths."""

    def __init__(self, message: str, body_at_root: bool = False, field: str | None = None):
        self.message = message
        self.body_at_root = body_at_root  # an empty path reads "body" (type errors of the root)
        self.segments: list[str | int] = [] if field is None else [field]

    def render(self, path: str) -> str:
        for seg in reversed(self.segments):
            if isinstance(seg, int):
                path = f"{path}[{seg}]"
            else:
                path = f"{path}.{seg}" if path else seg
        return f"{(path or 'body') if self.body_at_root else path}: {self.message}"


def _type_error(expected: str, value: Any) -> _Bad:
    return _Bad(f"expected {expected}, got {type(value).__name__}", body_at_root=True)


class Type:
    name = "?"
    _compiled: dict[int, Checker]

    def check(self, value: Any, version: int, path: str = "") -> Any:
        """`value` checked against this type at `version` (defaults filled); raises
        InvalidRequestError naming the path of the first bad field, below `path`."""
        try:
            return self.checker(version)(value)
        except _Bad as exc:
            raise InvalidRequestError(exc.render(path)) from None

    def checker(self, version: int) -> Checker:
        """The check for `version` as one closure, built once per type and version (a request
        is checked on every hop, so the schema walk is done ahead, not per value). The
        closure raises _Bad; `check` turns that into InvalidRequestError."""
        try:
            return self._compiled[version]
        except AttributeError:
            self._compiled = {}
        except KeyError:
            pass
        fn = self._compiled[version] = self._build(version)
        return fn

    def _build(self, version: int) -> Checker:
        raise NotImplementedError

    def doc(self) -> str:
        return self.name

    def example(self) -> Any:  # a valid value, used by docs and fuzz tests
        raise NotImplementedError


class _Primitive(Type):
    def __init__(
        self,
        name: str,
        pytypes: tuple[type, ...],
        lo: int | None = None,
        hi: int | None = None,
        example: Any = None,
    ) -> None:
        self.name = name
        self._pytypes = pytypes
        self._lo = lo
        self._hi = hi
        self._example = example

    def _build(self, version: int) -> Checker:
        name, pytypes, lo, hi = self.name, self._pytypes, self._lo, self._hi
        pytype = pytypes[0]
        if len(pytypes) > 1:

            def check_types(v: Any) -> Any:
                if type(v) not in pytypes:
                    raise _type_error(name, v)
                return v

            return check_types
        if pytype is float:  # an int is a valid float64

            def check_float(v: Any) -> Any:
                if type(v) is not float and type(v) is not int:
                    raise _type_error(name, v)
                return v

            return check_float
        if lo is None:

            def check_type(v: Any) -> Any:
                if type(v) is not pytype:
                    raise _type_error(name, v)
                return v

            return check_type

        def check_int(v: Any) -> Any:
            if type(v) is not pytype:
                raise _type_error(name, v)
            if v < lo or v > hi:  # type: ignore[operator]
                raise _Bad(f"{v} out of range for {name}")
            return v

        return check_int

    def example(self) -> Any:
        return self._example


INT8 = _Primitive("int8", (int,), -(2**7), 2**7 - 1, 0)
INT16 = _Primitive("int16", (int,), -(2**15), 2**15 - 1, 0)
INT32 = _Primitive("int32", (int,), -(2**31), 2**31 - 1, 0)
INT64 = _Primitive("int64", (int,), -(2**63), 2**63 - 1, 0)
FLOAT64 = _Primitive("float64", (float,), example=0.0)
BOOL = _Primitive("bool", (bool,), example=False)
STRING = _Primitive("string", (str,), example="x")
# memoryview: large Produce records decoded without a copy (client/protocol/views.py)
BYTES = _Primitive("bytes", (bytes, memoryview), example=b"")


class Nullable(Type):
    def __init__(self, inner: Type) -> None:
        self.inner = inner
        self.name = f"{inner.name}?"

    def _build(self, version: int) -> Checker:
        inner = self.inner.checker(version)

        def check_nullable(v: Any) -> Any:
            return None if v is None else inner(v)

        return check_nullable

    def doc(self) -> str:
        return f"{self.inner.doc()} | nil"

    def example(self) -> Any:
        return None


class Array(Type):
    def __init__(self, of: Type, max_items: int | None = None) -> None:
        self.of = of
        self.max_items = max_items
        self.name = f"[{of.name}]"

    def _build(self, version: int) -> Checker:
        item_check = self.of.checker(version)
        max_items = self.max_items
        in_place = isinstance(self.of, _Primitive)  # items come back as they are

        def check_array(v: Any) -> Any:
            if type(v) is not list:
                raise _Bad(f"expected array, got {type(v).__name__}")
            if max_items is not None and len(v) > max_items:
                raise _Bad(f"{len(v)} items exceed {max_items}")
            try:
                if in_place:
                    for item in v:
                        item_check(item)
                    return v
                return [item_check(item) for item in v]
            except _Bad as exc:
                exc.segments.append(_first_bad(item_check, v))
                raise

        return check_array

    def doc(self) -> str:
        return f"array of {self.of.doc()}"

    def example(self) -> Any:
        return [self.of.example()]


def _first_bad(item_check: Checker, items: list[Any]) -> int:
    """The index of the first item that fails (called only once one has failed)."""
    for i, item in enumerate(items):
        try:
            item_check(item)
        except _Bad:
            return i
    raise AssertionError("no failing item in an array that failed its check")


@dataclass(frozen=True)
class Field:
    name: str
    type: Type
    default: Any = _REQUIRED
    since: int = 0
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


class Struct(Type):
    def __init__(self, *fields: Field, name: str = "struct") -> None:
        self.fields = fields
        self.name = name

    def _build(self, version: int) -> Checker:
        return _compile_struct([f for f in self.fields if f.since <= version], version, self.name)

    def doc(self) -> str:
        return self.name

    def example(self) -> Any:
        return {f.name: f.type.example() for f in self.fields}


def _fail(check: Checker, value: Any, name: str) -> None:
    """A struct field's value failed an inlined check: its checker raises the _Bad, which gets
    the field's name."""
    try:
        check(value)
    except _Bad as exc:
        exc.segments.append(name)
        raise
    raise AssertionError(f"{name}: an inlined check refused what its checker accepts")


def _compile_struct(fields: list[Field], version: int, struct_name: str) -> Checker:
    """A struct's check as one generated function: each field read, checked and defaulted in
    declaration order, primitives inline (no call per field), the output dict built at once.
    The same answers as a field-by-field walk: the first bad field in order raises, with the
    same message and path (inline checks that fail call the field's checker to raise it)."""
    ns: dict[str, object] = {
        "_MISSING": _MISSING,
        "_Bad": _Bad,
        "_fail": _fail,
        "_type_error": _type_error,
    }
    lines = [
        "def check_struct(v):",
        "    if type(v) is not dict:",
        "        raise _type_error('map', v)",
        "    get = v.get",
    ]
    out = []
    for i, f in enumerate(fields):
        x, name = f"x{i}", repr(f.name)
        ns[f"C{i}"] = f.type.checker(version)
        lines.append(f"    {x} = get({name}, _MISSING)")
        lines.append(f"    if {x} is _MISSING:")
        if f.required:
            lines.append(f"        raise _Bad('required field missing', field={name})")
        else:
            ns[f"D{i}"] = f.default
            lines.append(f"        {x} = D{i}()" if callable(f.default) else f"        {x} = D{i}")
        t = f.type
        if isinstance(t, _Primitive):
            pytypes = t._pytypes
            if len(pytypes) > 1:
                ns[f"T{i}"] = pytypes
                bad = f"type({x}) not in T{i}"
            elif pytypes[0] is float:
                bad = f"type({x}) is not float and type({x}) is not int"
            else:
                ns[f"P{i}"] = pytypes[0]
                bad = f"type({x}) is not P{i}"
                if t._lo is not None:
                    bad += f" or {x} < {t._lo!r} or {x} > {t._hi!r}"
            lines.append(f"    elif {bad}:")
            lines.append(f"        _fail(C{i}, {x}, {name})")
        else:
            lines.append("    else:")
            lines.append("        try:")
            lines.append(f"            {x} = C{i}({x})")
            lines.append("        except _Bad as exc:")
            lines.append(f"            exc.segments.append({name})")
            lines.append("            raise")
        out.append(f"{name}: {x}")
    lines.append(f"    return {{{', '.join(out)}}}")
    exec(compile("\n".join(lines), f"<schema {struct_name} v{version}>", "exec"), ns)
    fn = ns["check_struct"]
    assert callable(fn)
    return fn


@dataclass(frozen=True)
class ApiSpec:
    key: int
    name: str
    request: Struct
    response: Struct
    min_version: int = 0
    max_version: int = 0
    doc: str = ""
    internal: bool = False  # controller-internal APIs (keys >= 1000)
    extra: Body = field(default_factory=dict)

    def check_request(self, body: Any, version: int) -> Body:
        checked: Body = self.request.check(body, version)
        return checked

    def check_response(self, body: Any, version: int) -> Body:
        """`body` checked against the response schema, defaults filled. The hottest answers
        (Produce, Fetch) first go through their hand-written check (fast_checks.py), which
        accepts a body only when the schema check would return it unchanged (any version):
        the broker checking what it sends and the client or follower what it receives."""
        fast = RESPONSE_FAST_CHECKS.get(self.key)
        if fast is not None:
            fast_checked = fast(body)  # (`body`, filled in place: what the schema check returns)
            if fast_checked is not None:
                return fast_checked
        checked: Body = self.response.check(body, version)
        return checked


API_SPECS: dict[int, ApiSpec] = {}


def register(spec: ApiSpec) -> ApiSpec:
    """Add an API to the one table; a key registered twice is a bug."""
    assert spec.key not in API_SPECS, f"api key {spec.key} registered twice"
    assert spec.min_version <= spec.max_version
    API_SPECS[spec.key] = spec
    return spec
