"""Partition log storage: segments, indexes, leader-epoch cache, recovery, group commit.

Synchronous file code, called from I/O worker threads and the flushers, never from an event
loop. Public API: Log, LogConfig, AppendInfo, ReadResult, TimestampOffset, LogManager, Flusher.
See docs/storage.md for the on-disk layout and durability semantics.
"""

from .batches import AppendInfo, ReadResult, TimestampOffset, UnexpectedAppendOffsetError
from .config import LogConfig
from .flusher import Flusher
from .log import Log
from .manager import LogManager

__all__ = [
    "AppendInfo",
    "Flusher",
    "Log",
    "LogConfig",
    "LogManager",
    "ReadResult",
    "TimestampOffset",
    "UnexpectedAppendOffsetError",
]
