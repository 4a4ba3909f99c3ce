"""Framing: every message is a 4-byte big-endian unsigned length, then the payload.

    +----------------+---------------------------+
    | length: uint32 | payload: `length` bytes   |
    +----------------+---------------------------+

Request payload:  msgpack array [api_key, api_version, correlation_id, client_id, body]
Response payload: msgpack array [correlation_id, body]
Bodies are msgpack maps with snake_case keys; record batches travel as msgpack bin.

`FrameDecoder` never allocates what a length prefix claims before checking it against the
configured maximum (docs/architecture.md §3): an oversized prefix raises FrameTooLargeError.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import msgpack

from client.errors import InvalidRequestError
from client.protocol.body import Body
from client.protocol.views import unpack_produce_views

LENGTH = struct.Struct(">I")
LENGTH_SIZE = 4
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


class FrameTooLargeError(InvalidRequestError):
    """A length prefix above the configured maximum; the connection must be closed."""


class MalformedFrameError(InvalidRequestError):
    """A payload that is not a well-formed request or response; the connection must be closed."""


def frame(payload: bytes) -> bytes:
    return LENGTH.pack(len(payload)) + payload


class FrameDecoder:
    """Splits a byte stream into payloads. Feed bytes as they arrive; iterate whole frames.

    Owned by one connection; not thread-safe.
    """

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes

    def feed(self, data: bytes) -> list[bytes]:
        """Add `data`; return every whole payload now available (possibly none)."""
        buf = self._buf
        buf += data
        out: list[bytes] = []
        pos = 0
        n = len(buf)
        with memoryview(buf) as view:  # one copy per payload (a bytearray slice is another)
            while n - pos >= LENGTH_SIZE:
                (size,) = LENGTH.unpack_from(buf, pos)
                if size > self._max:
                    raise FrameTooLargeError(
                        f"frame of {size} bytes exceeds socket.request.max.bytes={self._max}"
                    )
                end = pos + LENGTH_SIZE + size
                if end > n:
                    break
                out.append(view[pos + LENGTH_SIZE : end].tobytes())
                pos = end
        if pos:
            del buf[:pos]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Body
) -> bytes:
    """A whole request frame (length prefix included)."""
    payload: bytes = msgpack.packb(
        [api_key, api_version, correlation_id, client_id, body], use_bin_type=True
    )
    return LENGTH.pack(len(payload)) + payload


class BinParts(tuple[bytes | bytearray | memoryview, ...]):
    """Buffers that go on the wire as ONE msgpack bin (their concatenation), e.g. a partition's
    record batches in a Produce request. Only encode_request_parts knows it; the buffers are
    referenced by the frame's parts, never joined."""

    __slots__ = ()


VECTORED_MIN_BYTES = 1 << 16  # bins at least this large are passed through, not copied
ZERO_COPY_MIN_BYTES = 1 << 20  # request payloads from this size get their records as views

_BIN16_MAX = 0xFFFF


def encode_request_parts(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Body,
    min_bytes: int = VECTORED_MIN_BYTES,
) -> list[bytes | bytearray | memoryview]:
    """The frame of encode_request as a list of buffers (for `transport.writelines`) whose
    concatenation is byte for byte what encode_request returns, with BinParts written as one
    bin. Bytes-like values of at least `min_bytes` bytes, and the buffers of a BinParts, are
    referenced, not copied: a 7 MB Produce request costs no 7 MB copies in the client (the
    join of its batches, packb, the length prefix; see docs/client.md). For small requests
    encode_request is faster (one packb call)."""
    packer = msgpack.Packer(use_bin_type=True, autoreset=False)
    parts: list[bytes | bytearray | memoryview] = []

    def value(v: object) -> None:
        t = type(v)
        if t is dict:
            packer.pack_map_header(len(v))  # type: ignore[arg-type]
            for k, x in v.items():  # type: ignore[attr-defined]
                packer.pack(k)
                value(x)
        elif t is list:
            packer.pack_array_header(len(v))  # type: ignore[arg-type]
            for x in v:  # type: ignore[attr-defined]
                value(x)
        elif t is BinParts:
            bufs = [memoryview(b).cast("B") for b in v]  # type: ignore[attr-defined]
            bin_parts(bufs, sum(b.nbytes for b in bufs))
        elif t in (bytes, bytearray, memoryview) and memoryview(v).nbytes >= min_bytes:  # type: ignore[arg-type]
            bin_parts([v], memoryview(v).nbytes)  # type: ignore[list-item,arg-type]
        else:
            packer.pack(v)

    def bin_parts(bufs: Sequence[bytes | bytearray | memoryview], n: int) -> None:
        if n <= 0xFF:
            head = bytes((0xC4, n))
        elif n <= _BIN16_MAX:
            head = b"\xc5" + n.to_bytes(2, "big")
        else:
            head = b"\xc6" + LENGTH.pack(n)
        parts.append(packer.bytes() + head)
        packer.reset()
        parts.extend(b for b in bufs if len(b))

    packer.pack_array_header(5)
    for x in (api_key, api_version, correlation_id, client_id):
        packer.pack(x)
    value(body)
    tail = packer.bytes()
    if tail:
        parts.append(tail)
    size = sum(memoryview(p).nbytes for p in parts)
    parts[0] = LENGTH.pack(size) + parts[0]
    return parts


def encode_response(correlation_id: int, body: Body) -> bytes:
    """A whole response frame (length prefix included)."""
    payload: bytes = msgpack.packb([correlation_id, body], use_bin_type=True)
    return LENGTH.pack(len(payload)) + payload


def _unpack(payload: bytes | bytearray) -> object:
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False, use_list=True)
    except Exception as exc:  # msgpack raises several types for garbage; all mean one thing
        raise MalformedFrameError(f"payload is not valid msgpack: {exc}") from None


def decode_request(payload: bytes | bytearray) -> tuple[int, int, int, str | None, Body]:
    """Split a request payload into (api_key, api_version, correlation_id, client_id, body).

    Raises MalformedFrameError when the payload is not a request-shaped msgpack array.
    A large Produce payload in a `bytearray` (what FrameReader returns for large frames) has
    its records bins returned as writable memoryviews of it, not copies
    (client/protocol/views.py); everything else is decoded by msgpack.
    """
    obj: object = None
    if type(payload) is bytearray and len(payload) >= ZERO_COPY_MIN_BYTES:
        obj = unpack_produce_views(payload)
    if obj is None:
        obj = _unpack(payload)
    if not isinstance(obj, list) or len(obj) != 5:
        raise MalformedFrameError("request payload must be a 5-element msgpack array")
    api_key, api_version, correlation_id, client_id, body = obj
    if not (type(api_key) is int and type(api_version) is int and type(correlation_id) is int):
        raise MalformedFrameError("api_key, api_version and correlation_id must be integers")
    if client_id is not None and not isinstance(client_id, str):
        raise MalformedFrameError("client_id must be a string or nil")
    if not isinstance(body, dict):
        raise MalformedFrameError("request body must be a msgpack map")
    return api_key, api_version, correlation_id, client_id, body


def decode_response(payload: bytes | bytearray) -> tuple[int, Body]:
    obj = _unpack(payload)
    if not isinstance(obj, list) or len(obj) != 2 or type(obj[0]) is not int:
        raise MalformedFrameError("response payload must be a [correlation_id, body] array")
    if not isinstance(obj[1], dict):
        raise MalformedFrameError("response body must be a msgpack map")
    return obj[0], obj[1]
