"""The fault harness's history (CHECKER.md, principle 1): every client operation as JSON lines,
`invoke` then `ok`, `fail` or `info`, with a monotonic time and a process id.

    {"type": "invoke", "op": 7, "process": "p1", "f": "send", "partition": 0, "value": "p1-12",
     "time": 12.345}
    {"type": "ok", "op": 7, "process": "p1", "f": "send", "partition": 0, "value": "p1-12",
     "offset": 40, "time": 12.351}
    {"type": "ok", "op": 9, "process": "r1", "f": "poll", "partition": 0, "value": "p1-12",
     "offset": 40, "time": 12.4}

`f` is "send" (a producer's write), "poll" (the assign-mode reader's read, recorded as a
completed op per record), "gpoll" (a group member's read), "commit" (a member's offset commit,
invoke then ok/fail/info), "txn" (a transaction of fault_txn.py, its records in "values"),
"tpoll" (a read_committed reader's read of them) or, with type "event", a member's "assign" / "revoke" / "lost"; the
nemesis logs `{"type": "nemesis", "f": "start" | "stop", "fault": ...}`; the ISR monitor logs
`{"type": "isr", "partitions": {"0": [leader, [isr...]], ...}}` samples. An
error that guarantees the write was not applied is `fail`; a timeout, a lost connection or
NOT_ENOUGH_REPLICAS_AFTER_APPEND is `info` (unknown). Values are unique: `{producer}-{seq}`,
each producer's `seq` increasing per partition. Thread-safe.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any, TextIO


class History:
    def __init__(self, path: Path | str | None = None, op_base: int = 0, mode: str = "w") -> None:
        """`op_base`: where this history's op ids start (a second process's history merged
        into this one takes its own range); `mode` "a" appends to an earlier run's file."""
        self._lock = threading.Lock()
        self._ops = itertools.count(op_base)
        if path is not None and mode == "a":
            _drop_torn_tail(Path(path))
        self._file: TextIO | None = (
            open(path, mode, buffering=1) if path is not None else None  # noqa: SIM115
        )  # line-buffered: a SIGKILLed writer loses at most its last line
        self.entries: list[dict[str, Any]] = []
        self._pending: dict[int, dict[str, Any]] = {}

    def _add(self, entry: dict[str, Any]) -> None:
        entry["time"] = time.monotonic()
        with self._lock:
            self.entries.append(entry)
            if self._file is not None:
                self._file.write(json.dumps(entry) + "\n")

    def invoke(self, process: str, f: str, partition: int, value: str) -> int:
        op = next(self._ops)
        entry = {"type": "invoke", "op": op, "process": process, "f": f}
        entry.update(partition=partition, value=value)
        with self._lock:
            self._pending[op] = entry
        self._add(dict(entry))
        return op

    def _complete(self, op: int, kind: str, **extra: Any) -> None:
        with self._lock:
            inv = self._pending.pop(op)
        self._add({**inv, "type": kind, **extra})

    def ok(self, op: int, offset: int) -> None:
        self._complete(op, "ok", offset=offset)

    def fail(self, op: int, error: str) -> None:
        self._complete(op, "fail", error=error)

    def info(self, op: int, error: str) -> None:
        self._complete(op, "info", error=error)

    def polled(self, process: str, partition: int, offset: int, value: str) -> None:
        """A reader returned `value` at `offset` (one completed poll op per record)."""
        op = next(self._ops)
        self._add(
            {
                "type": "ok",
                "op": op,
                "process": process,
                "f": "poll",
                "partition": partition,
                "value": value,
                "offset": offset,
            }
        )

    def polled_in_group(self, process: str, partition: int, offset: int, value: str) -> None:
        """A group member returned `value` at `offset` (f "gpoll")."""
        self._add({"type": "ok", "op": next(self._ops), "process": process, "f": "gpoll",
                   "partition": partition, "value": value, "offset": offset})  # fmt: skip

    def commit(self, process: str, partition: int, offset: int) -> int:
        """A group member commits `offset` (the next offset to read) for `partition`; complete
        it with ok(op, offset), fail (refused: not stored) or info."""
        op = next(self._ops)
        entry = {"type": "invoke", "op": op, "process": process, "f": "commit",
                 "partition": partition, "offset": offset}  # fmt: skip
        with self._lock:
            self._pending[op] = entry
        self._add(dict(entry))
        return op

    def txn(self, process: str, txn: str, values: dict[int, list[str]], commit: bool) -> int:
        """A transaction invoked (f "txn", fault_txn.py): its records by partition and whether
        it is meant to commit; complete it with txn_done."""
        op = next(self._ops)
        entry = {"type": "invoke", "op": op, "process": process, "f": "txn", "txn": txn,
                 "commit": commit, "values": {str(p): vs for p, vs in values.items()}}  # fmt: skip
        with self._lock:
            self._pending[op] = entry
        self._add(dict(entry))
        return op

    def txn_done(self, op: int, kind: str, error: str | None = None) -> None:
        """`kind`: "ok" committed, "fail" aborted, "info" unknown."""
        self._complete(op, kind, error=error)

    def tpolled(self, process: str, partition: int, offset: int, value: str) -> None:
        """A read_committed reader returned a transactional record (f "tpoll")."""
        self._add({"type": "ok", "op": next(self._ops), "process": process, "f": "tpoll",
                   "partition": partition, "value": value, "offset": offset})  # fmt: skip

    def group_event(self, process: str, event: str, partitions: list[int]) -> None:
        """A member's assignment changed: `event` "assign", "revoke" or "lost" (type "event")."""
        self._add({"type": "event", "op": next(self._ops), "process": process, "f": event,
                   "partitions": sorted(partitions)})  # fmt: skip

    def nemesis(self, f: str, fault: str, **detail: Any) -> None:
        """A fault starting (`f` "start") or reverted ("stop"); the checker's figures measure
        failover and recovery from these."""
        self._add({"type": "nemesis", "f": f, "fault": fault, **detail})

    def isr(self, partitions: dict[int, tuple[int, list[int]]]) -> None:
        """A sample of every partition's (leader, ISR) as the cluster's metadata showed it
        (type "isr"; the stall check reads them)."""
        self._add({"type": "isr", "op": next(self._ops), "f": "isr",
                   "partitions": {str(p): [leader, isr] for p, (leader, isr) in partitions.items()}})  # fmt: skip

    def merge(self, entries: list[dict[str, Any]]) -> None:
        """Add another process's entries (their times are of the same monotonic clock)."""
        with self._lock:
            self.entries.extend(entries)
            if self._file is not None:
                for e in entries:
                    self._file.write(json.dumps(e) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_history(path: Path | str) -> list[dict[str, Any]]:
    """The entries of a history file. A last line with no newline is left out: its writer is
    still writing it (a reader running beside a live producer process can see half a line) or
    was killed in the middle of it. An invoke is written before its request is sent, so a torn
    invoke was never sent; a torn completion leaves its op unknown, as if the writer had died
    before recording it."""
    with open(path) as f:
        text = f.read()
    lines = text.split("\n")[:-1]  # the piece after the last newline is unfinished (or "")
    return [json.loads(line) for line in lines if line.strip()]


def _drop_torn_tail(path: Path) -> None:
    """Before appending to a killed writer's file, cut its unfinished last line, so the new
    writer's first entry does not join it."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)
