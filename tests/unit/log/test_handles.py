"""Bounded segment descriptors (broker/log/handles.py): an LRU per log dir, lazy reopening,
durability across eviction, and running out of descriptors without going offline."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import make_batch

from broker.log import LogConfig, LogManager
from broker.log.handles import FileHandles, SegmentFile, derive_max_open_files, nofile_limit
from client.errors import StorageError

REPO = Path(__file__).resolve().parents[3]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _batch(value: bytes) -> bytes:
    return make_batch([value])


def test_lru_closes_least_recently_used_unpinned(tmp_path):
    cache = FileHandles(3, "t")
    files = [SegmentFile(tmp_path / f"{i}.log", cache) for i in range(5)]
    for f in files[:3]:
        with f:
            pass
    assert cache.open_count == 3
    pinned = files[0].acquire()  # in use: never closed by eviction
    with files[3]:
        pass
    assert cache.open_count == 3
    assert files[0].is_open and not files[1].is_open  # 1 was the oldest unpinned
    os.fstat(pinned)
    files[0].release()
    with files[4]:
        pass
    assert cache.open_count == 3
    assert not files[0].is_open or not files[2].is_open
    # reopening sees what was written through the closed descriptor
    with files[1] as fd:
        os.pwrite(fd, b"abc", 0)
    cache.close_all_idle()
    assert cache.open_count == 0
    with files[1] as fd:
        assert os.pread(fd, 3, 0) == b"abc"
    files[1].close()
    with pytest.raises(StorageError):
        files[1].acquire()


def test_close_while_pinned_defers_until_release(tmp_path):
    cache = FileHandles(2, "t")
    f = SegmentFile(tmp_path / "a.log", cache)
    fd = f.acquire()
    f.close()
    os.fdatasync(fd)  # still open for the flush that pinned it
    f.release()
    assert not f.is_open
    with pytest.raises(OSError):
        os.fstat(fd)


def test_many_logs_keep_descriptors_bounded_and_serve(tmp_path):
    before = _open_fds()
    mgr = LogManager([tmp_path / "d0", tmp_path / "d1"], LogConfig(), max_open_files=16)
    assert mgr.max_open_files == 16
    logs = [mgr.get_or_create("t", p) for p in range(300)]
    assert mgr.open_segment_files() == 0  # created partitions hold no descriptor
    for i, log in enumerate(logs):
        log.append_as_leader(_batch(b"v%d" % i), 0)
        assert mgr.open_segment_files() <= 16
    assert _open_fds() - before <= 16 + 4
    for log in logs:  # a flush reopens what the cache closed
        assert log.flush() == 1
    for i, log in enumerate(logs):  # so do reads
        assert b"v%d" % i in log.read(0, 1 << 20).data
    assert mgr.handles(tmp_path / "d0").evictions > 0
    mgr.close()
    mgr = LogManager([tmp_path / "d0", tmp_path / "d1"], LogConfig(), max_open_files=16)
    assert mgr.open_segment_files() == 0  # restart: nothing held open after loading
    assert all(mgr.get("t", p).end_offset == 1 for p in range(300))  # type: ignore[union-attr]
    mgr.close()


def test_budget_derived_from_rlimit_and_refused_above_it():
    limit = nofile_limit()
    assert derive_max_open_files(-1) == max(16, limit // 2)
    assert derive_max_open_files(16) == 16
    with pytest.raises(StorageError, match=r"log\.max\.open\.files=.*ulimit -n"):
        derive_max_open_files(limit)


_CHILD = textwrap.dedent(
    """
    import os, resource, sys
    sys.path[:0] = [{repo!r}, {repo!r} + "/tests/unit/log"]
    from broker.log import LogConfig, LogManager
    from broker.log.handles import FileLimitError
    from conftest import make_batch as batch

    resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    mgr = LogManager([{d!r}], LogConfig(), max_open_files=32)
    logs = [mgr.get_or_create("t", p) for p in range(400)]  # 3 files each: 1,200 > 128
    for p, log in enumerate(logs):
        log.append_as_leader(batch([b"x%d" % p]), 0)
        log.flush()
    # now use up every descriptor the process has left
    hog = []
    try:
        while True:
            hog.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    try:
        mgr.get_or_create("t", 400)
        print("CREATED")
    except FileLimitError as exc:
        print("REFUSED", exc)
    assert not os.path.exists({d!r} + "/t-400"), "a refused partition leaves nothing"
    # serving goes on: the cache gives back idle descriptors for the partitions in use
    for p in (0, 1, 2, 3):
        logs[p].append_as_leader(batch([b"y"]), 0)
    print("OFFLINE", mgr.offline_dirs(), any(log.offline for log in logs))
    for fd in hog:
        os.close(fd)
    for p, log in enumerate(logs):
        assert (b"x%d" % p) in log.read(0, 1 << 20).data
    mgr.get_or_create("t", 400)
    mgr.close()
    print("DONE")
    """
)


def test_out_of_descriptors_refuses_creation_and_nothing_goes_offline(tmp_path):
    """A child process with RLIMIT_NOFILE 128 runs 400 partitions; with every descriptor
    used up, a new partition is refused with an error naming the limit and the key, no log
    or dir goes offline, and once descriptors come back everything works."""
    script = _CHILD.format(repo=str(REPO), d=str(tmp_path / "d"))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    refused = [line for line in lines if line.startswith("REFUSED")]
    assert refused, out.stdout
    assert "too many open files" in refused[0] and "log.max.open.files" in refused[0]
    assert "ulimit -n" in refused[0] and "limit 128" in refused[0]
    assert "OFFLINE [] False" in lines and "DONE" in lines
