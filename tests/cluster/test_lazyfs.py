"""The LazyFS layer itself (tests/cluster/lazyfs.py): what was fsynced survives a power loss,
what was not is gone (data, sizes and truncations), metadata goes through at once, and the
mount behaves as a file system should (O_APPEND, mmap, unlinked open files, flock). A seeded
random run checks it against a plain model. Skips with the reason where FUSE is unavailable."""

from __future__ import annotations

import fcntl
import mmap
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from lazyfs import PAGE, LazyFS, LazyFSError, unavailable_reason
from lazyfs_ops import LazyOps

from client.fsutil import fsync_dir, write_atomic


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[LazyFS]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with LazyFS(tmp_path / "disk", tmp_path / "mnt") as fs:
        yield fs
    assert not os.path.ismount(tmp_path / "mnt")


def _write(path: Path, data: bytes, sync: bool, mode: int = os.O_WRONLY | os.O_CREAT) -> None:
    fd = os.open(path, mode, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_fsynced_data_survives_and_unsynced_data_is_lost(lazy: LazyFS) -> None:
    m = lazy.mountpoint
    fd = os.open(m / "seg.log", os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b"a" * 100_000)
    os.fdatasync(fd)
    os.write(fd, b"b" * 5_000)  # after the last fsync
    assert os.pread(fd, 5, 100_000) == b"bbbbb"  # readable before the cut
    os.close(fd)
    _write(m / "never-synced", b"hello", sync=False)
    assert (lazy.backing / "seg.log").stat().st_size == 100_000  # the disk has only the synced
    report = lazy.drop_unsynced()
    assert report.bytes_lost == 5_005
    assert report.files["/seg.log"]["synced_size"] == 100_000
    assert (m / "seg.log").read_bytes() == b"a" * 100_000
    assert (m / "never-synced").exists() and (m / "never-synced").stat().st_size == 0
    assert lazy.stats()["files"] == {}  # nothing left to lose


def test_only_the_fsynced_files_of_several_survive(lazy: LazyFS) -> None:
    m = lazy.mountpoint
    for name in "abcd":
        _write(m / name, name.encode() * 3000, sync=name in "ac")
    _write(m / "a", b"A" * 10, sync=False, mode=os.O_WRONLY | os.O_APPEND)
    lazy.drop_unsynced()
    assert (m / "a").read_bytes() == b"a" * 3000
    assert (m / "c").read_bytes() == b"c" * 3000
    assert (m / "b").read_bytes() == b"" and (m / "d").read_bytes() == b""


def test_truncation_is_undone_unless_fsynced(lazy: LazyFS) -> None:
    m = lazy.mountpoint
    original = os.urandom(3 * PAGE + 123)
    _write(m / "f", original, sync=True)
    fd = os.open(m / "f", os.O_RDWR)
    os.ftruncate(fd, 100)
    os.pwrite(fd, b"tail", 5000)  # re-extended: the truncated bytes read as zeros
    assert os.pread(fd, 6000, 0) == original[:100] + bytes(4900) + b"tail"
    os.close(fd)
    report = lazy.drop_unsynced()
    assert report.files["/f"]["truncated_to"] == 100
    assert (m / "f").read_bytes() == original
    fd = os.open(m / "f", os.O_RDWR)
    os.ftruncate(fd, 10)
    os.fsync(fd)
    os.close(fd)
    _write(m / "g", b"x" * 50, sync=True)
    _write(m / "g", b"", sync=False, mode=os.O_WRONLY | os.O_TRUNC)  # open(O_TRUNC), no fsync
    lazy.drop_unsynced()
    assert (m / "f").read_bytes() == original[:10]
    assert (m / "g").read_bytes() == b"x" * 50


def test_metadata_goes_through_at_once(lazy: LazyFS) -> None:
    m = lazy.mountpoint
    (m / "dir" / "sub").mkdir(parents=True)
    write_atomic(m / "dir" / "checkpoint", b"0\n1\nt 0 42\n")  # temp, fsync, rename, dir fsync
    _write(m / "dir" / "unsynced.tmp", b"data", sync=False)
    os.rename(m / "dir" / "unsynced.tmp", m / "dir" / "renamed")
    _write(m / "gone", b"x", sync=True)
    os.unlink(m / "gone")
    lazy.drop_unsynced()
    assert (m / "dir" / "checkpoint").read_bytes() == b"0\n1\nt 0 42\n"
    assert (m / "dir" / "renamed").read_bytes() == b""  # the rename stays, the data does not
    assert sorted(os.listdir(m / "dir")) == ["checkpoint", "renamed", "sub"]
    assert not (m / "gone").exists()


def test_append_mode_unlinked_open_file_and_flock(lazy: LazyFS) -> None:
    m = lazy.mountpoint
    with open(m / "raft.seg", "ab") as f:  # the Raft log's way of writing
        f.write(b"one")
        f.flush()
        os.fsync(f.fileno())
        f.write(b"two")
    with open(m / "raft.seg", "ab") as f:
        f.write(b"three")
    assert (m / "raft.seg").read_bytes() == b"onetwothree"
    fd = os.open(m / "doomed", os.O_RDWR | os.O_CREAT, 0o644)
    os.unlink(m / "doomed")  # still open: reads and writes keep working (hard_remove)
    os.pwrite(fd, b"still here", 0)
    os.fsync(fd)
    assert os.pread(fd, 100, 0) == b"still here"
    assert os.listdir(m) == ["raft.seg"]  # no .fuse_hidden files
    os.close(fd)
    lock_fd = os.open(m / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # Gregor's DirectoryLock
    other = os.open(m / ".lock", os.O_RDWR)
    with pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(other)
    with pytest.raises(LazyFSError, match="still open"):
        lazy.drop_unsynced(timeout=0.2)  # a power loss is for after the processes died
    os.close(lock_fd)
    lazy.drop_unsynced()
    assert (m / "raft.seg").read_bytes() == b"one"


def test_mmap_reads_and_msynced_writes(lazy: LazyFS) -> None:
    m = lazy.mountpoint
    _write(m / "idx", bytes(2 * PAGE), sync=True)
    with open(m / "idx", "r+b") as f, mmap.mmap(f.fileno(), 2 * PAGE) as mm:
        mm[10:15] = b"hello"
        mm.flush()  # msync(MS_SYNC): an fsync of the file
        assert mm[10:15] == b"hello"
    _write(m / "idx", b"unsynced", sync=False, mode=os.O_WRONLY | os.O_APPEND)
    lazy.drop_unsynced()
    data = (m / "idx").read_bytes()
    assert len(data) == 2 * PAGE and data[10:15] == b"hello"


def test_torn_drop_keeps_a_prefix_of_the_unsynced_tail(lazy: LazyFS) -> None:
    m = lazy.mountpoint
    content = os.urandom(8 * PAGE)
    _write(m / "seg", content[:1000], sync=True)
    _write(m / "seg", content[1000:], sync=False, mode=os.O_WRONLY | os.O_APPEND)
    sizes = set()
    for seed in range(6):
        report = lazy.drop_unsynced(torn_seed=seed)
        data = (m / "seg").read_bytes()
        assert data == content[: len(data)] and len(data) >= 1000
        assert report.torn_bytes_kept == len(data) - 1000  # the durable file grew by that
        sizes.add(len(data))
        fd = os.open(m / "seg", os.O_WRONLY)
        os.ftruncate(fd, 1000)
        os.fsync(fd)
        os.pwrite(fd, content[1000:], 1000)
        os.close(fd)
    assert len(sizes) > 1, sizes  # the cut moves with the seed


def test_random_operations_match_a_model(lazy: LazyFS) -> None:
    """Seeded: random pwrite / ftruncate / fsync on 3 files, checked against an in-memory model
    of 'current' and 'durable' contents before and after each of 3 power losses."""
    seed = int(os.environ.get("LAZYFS_SEED", random.randrange(1 << 30)))
    print(f"seed={seed}")
    rng = random.Random(seed)
    m = lazy.mountpoint
    names = ["f0", "f1", "f2"]
    current = {n: bytearray() for n in names}
    durable = dict.fromkeys(names, b"")
    for _ in range(3):
        fds = {n: os.open(m / n, os.O_RDWR | os.O_CREAT, 0o644) for n in names}
        for _ in range(120):
            n = rng.choice(names)
            cur, kind = current[n], rng.random()
            if kind < 0.6:
                off = rng.randrange(0, len(cur) + PAGE)
                data = rng.randbytes(rng.choice([1, 100, 4096, PAGE, 3 * PAGE + 7]))
                os.pwrite(fds[n], data, off)
                if off > len(cur):
                    cur.extend(bytes(off - len(cur)))
                cur[off : off + len(data)] = data
            elif kind < 0.8:
                size = rng.randrange(0, len(cur) + 2 * PAGE)
                os.ftruncate(fds[n], size)
                del cur[size:]
                cur.extend(bytes(size - len(cur)))
            else:
                os.fdatasync(fds[n])
                durable[n] = bytes(cur)
            assert os.pread(fds[n], len(cur) + 10, 0) == cur, (seed, n)
        for fd in fds.values():
            os.close(fd)
        lazy.drop_unsynced()
        for n in names:
            assert (m / n).read_bytes() == durable[n], (seed, n)
            current[n] = bytearray(durable[n])


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[LazyFS]:
    """A mount in dir_fsync mode: directory entries are durable only once their dir is fsynced."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with LazyFS(tmp_path / "disk", tmp_path / "mnt", dir_fsync=True) as fs:
        yield fs


def test_dir_fsync_mode_loses_entries_of_directories_not_fsynced(strict: LazyFS) -> None:
    m = strict.mountpoint
    _write(m / "dir-fsynced", b"data", sync=True)
    fsync_dir(m)
    _write(m / "no-dir-fsync", b"data", sync=True)  # data durable, its name not
    (m / "a" / "b").mkdir(parents=True)
    _write(m / "a" / "b" / "x", b"deep", sync=True)
    fsync_dir(m / "a" / "b")  # x is in b for good, but b is not in a, nor a in the root
    assert strict.stats()["unsynced_entries"] == ["/no-dir-fsync", "/a", "/a/b"]
    assert ".lazyfs-trash" not in os.listdir(m) and not (m / ".lazyfs-trash").exists()
    report = strict.drop_unsynced()
    assert report.entries_undone == 3
    assert sorted(os.listdir(m)) == ["dir-fsynced"]
    assert (m / "dir-fsynced").read_bytes() == b"data"


def test_dir_fsync_mode_undoes_a_rename_until_the_directory_is_fsynced(strict: LazyFS) -> None:
    m = strict.mountpoint
    write_atomic(m / "checkpoint", b"v1")  # temp, fsync, rename, fsync dir: durable
    _write(m / "checkpoint.tmp", b"v2", sync=True)
    os.replace(m / "checkpoint.tmp", m / "checkpoint")  # without the directory fsync
    assert (m / "checkpoint").read_bytes() == b"v2"
    strict.drop_unsynced()
    assert os.listdir(m) == ["checkpoint"] and (m / "checkpoint").read_bytes() == b"v1"
    write_atomic(m / "checkpoint", b"v3")
    strict.drop_unsynced()
    assert os.listdir(m) == ["checkpoint"] and (m / "checkpoint").read_bytes() == b"v3"


def test_a_sync_all_beside_releases_touches_no_forgotten_node(tmp_path: Path) -> None:
    """The unmount's sync (`sync_all`) runs on the control thread while FUSE threads still
    release handles; a release forgets a clean node and closes its fd. `sync_all` once synced
    a snapshot of the node table outside its lock and so wrote to closed descriptors (EBADF at
    a teardown in CI), or to a reused one. The operations are driven directly: no FUSE."""
    ops = LazyOps(str(tmp_path))
    failed: list[OSError] = []
    done = threading.Event()

    def sync_loop() -> None:
        while not done.is_set():
            try:
                ops.sync_all()
            except OSError as e:
                failed.append(e)
                done.set()

    syncer = threading.Thread(target=sync_loop)
    syncer.start()
    try:
        for i in range(3000):
            if done.is_set():
                break
            name = f"/f{i % 8}"
            fh = ops.create(name, 0o644)
            ops.write(None, b"x" * 100, 0, fh)
            ops.release(None, fh)  # dirty: the node stays until synced
            fh = ops.open(name, os.O_RDWR)
            ops.fsync(None, 0, fh)
            ops.release(None, fh)  # clean and closed: forgotten, its fd closed
    finally:
        done.set()
        syncer.join()
    assert not failed, failed
    assert all((tmp_path / f"f{i}").read_bytes() == b"x" * 100 for i in range(8))
