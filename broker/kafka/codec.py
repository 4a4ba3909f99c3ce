"""Kafka's request and response frames, through kio's entities (generated from Kafka's own JSON
message definitions: flexible versions, tagged fields, compact types).

    request payload:  header (api_key int16, api_version int16, correlation_id int32,
                      client_id nullable string, tagged fields when the API version is
                      flexible) | body
    response frame:   length int32 | correlation_id int32 | tagged fields (flexible responses
                      other than ApiVersions: header v1) | body

`peek_header` reads the four fixed fields on the network thread (they are the same in every
header version); `decode_body` reads the whole header and the body on an I/O thread.
`build(entity_class, dict)` turns a plain dict (Kafka's field names, ints for error codes
and milliseconds) into kio's frozen dataclasses, so translations stay short and
version-agnostic: fields a version lacks are ignored, missing ones take the schema default.

Pure functions; any thread may call.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import types
import typing
import uuid
from collections.abc import Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, TypeVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import Reader
from kio.serial.writers import Writer
from kio.static.primitive import i32Timedelta, i64Timedelta
from kio.static.protocol import Entity, RequestPayload, ResponsePayload

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

E = TypeVar("E", bound=Entity)
D = TypeVar("D", bound="DataclassInstance")  # a kio entity, nested ones included

_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_INT32 = struct.Struct(">i")
API_VERSIONS_KEY = 18
ZERO_UUID = uuid.UUID(int=0)


class MalformedKafkaRequest(Exception):
    """The payload is not a Kafka request header."""


def peek_header(payload: bytes | bytearray | memoryview) -> tuple[int, int, int, str | None]:
    """(api_key, api_version, correlation_id, client_id) of a request payload."""
    if len(payload) < _FIXED.size:
        raise MalformedKafkaRequest(f"request of {len(payload)} bytes is shorter than a header")
    api_key, api_version, correlation_id, n = _FIXED.unpack_from(payload, 0)
    if n < 0:
        return api_key, api_version, correlation_id, None
    end = _FIXED.size + n
    if end > len(payload):
        raise MalformedKafkaRequest("client_id runs past the end of the request")
    try:
        return api_key, api_version, correlation_id, bytes(payload[_FIXED.size : end]).decode()
    except UnicodeDecodeError as exc:
        raise MalformedKafkaRequest(f"client_id is not UTF-8: {exc}") from exc


def decode_body(
    api_key: int, api_version: int, payload: bytes | bytearray | memoryview
) -> RequestPayload:
    """The kio request entity of a payload (header skipped). MalformedKafkaRequest when it does
    not parse; KeyError-free: the caller checked the version is served."""
    cls = load_request_schema(api_key, api_version)
    # kio reads only read-only buffers; a large frame arrives in the frame reader's own
    # bytearray (client/protocol/frame_reader.py), so it is viewed read-only, not copied
    view = memoryview(payload).toreadonly()
    try:
        header: type[Entity] = cls.__header_schema__
        _, header_size = _reader(header)(view, 0)
        body: RequestPayload
        body, _size = _reader(cls)(view, header_size)
    except Exception as exc:  # kio raises its own and struct's errors for garbage
        raise MalformedKafkaRequest(f"{type(exc).__name__}: {exc}") from exc
    # Bytes after the body are ignored, as Kafka's generated readers do: librdkafka 2.16's
    # all-topics Metadata v12 (AdminClient.list_topics) carries three of them
    return body


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: ResponsePayload
) -> bytes:
    """A whole response frame (length prefix included) for the kio entity `body`."""
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    buf.write(_INT32.pack(correlation_id))
    if type(body).__flexible__ and api_key != API_VERSIONS_KEY:
        buf.write(b"\0")  # response header v1: no tagged fields
    _writer(type(body))(buf, body)
    out = buf.getbuffer()
    _INT32.pack_into(out, 0, len(out) - 4)
    del out
    return buf.getvalue()


def response_class(api_key: int, api_version: int) -> type[ResponsePayload]:
    return load_response_schema(api_key, api_version)


@cache
def _reader(cls: type[E]) -> Reader[E]:
    return entity_reader(cls)


@cache
def _writer(cls: type[E]) -> Writer[E]:
    return entity_writer(cls)


# -- dict -> kio entity ------------------------------------------------------------------------
@cache
def _fields(cls: type[DataclassInstance]) -> list[tuple[str, object, str | None, bool]]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        out.append((f.name, hints[f.name], f.metadata.get("kafka_type"), has_default))
    return out


def _entity_of(tp: object) -> type[DataclassInstance] | None:
    for t in (tp, *typing.get_args(tp)):
        if isinstance(t, type) and dataclasses.is_dataclass(t):
            return t
    return None


def _convert(tp: object, kafka_type: str | None, value: object) -> object:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    # (a nullable array: `tuple[...] | None` is a types.UnionType, `Optional[...]` typing's)
    if origin is tuple or (origin in (typing.Union, types.UnionType) and _is_tuple(tp)):
        inner = _entity_of(_tuple_arg(tp))
        if not isinstance(value, Iterable):
            raise TypeError(f"{tp}: not a list: {value!r}")
        if inner is not None:
            return tuple(build(inner, _mapping(tp, v)) for v in value)
        return tuple(value)
    entity = _entity_of(tp)
    if entity is not None:
        return build(entity, _mapping(tp, value))
    if kafka_type == "error_code":
        return KioErrorCode(_int(value))
    if kafka_type == "timedelta_i32":
        return i32Timedelta.parse(datetime.timedelta(milliseconds=_int(value)))
    if kafka_type == "timedelta_i64":
        return i64Timedelta.parse(datetime.timedelta(milliseconds=_int(value)))
    if kafka_type == "datetime_i64":
        if isinstance(value, datetime.datetime):  # (a non-nullable field's -1: see apis_txn)
            return value
        if _int(value) < 0:
            return None
        return datetime.datetime.fromtimestamp(_int(value) / 1000, datetime.UTC)
    if kafka_type == "uuid" and not isinstance(value, uuid.UUID):
        if not value:
            return ZERO_UUID
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(f"uuid field: not bytes: {value!r}")
        return uuid.UUID(bytes=bytes(value))
    return value


def _int(value: object) -> int:
    if isinstance(value, int | float | str):
        return int(value)
    raise TypeError(f"not an integer: {value!r}")


def _mapping(tp: object, value: object) -> Mapping[str, object]:
    if isinstance(value, Mapping):
        return value
    raise TypeError(f"{tp}: not a mapping of fields: {value!r}")


def _is_tuple(tp: object) -> bool:
    return any(typing.get_origin(a) is tuple for a in typing.get_args(tp))


def _tuple_arg(tp: object) -> object:
    if typing.get_origin(tp) is tuple:
        return typing.get_args(tp)[0]
    for a in typing.get_args(tp):
        if typing.get_origin(a) is tuple:
            return typing.get_args(a)[0]
    raise TypeError(f"no tuple in {tp}")


def build(cls: type[D], data: Mapping[str, object]) -> D:
    """The kio entity `cls` from `data` (Kafka's field names). Keys the entity lacks are
    ignored; a field without a value takes its default, or is empty when it is a list or a
    nested entity; any other missing field is a bug here (TypeError)."""
    kwargs: dict[str, object] = {}
    for name, tp, kafka_type, has_default in _fields(cls):
        if name in data:
            kwargs[name] = _convert(tp, kafka_type, data[name])
        elif not has_default:
            if typing.get_origin(tp) is tuple or _is_tuple(tp):
                kwargs[name] = ()  # a list nobody filled: empty
                continue
            entity = _entity_of(tp)
            if entity is None:
                raise TypeError(f"{cls.__qualname__}.{name}: no value and no default")
            kwargs[name] = build(entity, {})
    return cls(**kwargs)


def millis(value: object) -> int:
    """A kio duration or datetime field back to integer milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    return _int(value)
