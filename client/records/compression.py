"""Compression codecs for the records section of a batch.

The codec id lives in attributes bits 0-2 of the batch header (client/records/header.py):

    id  name   package (pip)   implementation
    0   none   -               the records section is stored as is
    1   gzip   - (stdlib)      gzip container (zlib wbits=31)
    3   lz4    lz4             LZ4 frame format (lz4.frame)
    4   zstd   zstandard       Zstandard frame (zstandard)

The records section is compressed as a whole. Codec packages are imported on first use, so a
broker without lz4 installed still starts; using a missing codec raises MissingCodecError naming
the codec and the pip package. Decompression output is capped at MAX_DECOMPRESSED_BYTES while
decompressing (every codec stops once past it, so a bomb costs at most the cap), and any
failure to decompress (garbage, truncation, a bomb) raises CorruptRecordError with the reason.

Pure functions; any thread may call.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from typing import Any

from client.errors import CorruptRecordError, MissingCodecError

NONE, GZIP, LZ4, ZSTD = 0, 1, 3, 4
CODEC_IDS: dict[str, int] = {"none": NONE, "gzip": GZIP, "lz4": LZ4, "zstd": ZSTD}
CODEC_NAMES: dict[int, str] = {v: k for k, v in CODEC_IDS.items()}
PIP_PACKAGES: dict[int, str] = {LZ4: "lz4", ZSTD: "zstandard"}
MAX_DECOMPRESSED_BYTES = 512 * 1024 * 1024
_ZSTD_CHUNK = 1 << 20

_modules: dict[int, Any] = {}


_BY_NAME: dict[str | None, int] = {None: NONE}  # the common spellings, one lookup
_BY_NAME.update(CODEC_IDS)


def codec_id(compression: str | int | None) -> int:
    """'none'/None/'gzip'/'lz4'/'zstd' (or a known id) → codec id; ValueError otherwise."""
    if type(compression) is str or compression is None:
        found = _BY_NAME.get(compression)
        if found is not None:
            return found  # (called once per batch built)
    if compression is None:
        return NONE
    if isinstance(compression, int) and not isinstance(compression, bool):
        if compression in CODEC_NAMES:
            return compression
    elif isinstance(compression, str) and compression.lower() in CODEC_IDS:
        return CODEC_IDS[compression.lower()]
    raise ValueError(f"unknown compression {compression!r}: expected one of none, gzip, lz4, zstd")


def _module(codec: int) -> Any:
    mod = _modules.get(codec)
    if mod is not None:
        return mod
    try:
        if codec == LZ4:
            import lz4.frame

            mod = lz4.frame
        elif codec == ZSTD:
            import zstandard

            mod = zstandard
        else:  # pragma: no cover - only called for LZ4/ZSTD
            raise AssertionError(f"codec {codec} has no package")
    except ImportError:
        raise MissingCodecError(
            f"compression codec {CODEC_NAMES[codec]!r} needs the Python package "
            f"{PIP_PACKAGES[codec]!r}: pip install {PIP_PACKAGES[codec]}"
        ) from None
    _modules[codec] = mod
    return mod


def is_available(compression: str | int | None) -> bool:
    """True when the codec can be used here (its package imports)."""
    codec = codec_id(compression)
    if codec in (NONE, GZIP):
        return True
    try:
        _module(codec)
    except MissingCodecError:
        return False
    return True


def compress(codec: int, data: bytes) -> bytes:
    """Compress `data` with codec id `codec` (NONE returns it unchanged)."""
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.compress(data, compresslevel=1, mtime=0)
    out: bytes
    if codec == LZ4:
        out = _module(LZ4).compress(data)
        return out
    if codec == ZSTD:
        out = _module(ZSTD).ZstdCompressor(level=3).compress(data)
        return out
    raise ValueError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes | memoryview:
    """Decompress a records section; CorruptRecordError for garbage or an unknown codec."""
    if codec == NONE:
        return data
    fn = _DECOMPRESSORS.get(codec)
    if fn is None:
        raise CorruptRecordError(f"unknown compression codec id {codec} in batch attributes")
    mod = _module(codec) if codec in PIP_PACKAGES else None
    try:
        out = fn(mod, data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # every codec has its own error types; all mean corrupt input
        raise CorruptRecordError(
            f"cannot decompress {CODEC_NAMES[codec]} records section: {type(exc).__name__}: {exc}"
        ) from exc
    return out


def _gunzip(_mod: Any, data: bytes | memoryview) -> bytes:
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(data, MAX_DECOMPRESSED_BYTES)
    if d.unconsumed_tail:
        raise CorruptRecordError(
            f"gzip records section inflates beyond {MAX_DECOMPRESSED_BYTES} bytes"
        )
    if not d.eof:
        raise CorruptRecordError("truncated gzip records section")
    if d.unused_data:
        raise CorruptRecordError(f"{len(d.unused_data)} bytes after the gzip stream")
    return out


def _unlz4(mod: Any, data: bytes | memoryview) -> bytes:
    d = mod.LZ4FrameDecompressor()
    out: bytes = d.decompress(bytes(data), max_length=MAX_DECOMPRESSED_BYTES)
    if not d.eof:
        if d.needs_input:
            raise CorruptRecordError("truncated lz4 records section")
        raise CorruptRecordError(
            f"lz4 records section inflates beyond {MAX_DECOMPRESSED_BYTES} bytes"
        )
    if d.unused_data:
        raise CorruptRecordError(f"{len(d.unused_data)} bytes after the lz4 frame")
    return out


def _unzstd(mod: Any, data: bytes | memoryview) -> bytes:
    # The frame header may declare the content size: refuse a bomb before inflating it. The
    # stream is then read in chunks and stops past the cap whatever the header said, so memory
    # follows the cap, not the input's claims (zstandard's one-shot and decompressobj APIs
    # inflate a whole frame first).
    declared = mod.get_frame_parameters(data).content_size
    if declared != mod.CONTENTSIZE_UNKNOWN and declared > MAX_DECOMPRESSED_BYTES:
        raise CorruptRecordError(
            f"zstd records section declares {declared} bytes, beyond {MAX_DECOMPRESSED_BYTES}"
        )
    reader = mod.ZstdDecompressor().stream_reader(data, read_across_frames=False)
    out = bytearray()
    while True:
        chunk = reader.read(min(_ZSTD_CHUNK, MAX_DECOMPRESSED_BYTES + 1 - len(out)))
        if not chunk:
            break
        out += chunk
        if len(out) > MAX_DECOMPRESSED_BYTES:
            raise CorruptRecordError(
                f"zstd records section inflates beyond {MAX_DECOMPRESSED_BYTES} bytes"
            )
    if declared != mod.CONTENTSIZE_UNKNOWN and len(out) != declared:
        raise CorruptRecordError(f"truncated zstd records section: {len(out)} of {declared} bytes")
    # (without a declared size a truncated frame leaves a truncated records section, which
    # the records decoder refuses)
    return bytes(out)


_DECOMPRESSORS: dict[int, Callable[[Any, bytes | memoryview], bytes]] = {
    GZIP: _gunzip,
    LZ4: _unlz4,
    ZSTD: _unzstd,
}
