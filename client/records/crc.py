"""CRC-32C (Castagnoli) via crcmod, with a loud check that its C extension is loaded.

The pure-Python fallback of crcmod is about 100x slower; a broker on it would validate
batches at a few MB/s. `require_c_extension()` is called by scripts and at start-up.
"""

from __future__ import annotations

import logging
import sys

import crcmod.crcmod  # noqa: F401  (the implementation module, which records the flag)
import crcmod.predefined

_log = logging.getLogger(__name__)

crc32c = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
"""crc32c(data: bytes | memoryview, crc: int = 0) -> int"""


def has_c_extension() -> bool:
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
