"""CRC-32C (Castagnoli) via crcmod, with a loud check that its C extension is loaded.

Backends (BACKEND says which): "google-crc32c" when that package is installed with its C
implementation (hardware CRC, the fastest on `bytes`, but it takes only `bytes`, so a slice of
a larger buffer would be copied first); with the optional extension client/records/_crc.c
(the CPU's crc32 instruction on any buffer, read in place) for everything that is not `bytes`
("google-crc32c+sse4.2"), or alone ("sse4.2"); else "crcmod", its table loop. The pure-Python
fallback of crcmod is about 100x slower; a broker on it would validate batches at a few MB/s.
`require_c_extension()` is called by scripts and at start-up.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import crcmod.crcmod
import crcmod.predefined

from client.records.extensions import optional_extension

_log = logging.getLogger(__name__)

crc32c = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
"""crc32c(data: bytes | memoryview, crc: int = 0) -> int"""
crcmod_crc32c = crc32c

# google-crc32c (optional) uses the CPU's CRC32 instruction: ~20 GB/s against crcmod's ~0.4 GB/s.
# Used when installed with its C implementation; same results (tests/unit/records/test_crc.py).
_google_crc32c: Any
try:
    import google_crc32c as _google_crc32c
except ImportError:
    _google_crc32c = None


_crc_ext = optional_extension("client.records._crc")
_hw_crc32c: Any = _crc_ext.crc32c if _crc_ext is not None and _crc_ext.HARDWARE else None

_google_c = _google_crc32c is not None and _google_crc32c.implementation == "c"

if _google_c:
    _extend: Callable[[int, bytes], int] = _google_crc32c.extend
    _hw: Callable[[bytes | bytearray | memoryview, int], int] | None = _hw_crc32c

    def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
        # extend() takes only bytes objects, where it is ~2x our SSE4.2 loop; anything else
        # (a batch sliced out of a request or a fetch answer) goes to our loop, which reads
        # it in place, or is copied to bytes when the extension is missing.
        if type(data) is bytes:
            return _extend(crc, data)
        if _hw is not None:
            return _hw(data, crc)
        return _extend(crc, bytes(data))

    BACKEND = "google-crc32c+sse4.2" if _hw_crc32c is not None else "google-crc32c"
elif _hw_crc32c is not None:
    # Our SSE4.2 loop (client/records/_crc.c): any buffer, read in place.
    crc32c = _hw_crc32c
    BACKEND = "sse4.2"
else:
    BACKEND = "crcmod"


def has_c_extension() -> bool:
    if BACKEND != "crcmod":
        return True
    # The package re-exports names over its submodule, so read the flag off sys.modules.
    return bool(getattr(sys.modules["crcmod.crcmod"], "_usingExtension", False))


def require_c_extension() -> None:
    """Exit loudly when crcmod runs without its C extension."""
    if not has_c_extension():
        raise SystemExit(
            "crcmod is running WITHOUT its C extension (pure Python, ~100x slower). "
            "Reinstall it with a C compiler and Python headers present: "
            "pip install --force-reinstall --no-binary crcmod crcmod"
        )


def warn_if_slow() -> None:
    if not has_c_extension():
        _log.warning(
            "crcmod C extension NOT loaded: CRC-32C runs in pure Python, ~100x slower. "
            "Reinstall crcmod with a C compiler present."
        )
