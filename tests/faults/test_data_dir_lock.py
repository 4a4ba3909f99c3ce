"""One process per data directory (issue 10, item 2).

A second `gregor server` on a data directory in use used to start, and its clean-shutdown
marker then made the first server's crash look clean (torn-tail recovery skipped). Now every
log dir and the metadata dir is locked (`.lock`, flock) at start-up; a second process exits 2
naming the directory and the pid that holds it. The kernel drops the lock with the process, so
a SIGKILLed server restarts on its directory and recovers as after a crash.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from helpers import gregor_command, poll_n

from client import Consumer, Producer, TopicPartition
from client.fsutil import DirectoryInUseError, DirectoryLock


def _run(args: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    return subprocess.run(
        [*gregor_command(), *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_second_server_on_the_same_data_dir_exits_2_naming_dir_and_pid(gregor_process, tmp_path):
    data = tmp_path / "data"
    first = gregor_process(data_dir=data)
    second = _run(["server", "--port", "0", "--data-dir", str(data)])
    assert second.returncode == 2, second.stderr
    assert str(data) in second.stderr
    assert f"pid {first.proc.pid}" in second.stderr
    assert first.proc.poll() is None  # the first one keeps serving


def test_the_metadata_dir_is_locked_too(gregor_process, tmp_path):
    """Two servers with their own log dirs but one metadata.log.dir: the second exits 2."""
    meta = tmp_path / "meta"
    first = gregor_process("--override", f"metadata.log.dir={meta}", data_dir=tmp_path / "a")
    second = _run(
        ["server", "--port", "0", "--data-dir", str(tmp_path / "b"),
         "--override", f"metadata.log.dir={meta}"]
    )  # fmt: skip
    assert second.returncode == 2, second.stderr
    assert str(meta) in second.stderr and f"pid {first.proc.pid}" in second.stderr


def test_a_killed_server_leaves_no_stale_lock_and_recovers_uncleanly(gregor_process, tmp_path):
    data = tmp_path / "data"
    first = gregor_process(data_dir=data)
    with Producer(bootstrap_servers=first.bootstrap) as p:
        p.send("t", b"kept").result(30)  # auto-created topic, acknowledged after fsync
    os.killpg(first.proc.pid, signal.SIGKILL)
    first.proc.wait(10)
    again = gregor_process(data_dir=data)
    assert "UNCLEAN shutdown" in again.stderr()
    with Consumer(bootstrap_servers=again.bootstrap) as c:
        c.assign([TopicPartition("t", 0)])
        assert [r.value for r in poll_n(c, 1, timeout=30)] == [b"kept"]


def test_a_fresh_data_dir_is_not_reported_as_an_unclean_shutdown(gregor_process, tmp_path):
    gp = gregor_process(data_dir=tmp_path / "fresh")
    assert "(new: no logs yet)" in gp.stderr() and "UNCLEAN" not in gp.stderr()


def test_a_second_controller_on_the_same_metadata_dir_exits_2(tmp_path):
    meta = tmp_path / "meta"
    held = DirectoryLock(meta)  # held by this test process, as a first voter would
    try:
        cfg = tmp_path / "controller.yaml"
        cfg.write_text(
            f"node.id: 1\ncontroller.quorum.voters: 1@127.0.0.1:0\nmetadata.log.dir: {meta}\n"
        )
        proc = _run(["controller", "--config", str(cfg)])
    finally:
        held.release()
    assert proc.returncode == 2, proc.stderr
    assert str(meta) in proc.stderr and f"pid {os.getpid()}" in proc.stderr


def test_lock_in_process_names_the_holder(tmp_path):
    lock = DirectoryLock(tmp_path)
    try:
        child = subprocess.run(
            [sys.executable, "-c",
             "import sys; from client.fsutil import DirectoryLock; DirectoryLock(sys.argv[1])",
             str(tmp_path)],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert child.returncode != 0
        assert DirectoryInUseError.__name__ in child.stderr and f"pid {os.getpid()}" in child.stderr
    finally:
        lock.release()
    DirectoryLock(tmp_path).release()  # free again once released
