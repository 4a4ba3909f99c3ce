"""fdatasync fails with EIO (strace fault injection): the flusher marks the log dir offline,
appends are refused with StorageError, data already written stays readable, nothing reported as
flushed is lost, and the log reopens intact afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from broker.log import LogConfig, LogManager
from client.records.header import iter_headers

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("log_fsync_child.py")


@pytest.mark.parametrize("fail_from", [3, 8])
def test_fsync_eio_takes_dir_offline(tmp_path, fail_from):
    if shutil.which("strace") is None:
        pytest.skip("strace not installed (apt install strace)")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{CHILD.parent}")
    cmd = [
        "strace",
        "-f",
        "-qq",
        "-o",
        "/dev/null",
        "-e",
        "trace=fdatasync",
        "-e",
        f"inject=fdatasync:error=EIO:when={fail_from}+",
        sys.executable,
        str(CHILD),
        str(tmp_path / "logs"),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    if "ptrace" in res.stderr and res.returncode != 0:
        pytest.skip(f"strace cannot trace here: {res.stderr.strip()[:200]}")
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    flushed = [int(line.split()[1]) for line in lines if line.startswith("flushed ")]
    assert any(line.startswith("offline ") and "logs" in line for line in lines), lines
    end_line = next(line for line in lines if line.startswith("end "))
    end, readable = int(end_line.split()[1]), int(end_line.split()[3])
    assert readable * 3 == end
    assert "OFFLINE" in res.stderr or "flush failed" in res.stderr
    # reopen without fault injection: everything reported flushed is there, intact
    mgr = LogManager([tmp_path / "logs"], LogConfig())
    try:
        log = mgr.get("io", 0)
        assert log.end_offset >= max(flushed, default=0)
        batches = list(iter_headers(log.read(0, 1 << 30).data, check_crc=True))
        assert batches[-1][1].next_offset == log.end_offset
    finally:
        mgr.close()
