"""The nemesis of the fault harness (CHECKER.md, "Faults"): each fault is a context manager that
applies the fault on entry and always reverts it on exit (`finally`), logging `nemesis`
start/stop entries in the history so the checker can measure failover and recovery.

    with nemesis.kill_broker(n):       # F1: SIGKILL; restarted on exit
        nemesis.hold(rng.uniform(2, 3))

Faults: kill_broker (F1), kill_controller (F2), pause_broker (F3), isolate (F4a/F4b, in a
network namespace), loss (F5), cut_clients (F4c), slow_fsync (F6, strace), write_eio (F7,
strace), torn_tail (F8), power_loss (F9, LazyFS), fill_disk (F10, a small ext4),
crash_producer (F11), terminate_broker (F12, SIGTERM: a controlled shutdown), cpu_load (F13,
busy loops beside the cluster; the only fault that may overlap another). One fault at a time; `heal_all()` reverts whatever is still applied.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from fault_cluster import Cluster
from fault_history import History
from fault_net import Endpoint, Net
from fault_producer import ProducerProcess


class Nemesis:
    def __init__(self, cluster: Cluster, history: History, net: Net | None = None) -> None:
        self.cluster = cluster
        self.history = history
        self.net = net
        self._reverts: list[tuple[str, object]] = []  # (fault, revert callable) still applied
        # what each power loss dropped: (bytes, of which unsynced segment writes)
        self.lost_bytes: list[tuple[int, int]] = []

    @staticmethod
    def hold(seconds: float) -> None:
        """Keep the fault on for `seconds` (from the seeded schedule)."""
        time.sleep(seconds)

    @contextlib.contextmanager
    def _fault(self, fault: str, revert, **detail) -> Iterator[None]:  # type: ignore[no-untyped-def]
        self.history.nemesis("start", fault, **detail)
        entry = (fault, revert)
        self._reverts.append(entry)
        try:
            yield
        finally:
            self._reverts.remove(entry)
            revert()
            self.history.nemesis("stop", fault, **detail)

    def heal_all(self) -> None:
        """Revert every fault still applied (a scenario that raised mid-fault)."""
        while self._reverts:
            fault, revert = self._reverts.pop()
            revert()  # type: ignore[operator]
            self.history.nemesis("stop", fault, healed=True)

    # -- processes -----------------------------------------------------------------------------
    def kill_broker(self, n: int) -> contextlib.AbstractContextManager[None]:
        b = self.cluster.brokers
        b.stop(n, signal.SIGKILL)
        return self._fault("kill_broker", lambda: b.start(n), node=n)

    def terminate_broker(self, n: int) -> contextlib.AbstractContextManager[None]:
        """F12: SIGTERM (a controlled shutdown: leaderships and ISR memberships move off it
        first); restarted on exit."""
        b = self.cluster.brokers
        b.stop(n, signal.SIGTERM)
        return self._fault("terminate_broker", lambda: b.start(n), node=n)

    @contextlib.contextmanager
    def cpu_load(self, processes: int) -> Iterator[None]:
        """F13: `processes` busy loops beside the cluster (each in a session of its own, killed
        on exit): the machine's run queue well past its cores, as on a loaded host."""
        procs = [
            subprocess.Popen(  # (bounded: killed on exit, and each ends itself after 10 min)
                [sys.executable, "-c", "import time\nend = time.time() + 600\n"
                 "while time.time() < end: pass"],
                start_new_session=True,
            )
            for _ in range(processes)
        ]  # fmt: skip

        def revert() -> None:
            for proc in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

        with self._fault("cpu_load", revert, processes=processes):
            yield

    def kill_controller(self, n: int) -> contextlib.AbstractContextManager[None]:
        q = self.cluster.quorum
        q.kill(n)
        return self._fault("kill_controller", lambda: q.start(n), node=n)

    def pause_broker(self, n: int) -> contextlib.AbstractContextManager[None]:
        b = self.cluster.brokers
        b.pause(n)
        return self._fault("pause_broker", lambda: b.resume(n), node=n)

    def crash_producer(self, producer: ProducerProcess) -> contextlib.AbstractContextManager[None]:
        """F11: SIGKILL a producer process mid-batch; started again (same name) on exit."""
        producer.kill()
        return self._fault("crash_producer", producer.start, run=producer.runs)

    # -- network (inside the harness's namespace) ----------------------------------------------
    def _net(self) -> Net:
        assert self.net is not None, "this scenario needs the network namespace"
        return self.net

    def isolate(
        self, a: Endpoint, others: Iterable[Endpoint]
    ) -> contextlib.AbstractContextManager[None]:
        others = list(others)
        self._net().cut(a, others)
        return self._fault("isolate", self._net().heal, node=a.name,
                           from_=[o.name for o in others])  # fmt: skip

    def cut_links(
        self, pairs: list[tuple[Endpoint, Endpoint]]
    ) -> contextlib.AbstractContextManager[None]:
        for a, b in pairs:
            self._net().cut(a, [b])
        return self._fault("cut_links", self._net().heal,
                           links=[[a.name, b.name] for a, b in pairs])  # fmt: skip

    def loss(self, a: Endpoint, probability: float) -> contextlib.AbstractContextManager[None]:
        self._net().loss(a, probability)
        return self._fault("loss", self._net().heal, node=a.name, probability=probability)

    def cut_clients(self) -> contextlib.AbstractContextManager[None]:
        self._net().cut_clients(self.cluster.endpoints())
        return self._fault("cut_clients", self._net().heal)

    # -- storage -------------------------------------------------------------------------------
    def _strace(
        self, fault: str, pid: int, args: list[str], **detail
    ) -> contextlib.AbstractContextManager[None]:  # type: ignore[no-untyped-def]
        """strace attached to every thread of `pid` (-f), injecting as `args` say; detached
        (SIGINT, strace's own clean detach) on revert."""
        out = open(self.cluster.workdir / f"strace-{fault}-{pid}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            ["strace", "-f", "-qq", "-p", str(pid), "-o", "/dev/null", *args],
            stdout=out,
            stderr=out,
            start_new_session=True,
        )

        def revert() -> None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            out.close()

        return self._fault(fault, revert, pid=pid, **detail)

    def slow_fsync(self, n: int, delay_ms: int) -> contextlib.AbstractContextManager[None]:
        """F6: every fsync/fdatasync of broker n waits `delay_ms` first."""
        us = str(delay_ms * 1000)
        return self._strace(
            "slow_fsync",
            self.cluster.brokers.procs[n].proc.pid,
            ["-e", "trace=fsync,fdatasync",
             "-e", f"inject=fsync:delay_enter={us}", "-e", f"inject=fdatasync:delay_enter={us}"],
            node=n, delay_ms=delay_ms,
        )  # fmt: skip

    def write_eio(self, n: int, path: Path) -> contextlib.AbstractContextManager[None]:
        """F7: writes to `path` (a segment of broker n) fail with EIO."""
        calls = "write,pwrite64,writev,pwritev,pwritev2"
        return self._strace(
            "write_eio",
            self.cluster.brokers.procs[n].proc.pid,
            ["-P", str(path), "-e", f"trace={calls}", "-e", f"inject={calls}:error=EIO"],
            node=n, path=str(path),
        )  # fmt: skip

    def torn_tail(self, n: int, cut: int) -> Path:
        """F8 on a stopped broker n: the active segment of `chaos-0` loses its last `cut` bytes
        (a tear inside its last batch), as a crash mid-write leaves it. Returns the segment."""
        assert n not in self.cluster.brokers.procs, "tear the tail of a stopped broker"
        seg = active_segment(self.cluster.brokers.data_dirs[n], "chaos", 0)
        size = seg.stat().st_size
        os.truncate(seg, max(0, size - cut))
        self.history.nemesis("start", "torn_tail", node=n, path=str(seg), cut=cut, size=size)
        self.history.nemesis("stop", "torn_tail", node=n)
        return seg

    def power_loss(
        self, fs: Any, torn_seed: int | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """F9 on every node at once: SIGKILL every controller and broker, then drop what the
        LazyFS mount `fs` (holding every node's data) has not seen fsynced; every node starts
        again on exit (controllers first). `torn_seed`: each file keeps a random prefix of its
        unsynced pages instead (a disk that wrote part of its cache back)."""
        c = self.cluster
        b, q = c.brokers, c.quorum
        brokers, controllers = sorted(b.procs), sorted(q.procs)
        for gp in [*b.procs.values(), *q.procs.values()]:  # all at once, then reap
            with contextlib.suppress(ProcessLookupError):
                os.killpg(gp.proc.pid, signal.SIGKILL)
        for n in brokers:
            b.procs.pop(n).proc.wait(30)
        for n in controllers:
            q.reap(n)
        report = fs.drop_unsynced(torn_seed=torn_seed)
        segments = sum(f["unsynced_writes"] for path, f in report.files.items()
                       if path.endswith(".log"))  # fmt: skip
        self.lost_bytes.append((report.bytes_lost, segments))

        def revert() -> None:
            for n in controllers:
                q.spawn(n)
            for n in controllers:
                q.procs[n].wait_ready(30)
            for n in brokers:
                b.start(n)

        return self._fault("power_loss", revert, bytes_lost=report.bytes_lost,
                           segment_bytes_unsynced=segments, files=sorted(report.files))  # fmt: skip

    def fill_disk(
        self, disk: Any, n: int, leave_bytes: int
    ) -> contextlib.AbstractContextManager[None]:
        """F10: broker n's log dir (on the small disk `disk`) fills up, leaving `leave_bytes`
        for it to run into ENOSPC; on exit the filler goes and broker n restarts (a log dir
        that went offline comes back only with a restart, as in Kafka)."""
        filler = disk.fill(leave_bytes=leave_bytes)

        def revert() -> None:
            filler.unlink()
            if n in self.cluster.brokers.procs:
                self.cluster.brokers.stop(n, signal.SIGKILL)
            self.cluster.brokers.start(n)

        return self._fault("fill_disk", revert, node=n, leave_bytes=leave_bytes)


def active_segment(log_dir: Path, topic: str, partition: int) -> Path:
    segs = sorted((log_dir / f"{topic}-{partition}").glob("*.log"))
    assert segs, f"no segment of {topic}-{partition} in {log_dir}"
    return segs[-1]


def missing_strace() -> str | None:
    if shutil.which("strace") is None:
        return "storage faults need `strace` (scripts/test.sh installs it from Debian)"
    if os.geteuid() != 0:
        return "strace fault injection needs root (ptrace of the broker)"
    return None
