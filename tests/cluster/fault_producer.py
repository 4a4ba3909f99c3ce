"""A workload producer in a process of its own, for client crashes (CHECKER.md F11): SIGKILL it
mid-batch, start it again with the same name; it carries on from the next sequence numbers.

    p = ProducerProcess(bootstrap, "chaos", 3, "x1", workdir / "x1-history.jsonl")
    p.start(); ...; p.kill(); p.start(); ...; p.stop()
    history.merge(p.entries())

The process writes its own history file (line-buffered JSON lines, op ids from its own range,
appended across restarts); a write it invoked but never settled before the kill stays an open
invoke, which the checker treats as unknown. Run as a script it is the producer itself.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fault_history import History, read_history

OP_BASE = 1_000_000_000  # op ids of a producer process (restart r: OP_BASE * (r + 1))


class ProducerProcess:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        name: str,
        history_path: Path,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        """`security`: the producer's security settings (keyword arguments, JSON-able)."""
        self.args = ["--security", json.dumps(dict(security or {}))]
        self.args += [bootstrap, topic, str(partitions), name, str(history_path)]
        self.history_path = history_path
        self.partitions = partitions
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> None:
        assert self.proc is None
        nxt = self.next_seq()
        self.runs += 1
        log = open(self.history_path.with_suffix(f".run{self.runs}.stderr"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, __file__, *self.args, ",".join(map(str, nxt)), str(self.runs)],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()

    def acked(self) -> int:
        return sum(1 for e in self.entries() if e["type"] == "ok")

    def kill(self) -> None:
        """SIGKILL: a client crash, whatever it had in flight."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM: it stops writing, settles what it sent, and exits."""
        if self.proc is None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            self.proc = None

    def entries(self) -> list[dict[str, Any]]:
        if not self.history_path.exists():
            return []
        return list(read_history(self.history_path))

    def next_seq(self) -> list[int]:
        """Per partition, one past the highest sequence number any run invoked."""
        nxt = [0] * self.partitions
        for e in self.entries():
            if e["type"] == "invoke":
                seq = int(e["value"].rpartition("-")[2])
                nxt[e["partition"]] = max(nxt[e["partition"]], seq + 1)
        return nxt


def _main() -> None:
    ap = argparse.ArgumentParser()
    for a in ("bootstrap", "topic", "partitions", "name", "history", "next_seq", "run"):
        ap.add_argument(a)
    ap.add_argument("--security", default="{}")
    a = ap.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # (imported here: the module is also imported by the harness, which has its own path)
    from fault_workload import Workload

    history = History(a.history, op_base=OP_BASE * int(a.run), mode="a")
    w = Workload(
        a.bootstrap, a.topic, int(a.partitions), history, 0, security=json.loads(a.security)
    )
    w.produce_as(a.name, [int(x) for x in a.next_seq.split(",")], stop)
    history.close()
    if w.errors:
        raise SystemExit(f"producer failed: {w.errors!r}")


if __name__ == "__main__":
    _main()
