"""Zero-copy decoding of large Produce request payloads.

`msgpack.unpackb` copies every bin into a new `bytes`. For a Produce request of several MB
(1 KiB records: ~7 MB per request) that is one full copy of the records on the broker's network
thread, and the log then copies them once more to rewrite offsets in place (docs/architecture.md §4).
`unpack_produce_views(payload)` reads the same msgpack, but returns each bin of at least
`min_bin` bytes as a writable `memoryview` slice of `payload` (a `bytearray`: what
client/protocol/frame_reader.py hands out for large frames), so the records reach
`Log.append_as_leader` without either copy.

It is deliberately narrow, and msgpack stays the authority: it returns None, and the caller
decodes with msgpack (getting msgpack's result or its error), for any payload that is not a
Produce request (api_key 0), that starts with SMALL_BINS_FIRST small bins (nothing to gain),
that uses a type outside nil/bool/int/float/str/bin/array/map,
a map key that is not a str or int, invalid UTF-8, nesting deeper than MAX_DEPTH, a length
past the end, or trailing bytes. For everything else the result equals msgpack's
(raw=False, strict_map_key=False, use_list=True), with the large bins as views; a test checks
that on hypothesis-generated payloads.
"""

from __future__ import annotations

import struct
from typing import Any

MAX_DEPTH = 32
MIN_BIN = 1 << 16
# Small bins read before the first large one after which the reader gives the payload to
# msgpack: a large request of many small batches (one producer spreading records over
# thousands of partitions sends ~1 MB of 200-byte batches) gains nothing from views, and
# parsing it here took ~10x msgpack's time (2.0 ms vs 0.19 ms for 1,000 partitions).
SMALL_BINS_FIRST = 64

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
# Fixed-width scalars by first byte: (struct, size)
_SCALARS = {
    0xCA: _F32, 0xCB: _F64, 0xCC: struct.Struct(">B"), 0xCD: _U16, 0xCE: _U32, 0xCF: _U64,
    0xD0: _I8, 0xD1: _I16, 0xD2: _I32, 0xD3: _I64,
}  # fmt: skip


class _Unsupported(Exception):
    """Outside the subset, or malformed: let msgpack decide."""


def unpack_produce_views(payload: bytearray, min_bin: int = MIN_BIN) -> list[Any] | None:
    """The request array of a Produce payload with bins of >= min_bin bytes as memoryviews of
    `payload`; None when it is anything else (the caller then uses msgpack)."""
    if len(payload) < 2 or payload[0] != 0x95 or payload[1] != 0x00:  # [0, ...: Produce
        return None
    view = memoryview(payload)
    reader = _Reader(payload, view, min_bin)
    try:
        obj: list[Any] = reader.read(0)
    except (_Unsupported, IndexError, struct.error, UnicodeDecodeError):
        return None
    if reader.pos != len(payload):
        return None  # trailing bytes: msgpack's ExtraData
    return obj


class _Reader:
    __slots__ = ("buf", "view", "min_bin", "pos", "small", "large")

    def __init__(self, buf: bytearray, view: memoryview, min_bin: int) -> None:
        self.buf = buf
        self.view = view
        self.min_bin = min_bin
        self.pos = 0
        self.small = 0  # bins under min_bin read so far (copied)
        self.large = False  # whether a bin of min_bin or more was read (a view)

    def _take(self, n: int) -> int:
        start = self.pos
        end = start + n
        if end > len(self.buf):
            raise _Unsupported("truncated")
        self.pos = end
        return start

    def _len(self, s: struct.Struct) -> int:
        start = self._take(s.size)
        n: int = s.unpack_from(self.buf, start)[0]
        return n

    def read(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _Unsupported("too deep")
        b = self.buf[self._take(1)]
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if 0xA0 <= b <= 0xBF:
            return self._str(b & 0x1F)
        if 0x90 <= b <= 0x9F:
            return self._array(b & 0x0F, depth)
        if 0x80 <= b <= 0x8F:
            return self._map(b & 0x0F, depth)
        if b == 0xC0:
            return None
        if b == 0xC2:
            return False
        if b == 0xC3:
            return True
        s = _SCALARS.get(b)
        if s is not None:
            return s.unpack_from(self.buf, self._take(s.size))[0]
        if b == 0xC4:
            return self._bin(self.buf[self._take(1)])
        if b == 0xC5:
            return self._bin(self._len(_U16))
        if b == 0xC6:
            return self._bin(self._len(_U32))
        if b == 0xD9:
            return self._str(self.buf[self._take(1)])
        if b == 0xDA:
            return self._str(self._len(_U16))
        if b == 0xDB:
            return self._str(self._len(_U32))
        if b == 0xDC:
            return self._array(self._len(_U16), depth)
        if b == 0xDD:
            return self._array(self._len(_U32), depth)
        if b == 0xDE:
            return self._map(self._len(_U16), depth)
        if b == 0xDF:
            return self._map(self._len(_U32), depth)
        raise _Unsupported(f"type byte {b:#x}")  # ext types, 0xC1

    def _bin(self, n: int) -> bytes | memoryview:
        start = self._take(n)
        if n >= self.min_bin:
            self.large = True
            return self.view[start : start + n]
        self.small += 1
        if self.small >= SMALL_BINS_FIRST and not self.large:
            raise _Unsupported("many small bins: msgpack is faster")
        return bytes(self.view[start : start + n])

    def _str(self, n: int) -> str:
        start = self._take(n)
        return str(self.view[start : start + n], "utf-8")

    def _array(self, n: int, depth: int) -> list[Any]:
        if n > len(self.buf) - self.pos:  # each item takes >= 1 byte
            raise _Unsupported("array longer than the payload")
        return [self.read(depth + 1) for _ in range(n)]

    def _map(self, n: int, depth: int) -> dict[str | int, Any]:
        if 2 * n > len(self.buf) - self.pos:
            raise _Unsupported("map longer than the payload")
        out: dict[str | int, Any] = {}
        for _ in range(n):
            k = self.read(depth + 1)
            if type(k) is not str and type(k) is not int:
                raise _Unsupported("map key type")
            out[k] = self.read(depth + 1)
        return out
