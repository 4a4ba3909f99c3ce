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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from client.errors import InvalidRequestError

_REQUIRED = object()


class Type:
    name = "?"

    def check(self, value: Any, version: int, path: str) -> Any:
        raise NotImplementedError

    def doc(self) -> str:
        return self.name

    def example(self) -> Any:  # a valid value, used by docs and fuzz tests
        raise NotImplementedError


class _Primitive(Type):
    def __init__(self, name: str, pytypes: tuple[type, ...], lo: int | None = None,
                 hi: int | None = None, example: Any = None) -> None:
        self.name = name
        self._pytypes = pytypes
        self._lo = lo
        self._hi = hi
        self._example = example

    def check(self, value: Any, version: int, path: str) -> Any:
        if type(value) not in self._pytypes:
            if not (self._pytypes == (float,) and type(value) is int):
                raise InvalidRequestError(
                    f"{path or 'body'}: expected {self.name}, got {type(value).__name__}"
                )
        if self._lo is not None and not (self._lo <= value <= self._hi):  # type: ignore[operator]
            raise InvalidRequestError(f"{path}: {value} out of range for {self.name}")
        return value

    def example(self) -> Any:
        return self._example


INT8 = _Primitive("int8", (int,), -(2**7), 2**7 - 1, 0)
INT16 = _Primitive("int16", (int,), -(2**15), 2**15 - 1, 0)
INT32 = _Primitive("int32", (int,), -(2**31), 2**31 - 1, 0)
INT64 = _Primitive("int64", (int,), -(2**63), 2**63 - 1, 0)
FLOAT64 = _Primitive("float64", (float,), example=0.0)
BOOL = _Primitive("bool", (bool,), example=False)
STRING = _Primitive("string", (str,), example="x")
BYTES = _Primitive("bytes", (bytes,), example=b"")


class Nullable(Type):
    def __init__(self, inner: Type) -> None:
        self.inner = inner
        self.name = f"{inner.name}?"

    def check(self, value: Any, version: int, path: str) -> Any:
        return None if value is None else self.inner.check(value, version, path)

    def doc(self) -> str:
        return f"{self.inner.doc()} | nil"

    def example(self) -> Any:
        return None


class Array(Type):
    def __init__(self, of: Type, max_items: int | None = None) -> None:
        self.of = of
        self.max_items = max_items
        self.name = f"[{of.name}]"

    def check(self, value: Any, version: int, path: str) -> Any:
        if type(value) is not list:
            raise InvalidRequestError(f"{path}: expected array, got {type(value).__name__}")
        if self.max_items is not None and len(value) > self.max_items:
            raise InvalidRequestError(f"{path}: {len(value)} items exceed {self.max_items}")
        of = self.of
        if isinstance(of, _Primitive):
            for i, item in enumerate(value):
                of.check(item, version, f"{path}[{i}]")
            return value
        return [of.check(item, version, f"{path}[{i}]") for i, item in enumerate(value)]

    def doc(self) -> str:
        return f"array of {self.of.doc()}"

    def example(self) -> Any:
        return [self.of.example()]


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

    def check(self, value: Any, version: int, path: str = "") -> dict:
        if type(value) is not dict:
            raise InvalidRequestError(f"{path or 'body'}: expected map, got {type(value).__name__}")
        out = {}
        for f in self.fields:
            if f.since > version:
                continue
            sub = f"{path}.{f.name}" if path else f.name
            if f.name in value:
                out[f.name] = f.type.check(value[f.name], version, sub)
            elif f.required:
                raise InvalidRequestError(f"{sub}: required field missing")
            else:
                d = f.default
                out[f.name] = d() if callable(d) else d
        return out

    def doc(self) -> str:
        return self.name

    def example(self) -> Any:
        return {f.name: f.type.example() for f in self.fields}


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
    extra: dict = field(default_factory=dict)

    def check_request(self, body: Any, version: int) -> dict:
        return self.request.check(body, version, "")

    def check_response(self, body: Any, version: int) -> dict:
        return self.response.check(body, version, "")


API_SPECS: dict[int, ApiSpec] = {}


def register(spec: ApiSpec) -> ApiSpec:
    """Add an API to the one table; a key registered twice is a bug."""
    assert spec.key not in API_SPECS, f"api key {spec.key} registered twice"
    assert spec.min_version <= spec.max_version
    API_SPECS[spec.key] = spec
    return spec
