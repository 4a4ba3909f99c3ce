"""A running process's counters from /proc (Linux), for the benchmarks."""

from __future__ import annotations

import gc
import itertools
import os
import threading
import time
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


def busy_seconds(before: tuple[int, int], after: tuple[int, int]) -> float:
    """CPU seconds the whole machine was busy between two `machine_ticks()` readings, every
    CPU summed: what all processes and the kernel's own threads cost over a window (divided
    by the records sent in it, the machine's CPU a record, which a CPU-bound phase's rate is
    the machine's CPUs over)."""
    return ((after[0] - before[0]) - (after[1] - before[1])) / os.sysconf("SC_CLK_TCK")


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


class IowaitSampler:
    """Reads the machine's CPU ticks (/proc/stat) every `interval` seconds on a thread of its
    own while a benchmark runs, to tell when the whole machine sat waiting on its disk (a
    virtual disk whose flush stalls for a few hundred milliseconds stops every fsync of a
    cluster at once: the CPUs go idle with the fsyncs waiting, which the kernel counts as
    iowait). Passive: one read of /proc/stat per interval, no I/O of its own."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.samples: list[tuple[int, list[int]]] = []  # (time.time_ns(), ticks by kind)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="iowait-sampler", daemon=True)

    def start(self) -> IowaitSampler:
        self._thread.start()
        return self

    def stop(self) -> list[tuple[int, list[int]]]:
        self._stop.set()
        self._thread.join()
        return self.samples

    def _run(self) -> None:
        while True:
            self.samples.append((time.time_ns(), _cpu_ticks()))
            if self._stop.wait(self.interval):
                self.samples.append((time.time_ns(), _cpu_ticks()))
                return


def iowait_stalls(
    samples: list[tuple[int, list[int]]], min_ms: float = 50.0, share: float = 0.5
) -> dict:
    """The machine's iowait over `samples` (IowaitSampler's): its share of all CPU ticks, and
    its stalls: runs of consecutive sample windows in each of which at least `share` of the
    ticks were iowait, lasting `min_ms` or more (start as time.time_ns() and length in ms).
    /proc/stat counts in ticks of 10 ms, so a window of 50 ms on two CPUs holds ~10 ticks: a
    stall much shorter than a window does not fill half of one, and is not reported."""
    total = waited = 0
    stalls: list[dict] = []
    run_start: int | None = None
    run_end = 0

    def close() -> None:
        if run_start is not None and (run_end - run_start) / 1e6 >= min_ms:
            stalls.append({"at_ns": run_start, "ms": round((run_end - run_start) / 1e6, 1)})

    for (t0, a), (t1, b) in itertools.pairwise(samples):
        d_all = sum(b) - sum(a)
        d_wait = b[4] - a[4]
        total += d_all
        waited += d_wait
        if d_all > 0 and d_wait >= share * d_all:
            if run_start is None:
                run_start = t0
            run_end = t1
        else:
            close()
            run_start = None
    close()
    return {
        "iowait_share": round(waited / total, 4) if total > 0 else 0.0,
        "stalls": stalls,
        "longest_ms": max((s["ms"] for s in stalls), default=0.0),
    }


def thread_schedstat() -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) of the calling thread so far
    (/proc/thread-self/schedstat). The second is what a CPU-bound thread lost to the other
    threads of the machine: on 2 vCPUs shared with three brokers, a producer's send() loop
    waited for a CPU about as long as it ran."""
    with open("/proc/thread-self/schedstat") as f:
        ran, waited = f.read().split()[:2]
    return int(ran) / 1e9, int(waited) / 1e9


class GcTimer:
    """The cyclic GC's collections in this process while it is active: per generation, how
    many and the CPU seconds of the threads that ran them (gc.callbacks; the benchmark's own
    process only: a benchmark may register a callback, a library may not)."""

    def __init__(self) -> None:
        self.by_generation: dict[int, list[float]] = {}  # generation -> [collections, cpu_s]
        self._started: dict[int, float] = {}  # thread id -> thread_time at the start

    def _callback(self, phase: str, info: dict) -> None:
        tid = threading.get_ident()
        if phase == "start":
            self._started[tid] = time.thread_time()
            return
        t0 = self._started.pop(tid, None)
        if t0 is None:  # (registered during a collection)
            return
        st = self.by_generation.setdefault(info["generation"], [0, 0.0])
        st[0] += 1
        st[1] += time.thread_time() - t0

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def summary(self) -> dict[str, list[float]]:
        """{"gen0": [collections, cpu ms], ...} for the generations that ran."""
        return {
            f"gen{g}": [int(n), round(s * 1000, 1)]
            for g, (n, s) in sorted(self.by_generation.items())
        }
