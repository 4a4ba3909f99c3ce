"""Partition log storage: segments, indexes, leader-epoch cache, recovery, group commit.

Synchronous file code, called from I/O worker threads and the flushers, never from an event
loop. Public API: Log, LogConfig, AppendInfo, ReadResult, TimestampOffset, LogManager, Flusher.
See docs/storage.md for the on-disk layout and durability semantics.
"""

from .config import LogConfig
from .log import AppendInfo, Log, ReadResult, TimestampOffset, UnexpectedAppendOffsetError

__all__ = [
    "AppendInfo",
    "Log",
    "LogConfig",
    "ReadResult",
    "TimestampOffset",
    "UnexpectedAppendOffsetError",
]
