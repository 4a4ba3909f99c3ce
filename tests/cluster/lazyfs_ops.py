"""The file system behind tests/cluster/lazyfs.py (which documents what it models): the node
table and the fusepy operations, and `serve`, the body of the mount's own process. Runs only in
that process; the test's side is `lazyfs.LazyFS`.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PAGE = 64 * 1024  # unsynced data is kept in pages of this size
MAX_WRITE = 128 * 1024  # the largest FUSE write and read (big_writes)
TRASH = ".lazyfs-trash"  # in the backing root, hidden from the mount (dir_fsync mode)


@dataclass
class _Entry:
    """A directory entry made since its directory's last fsync (dir_fsync mode): `new` (create,
    mkdir, link, symlink) at `path`, or a rename from `old` to `path` that replaced `victim`
    (kept in the trash until the rename is durable). Durable once one of `dirs` (backing inode
    numbers of the directories involved) is fsynced."""

    kind: str
    path: str
    ino: int
    dirs: tuple[int, ...]
    old: str = ""
    victim: str = ""


class _Node:
    """One backing inode: its durable state is the backing file, its unsynced state is here.
    `pages` hold the whole current content of each page they cover (up to `size`); bytes at or
    above `low` (the lowest size since the last sync) that no page covers read as zeros."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd = fd
        self.path = path
        self.lock = threading.Lock()
        self.synced = os.fstat(fd).st_size
        self.size = self.synced
        self.low = self.synced
        self.pages: dict[int, bytearray] = {}
        self.unsynced_writes = 0  # bytes written since the last sync
        self.opens = 0
        self.unlinked = False
        self.mtime_ns: int | None = None

    @property
    def dirty(self) -> bool:
        return bool(self.pages) or self.size != self.synced or self.low != self.synced

    def durable(self, off: int, n: int) -> bytes:
        """Bytes [off, off + n) as the disk has them (zeros past what may be read from it)."""
        limit = min(self.low, self.synced)
        got = os.pread(self.fd, max(0, min(n, limit - off)), off) if off < limit else b""
        return got + bytes(n - len(got)) if len(got) < n else got

    def read(self, off: int, n: int) -> bytes:
        n = max(0, min(n, self.size - off))
        if n == 0:
            return b""
        if not self.pages:
            return self.durable(off, n)
        out = bytearray(self.durable(off, n))
        for pno in range(off // PAGE, (off + n - 1) // PAGE + 1):
            page = self.pages.get(pno)
            if page is not None:
                p0 = pno * PAGE
                a, b = max(off, p0), min(off + n, p0 + PAGE)
                out[a - off : b - off] = page[a - p0 : b - p0]
        return bytes(out)

    def write(self, data: bytes, off: int) -> None:
        view = memoryview(data)
        pos = off
        while view:
            pno, at = divmod(pos, PAGE)
            k = min(len(view), PAGE - at)
            page = self.pages.get(pno)
            if page is None and k == PAGE:
                self.pages[pno] = bytearray(view[:k])
            else:
                if page is None:
                    page = self.pages[pno] = bytearray(self.durable(pno * PAGE, PAGE))
                page[at : at + k] = view[:k]
            pos += k
            view = view[k:]
        self.size = max(self.size, off + len(data))
        self.unsynced_writes += len(data)
        self.mtime_ns = time.time_ns()

    def truncate(self, length: int) -> None:
        if length < self.size:
            for pno in [p for p in self.pages if p * PAGE >= length]:
                del self.pages[pno]
            pno, at = divmod(length, PAGE)
            page = self.pages.get(pno)
            if page is not None:
                page[at:] = bytes(PAGE - at)
            self.low = min(self.low, length)
        self.size = length
        self.mtime_ns = time.time_ns()

    def sync(self, upto: int | None = None) -> int:
        """Write the unsynced state through to the backing file (all of it, or with `upto`
        only the pages below that position: a torn write-back). Returns the bytes the durable
        file grew by."""
        before = self.synced
        if upto is None and self.low < self.synced:
            os.ftruncate(self.fd, self.low)
        end = self.size if upto is None else min(self.size, upto)
        for pno in sorted(self.pages):
            p0 = pno * PAGE
            n = min(PAGE, end - p0)
            if n > 0:
                os.pwrite(self.fd, memoryview(self.pages[pno])[:n], p0)
        new_size = self.size if upto is None else max(self.synced, end)
        if os.fstat(self.fd).st_size != new_size:
            os.ftruncate(self.fd, new_size)
        self.pages.clear()
        self.synced = self.size = self.low = new_size
        self.unsynced_writes = 0
        return max(0, new_size - before)

    def drop(self) -> None:
        self.pages.clear()
        self.size = self.low = self.synced
        self.unsynced_writes = 0


class LazyOps:
    """fusepy operations over `root`. Called on libfuse's threads: the node table has its own
    lock, each node's data its own."""

    use_ns = True
    flag_nullpath_ok = 1  # read/write/fsync of an unlinked open file get path None (hard_remove)

    def __init__(self, root: str, dir_fsync: bool = False) -> None:
        self.root = root
        self.dir_fsync = dir_fsync
        self._entries: list[_Entry] = []  # not yet durable, oldest first (dir_fsync mode)
        self._trash_seq = 0
        if dir_fsync:
            shutil.rmtree(os.path.join(root, TRASH), ignore_errors=True)
            os.mkdir(os.path.join(root, TRASH))
        self._lock = threading.Lock()
        self._nodes: dict[int, _Node] = {}  # backing st_ino -> node
        self._handles: dict[int, _Node] = {}
        self._next_fh = 1
        self.fsyncs = 0
        self.writes = 0
        self.bytes_written = 0
        self.on_ready: Callable[[], None] = lambda: None

    def init(self, path: str) -> None:
        self.on_ready()

    def __call__(self, op: str, *args: Any) -> Any:
        from fuse import FuseOSError

        if not hasattr(self, op):
            raise FuseOSError(errno.ENOSYS)
        return getattr(self, op)(*args)

    def _real(self, path: str) -> str:
        rel = path.lstrip("/")
        if rel == TRASH or rel.startswith(TRASH + "/"):
            from fuse import FuseOSError

            raise FuseOSError(errno.ENOENT)
        return os.path.join(self.root, rel)

    # -- directory entries in dir_fsync mode (all under self._lock)
    def _dir_ino(self, path: str) -> int:
        return os.lstat(self._real(os.path.dirname(path.rstrip("/")) or "/")).st_ino

    def _to_trash(self, real: str) -> str:
        self._trash_seq += 1
        dest = os.path.join(self.root, TRASH, str(self._trash_seq))
        os.rename(real, dest)
        return dest

    def _made(self, path: str) -> None:
        if self.dir_fsync:
            ino = os.lstat(self._real(path)).st_ino
            self._entries.append(_Entry("new", path, ino, (self._dir_ino(path),)))

    def _undo_entries(self) -> int:
        """Power loss: undo every entry not yet durable, newest first (one whose path changed
        since, e.g. renamed on, is left as it is). Returns how many were undone."""
        undone = 0
        for e in reversed(self._entries):
            real = os.path.join(self.root, e.path.lstrip("/"))
            try:
                if os.lstat(real).st_ino != e.ino:
                    continue
            except FileNotFoundError:
                continue
            if e.kind == "new":
                self._to_trash(real)  # a directory goes with what it holds
            else:
                old = os.path.join(self.root, e.old.lstrip("/"))
                if os.path.lexists(old):
                    continue
                os.rename(real, old)
                if e.victim:
                    os.rename(e.victim, real)
            undone += 1
        self._entries.clear()
        self._empty_trash()
        return undone

    def _empty_trash(self, keep: frozenset[str] = frozenset()) -> None:
        trash = os.path.join(self.root, TRASH)
        for name in os.listdir(trash):
            path = os.path.join(trash, name)
            if path in keep:
                continue
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)

    # -- nodes and handles
    def _node_for(self, path: str, fd: int | None = None) -> _Node:
        """The node of `path` (made, with its own backing fd, if new). Call under self._lock."""
        own = os.open(self._real(path), os.O_RDWR) if fd is None else fd
        ino = os.fstat(own).st_ino
        node = self._nodes.get(ino)
        if node is None:
            node = self._nodes[ino] = _Node(own, path)
        else:
            os.close(own)
            node.path = path
        return node

    def _node_of(self, path: str | None, fh: int | None) -> _Node | None:
        if fh:
            return self._handles[fh]
        assert path is not None
        try:
            ino = os.lstat(self._real(path)).st_ino
        except FileNotFoundError:
            return None
        return self._nodes.get(ino)

    def _forget_if_idle(self, node: _Node) -> None:
        """Drop a node nobody holds open that is clean or whose file is gone. Under self._lock."""
        if node.opens == 0 and (node.unlinked or not node.dirty):
            ino = os.fstat(node.fd).st_ino
            if self._nodes.get(ino) is node:
                del self._nodes[ino]
            os.close(node.fd)

    def _open_handle(self, node: _Node) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = node
        node.opens += 1
        return fh

    # -- files
    def create(self, path: str, mode: int, fi: Any = None) -> int:
        with self._lock:
            try:
                fd = os.open(self._real(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
                self._made(path)
            except FileExistsError:  # made meanwhile through another open: not ours
                fd = os.open(self._real(path), os.O_RDWR, mode)
            return self._open_handle(self._node_for(path, fd))

    def open(self, path: str, flags: int) -> int:
        with self._lock:
            node = self._node_for(path)
            fh = self._open_handle(node)
        if flags & os.O_TRUNC:
            with node.lock:
                node.truncate(0)
        return fh

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        node = self._handles[fh]
        with node.lock:
            return node.read(offset, size)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        node = self._handles[fh]
        with node.lock:
            node.write(data, offset)
        self.writes += 1
        self.bytes_written += len(data)
        return len(data)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> None:
        with self._lock:
            node = self._node_of(path, fh)
            if node is None:
                assert path is not None
                node = self._node_for(path)
            # Under the table lock: a truncate by path holds no handle, and a release of the
            # node's last handle would otherwise forget it (clean yet) before this marks it dirty.
            with node.lock:
                node.truncate(length)

    def fsync(self, path: str | None, datasync: int, fh: int) -> None:
        node = self._handles[fh]
        with node.lock:
            node.sync()
        self.fsyncs += 1

    def flush(self, path: str | None, fh: int) -> None:
        pass  # close(2) does not make data durable

    def release(self, path: str | None, fh: int) -> None:
        with self._lock:
            node = self._handles.pop(fh)
            node.opens -= 1
            self._forget_if_idle(node)

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        node = self._handles.get(fh) if fh else None
        st = os.fstat(node.fd) if node is not None else os.lstat(self._real(path or "/"))
        attrs = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid")}
        attrs.update(st_ino=st.st_ino, st_size=st.st_size, st_atime=st.st_atime_ns)
        attrs.update(st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns, st_blocks=st.st_blocks)
        if node is None and stat.S_ISREG(st.st_mode):
            node = self._nodes.get(st.st_ino)
        if node is not None:
            attrs["st_size"] = node.size
            attrs["st_blocks"] = (node.size + 511) // 512
            if node.mtime_ns is not None:
                attrs["st_mtime"] = node.mtime_ns
        return attrs

    # -- metadata: straight through to the backing directory
    def unlink(self, path: str) -> None:
        real = self._real(path)
        with self._lock:
            st = os.lstat(real)
            os.unlink(real)
            node = self._nodes.get(st.st_ino)
            if node is not None and st.st_nlink <= 1:
                node.unlinked = True
                self._forget_if_idle(node)

    def rename(self, old: str, new: str) -> None:
        with self._lock:
            try:
                st = os.lstat(self._real(new))
                victim = self._nodes.get(st.st_ino) if st.st_nlink <= 1 else None
            except FileNotFoundError:
                st, victim = None, None
            if self.dir_fsync:
                if st is not None and stat.S_ISDIR(st.st_mode) and os.listdir(self._real(new)):
                    raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY))
                trashed = self._to_trash(self._real(new)) if st is not None else ""
                try:
                    os.rename(self._real(old), self._real(new))
                except OSError:
                    if trashed:
                        os.rename(trashed, self._real(new))
                    raise
                dirs = (self._dir_ino(old), self._dir_ino(new))
                ino = os.lstat(self._real(new)).st_ino
                self._entries.append(_Entry("rename", new, ino, dirs, old, trashed))
            else:
                os.rename(self._real(old), self._real(new))
            if victim is not None:
                victim.unlinked = True
                self._forget_if_idle(victim)
            prefix = old.rstrip("/") + "/"
            for node in self._nodes.values():
                if node.path == old or node.path.startswith(prefix):
                    node.path = new + node.path[len(old) :]

    def mkdir(self, path: str, mode: int) -> None:
        with self._lock:
            os.mkdir(self._real(path), mode)
            self._made(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(self._real(path))

    def link(self, target: str, source: str) -> None:
        with self._lock:
            os.link(self._real(source), self._real(target))
            self._made(target)

    def symlink(self, target: str, source: str) -> None:
        with self._lock:
            os.symlink(source, self._real(target))
            self._made(target)

    def readlink(self, path: str) -> str:
        return os.readlink(self._real(path))

    def chmod(self, path: str, mode: int) -> None:
        os.chmod(self._real(path), mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        os.chown(self._real(path), uid, gid)

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
        os.utime(self._real(path), ns=times) if times else os.utime(self._real(path))

    def access(self, path: str, amode: int) -> None:
        from fuse import FuseOSError

        if not os.access(self._real(path), amode):
            raise FuseOSError(errno.EACCES)

    def readdir(self, path: str | None, fh: int) -> list[str]:
        names = os.listdir(self._real(path or "/"))
        return [".", "..", *(n for n in names if n != TRASH or (path or "/") != "/")]

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> None:
        """Without dir_fsync, entries are durable at once and this does nothing; with it, the
        entries made in this directory since become durable (and replaced files go)."""
        if not self.dir_fsync or path is None:
            return
        with self._lock:
            ino = os.lstat(self._real(path)).st_ino
            durable = [e for e in self._entries if ino in e.dirs]
            self._entries = [e for e in self._entries if ino not in e.dirs]
            for e in durable:
                if e.victim:
                    self._empty_trash(keep=frozenset(x.victim for x in self._entries))
                    break

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self._real(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files")
        return {k: getattr(sv, k) for k in (*keys, "f_flag", "f_frsize", "f_namemax")}

    # -- control (from the control thread)
    def stats(self) -> dict[str, Any]:
        with self._lock:
            nodes = list(self._nodes.values())
            handles = sorted({n.path for n in self._handles.values()})
            entries = [e.path for e in self._entries]
        files = {}
        for n in nodes:
            with n.lock:
                if n.dirty:
                    files[n.path] = {
                        "synced_size": n.synced,
                        "size": n.size,
                        "unsynced_writes": n.unsynced_writes,
                        "truncated_to": n.low if n.low < n.synced else None,
                    }
        return {
            "files": files,
            "unsynced_bytes": sum(f["unsynced_writes"] for f in files.values()),
            "open_files": handles,
            "fsyncs": self.fsyncs,
            "writes": self.writes,
            "bytes_written": self.bytes_written,
            "unsynced_entries": entries,
        }

    def drop(self, torn_seed: int | None) -> dict[str, Any]:
        """Power loss: every node back to its synced state (with a seed, a random prefix of its
        unsynced pages reaches the disk first). Returns the stats as they were before."""
        before = self.stats()
        rng = random.Random(torn_seed)
        kept = 0
        with self._lock:
            for node in list(self._nodes.values()):
                with node.lock:
                    if torn_seed is not None and node.pages and node.low >= node.synced:
                        cut = rng.randrange(node.synced, node.size + 1)
                        kept += node.sync(upto=cut - cut % 512)
                    node.drop()
                self._forget_if_idle(node)
            before["entries_undone"] = self._undo_entries() if self.dir_fsync else 0
        before["torn_bytes_kept"] = kept
        return before

    def sync_all(self) -> None:
        """Every node's unsynced state to its backing file. Under the table lock, as `drop`: a
        release on a FUSE thread may forget (and close the fd of) a node at any moment
        otherwise, and the sync would then write to a closed, or reused, descriptor."""
        with self._lock:
            for node in list(self._nodes.values()):
                with node.lock:
                    node.sync()


def serve(backing: str, mountpoint: str, dir_fsync: bool = False) -> None:
    """The mount process: FUSE in the foreground, a control thread on stdin/stdout."""
    from fuse import FUSE

    ops = LazyOps(os.path.abspath(backing), dir_fsync)
    out_lock = threading.Lock()
    out = sys.stdout

    def say(msg: dict[str, Any]) -> None:
        with out_lock:
            out.write(json.dumps(msg) + "\n")
            out.flush()

    def control() -> None:
        for line in sys.stdin:
            req = json.loads(line)
            cmd = req["cmd"]
            try:
                if cmd == "stats":
                    say({"ok": ops.stats()})
                elif cmd == "sync":
                    ops.sync_all()
                    say({"ok": None})
                elif cmd == "drop":
                    say({"ok": ops.drop(req.get("torn_seed"))})
                else:
                    say({"error": f"unknown command {cmd!r}"})
            except Exception as exc:  # report it to the test, keep serving
                say({"error": repr(exc)})
        # stdin closed: the controlling test is gone; do not leave the mount behind
        subprocess.run(["umount", "-l", mountpoint], capture_output=True, timeout=30)

    ops.on_ready = lambda: say({"event": "ready"})
    threading.Thread(target=control, name="lazyfs-control", daemon=True).start()
    FUSE(
        ops,
        mountpoint,
        foreground=True,
        nothreads=False,
        big_writes=True,
        max_write=MAX_WRITE,
        max_read=MAX_WRITE,
        hard_remove=True,
        fsname="lazyfs",
        subtype="lazyfs",
    )
