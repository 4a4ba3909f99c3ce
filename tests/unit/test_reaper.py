"""tests/reaper.py: what a killed test run started is ended by its watchdog."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from helpers import wait_until

TESTS = Path(__file__).resolve().parents[1]

# A stand-in for a killed pytest: it starts the watchdog, then a "node" in its own session (as the
# cluster harnesses do), prints the node's pid and waits to be killed.
RUN = """
import os, signal, subprocess, sys
sys.path.insert(0, {tests!r})
import reaper
reaper.start()
node = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"],
                        start_new_session=True)
print(node.pid, flush=True)
signal.pause()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent, the killed run, is gone too).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_a_killed_run_leaves_no_node_behind() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_GREGOR_RUN"}
    run = subprocess.Popen(
        [sys.executable, "-c", RUN.format(tests=str(TESTS))],
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    assert run.stdout is not None
    node = int(run.stdout.readline())
    try:
        assert _alive(node), "the node should run while its run lives"
        os.kill(run.pid, signal.SIGKILL)
        run.wait(10)
        wait_until(lambda: not _alive(node), 30.0, "the watchdog to end the killed run's node")
    finally:
        if _alive(node):
            os.kill(node, signal.SIGKILL)


def test_a_sweep_ends_the_marked_processes_only() -> None:
    import reaper

    token = f"test-{os.getpid()}"
    base = {k: v for k, v in os.environ.items() if k != reaper.MARK}
    sleeper = [sys.executable, "-c", "import signal; signal.pause()"]
    mine = subprocess.Popen(sleeper, env={**base, reaper.MARK: token}, start_new_session=True)
    other = subprocess.Popen(sleeper, env=base, start_new_session=True)
    try:
        wait_until(lambda: mine.pid in reaper.marked(token), 10.0, "the marked process to show")
        assert other.pid not in reaper.marked(token)
        assert reaper.sweep(token) == 1
        mine.wait(10)
        assert mine.returncode == -signal.SIGKILL
        assert other.poll() is None
    finally:
        for p in (mine, other):
            if p.poll() is None:
                p.kill()
                p.wait(10)
