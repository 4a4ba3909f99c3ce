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


def _cpu_ticks() -> list[int]:
    """The whole machine's CPU ticks so far by kind, every CPU summed (/proc/stat's first line:
    user, nice, system, idle, iowait, irq, softirq, steal, ...)."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def machine_ticks() -> tuple[int, int]:
    """(all, idle) CPU ticks of the whole machine so far (idle includes iowait): the busy share
    over a window is 1 - d(idle) / d(all), which counts what no process of a benchmark is
    charged for (kernel threads, softirqs)."""
    ticks = _cpu_ticks()
    return sum(ticks), ticks[3] + ticks[4]


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The machine's busy share of its CPUs between two `machine_ticks()` readings (0..1)."""
    total = after[0] - before[0]
    return round(1 - (after[1] - before[1]) / total, 3) if total > 0 else 0.0


def steal_ticks() -> tuple[int, int]:
    """(all, steal) CPU ticks of the whole machine so far (/proc/stat's first line): the time
    a virtual machine's host ran something else while a CPU of it wanted to run."""
    ticks = _cpu_ticks()
    return sum(ticks), ticks[7] if len(ticks) > 7 else 0


def steal_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the machine's CPU time its host took between two `steal_ticks()` (0..1)."""
    total = after[0] - before[0]
    return round((after[1] - before[1]) / total, 4) if total > 0 else 0.0


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or "" where there is none."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def libpython_shared(pid: int | str = "self") -> bool:
    """Whether process `pid` runs Python from a shared libpython (a `--enable-shared` build, as
    pyenv makes by default: the interpreter is position-independent code in a library) rather
    than from its executable (Debian's /usr/bin/python3.11, built with PGO and LTO)."""
    with open(f"/proc/{pid}/maps") as f:
        return any("/libpython" in line for line in f)
