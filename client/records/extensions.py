"""Loading the optional C extensions of client.records (`_speedups`: records-section decoder and
encoder; `_crc`: CRC-32C on any buffer, and the broker's check of a run of batches; `_append`: the sync producer's per-record send path). Each is built by setup.py when a compiler is present;
without it, or with GREGOR_NO_EXTENSIONS set to anything but "" or "0" (read at import, as
aiokafka's AIOKAFKA_NO_EXTENSIONS), the pure-Python paths run."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def optional_extension(name: str) -> ModuleType | None:
    """The extension module `name` (e.g. "client.records._speedups"), or None when it is not
    built or extensions are disabled by the environment."""
    if os.environ.get("GREGOR_NO_EXTENSIONS", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
