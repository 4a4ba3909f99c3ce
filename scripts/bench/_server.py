"""A `gregor server` subprocess for the benchmarks (not a benchmark itself).

start_server(data_dir, extra=(), overrides=None) -> Server(proc, bootstrap, port, ready_s)
    `gregor server --port 0 --data-dir DATA_DIR *extra`, in its own session; `overrides` are
    config keys set through the environment (GREGOR_NUM_IO_THREADS=...); returns once the
    server printed its ready line (SystemExit if it exits or is not ready within 30 s).
stop_server(proc): SIGTERM to its process group, SIGKILL after 15 s.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

READY = re.compile(r"listening on \[?(?P<host>[^\]\s]+?)\]?:(?P<port>\d+),")


class Server(NamedTuple):
    proc: subprocess.Popen
    bootstrap: str
    port: int
    ready_s: float


def gregor_command() -> list[str]:
    script = Path(sys.executable).with_name("gregor")
    return [str(script)] if script.exists() else [sys.executable, "-m", "broker.cli"]


def start_server(data_dir: str, extra: Sequence[str] = (), overrides: dict | None = None) -> Server:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    for key, value in (overrides or {}).items():
        env["GREGOR_" + key.upper().replace(".", "_")] = str(value)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [*gregor_command(), "server", "--port", "0", "--data-dir", data_dir, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    deadline = t0 + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"gregor server exited ({proc.wait()}) before it was ready")
        m = READY.search(line)
        if m:
            port = int(m["port"])
            return Server(proc, f"127.0.0.1:{port}", port, time.monotonic() - t0)
    stop_server(proc)
    raise SystemExit("gregor server not ready within 30 s")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    if proc.stdout is not None:
        proc.stdout.close()
