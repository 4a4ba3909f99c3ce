"""A watchdog that ends what a test run started once the run itself is gone.

The harnesses start brokers and controllers in their own sessions (so a test can SIGKILL or
SIGSTOP a node's whole process group). Their teardown ends them, but only if the test process
lives to run it: a pytest that is itself killed leaves every node it started running, holding
ports, disk and CPU. So a run marks its environment with a token (`MARK`), which every process it
starts inherits (the harnesses drop only `GREGOR_*` variables), and starts this module as a
detached watchdog. When the run's pid is gone, the watchdog ends every process whose environment
carries the token, then exits. A run that ends normally is swept the same way, which ends what a
teardown missed.

    python tests/reaper.py PID TOKEN
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

MARK = "PYTEST_GREGOR_RUN"


def start(env: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """Mark `env` (the test process's own environment by default) with a new token and start
    the watchdog for this process. Returns the token."""
    token = f"{os.getpid()}-{time.time_ns()}"
    env[MARK] = token
    child_env = {k: v for k, v in os.environ.items() if k != MARK}
    subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), str(os.getpid()), token],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=child_env,
        start_new_session=True,
    )
    return token


def marked(token: str) -> list[int]:
    """Pids of the processes (other than this one) whose environment carries `token`."""
    needle = f"{MARK}={token}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if needle in environ or environ.endswith(needle[:-1]):
            found.append(int(entry.name))
    return found


def sweep(token: str, rounds: int = 3) -> int:
    """SIGKILL every marked process; repeated once they are gone, since a dying parent may
    still have been forking."""
    ended = 0
    for _ in range(rounds):
        fds = []
        for pid in marked(token):
            try:
                fds.append(os.pidfd_open(pid))
                os.kill(pid, signal.SIGKILL)
                ended += 1
            except ProcessLookupError:
                pass
        if not fds:
            break
        _wait_gone(fds, deadline=time.monotonic() + 5.0)
    return ended


def _wait_gone(fds: list[int], deadline: float) -> None:
    """Wait (until `deadline`) for the processes of pidfds `fds` to exit; close the fds."""
    pending = set(fds)
    while pending and (left := deadline - time.monotonic()) > 0:
        done, _, _ = select.select(list(pending), [], [], left)
        pending -= set(done)
    for fd in fds:
        os.close(fd)


def watch(pid: int, token: str) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        fd = None
    if fd is not None:
        select.select([fd], [], [])  # readable once the process has exited
        os.close(fd)
    sweep(token)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2])
