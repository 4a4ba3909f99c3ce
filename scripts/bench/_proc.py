"""A running process's counters from /proc (Linux), for the benchmarks."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid: int, voluntary_only: bool = False) -> int:
    """Context switches of process `pid` so far, all its threads (a voluntary one is a thread
    going to sleep: waiting for work, a lock, the GIL; so their count follows the process's
    hand-offs)."""
    prefix = "voluntary_ctxt_switches:" if voluntary_only else ""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if "ctxt_switches:" in line and line.startswith(prefix):
                    total += int(line.split()[1])
        except OSError:  # the thread ended meanwhile
            continue
    return total
