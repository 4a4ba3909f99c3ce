"""LazyFS: a FUSE file system that loses what was not fsynced, for power-loss tests (fault F9).

The model is Jepsen's LazyFS. A mount mirrors a backing directory; the backing directory is "the
disk" and holds only what is durable. File *data* written through the mount is kept in memory
(in the FUSE process, in 64 KiB pages over the backing file) and reaches the backing file only
when that file is fsynced (fsync or fdatasync; msync of a shared mapping is an fsync too).
`drop_unsynced()` is the power loss: every file goes back to its last synced contents and size
(unsynced writes, extensions *and truncations* are undone), then the mount is remounted so that
no kernel cache remembers the lost bytes.

Metadata operations (create, mkdir, rename, unlink, rmdir, link, chmod, utimens) go through to
the backing directory at once by default, as on a journaling file system with ordered metadata
(Jepsen's LazyFS does the same): a file created and never fsynced survives the power loss with
its synced size (0), a rename is never undone, and directory fsync does nothing. So by default
the layer tests that data is fsynced before it is relied on, not that directories are.

`LazyFS(..., dir_fsync=True)` is stricter, as POSIX: a directory entry made by create, mkdir,
link, symlink or rename lasts only once its directory is fsynced (for a rename, either of its
two directories); a power loss undoes the others, newest first (a file goes back to its old
name, a file a rename replaced comes back; a directory that goes takes its contents with it).
Removals (unlink, rmdir) stay durable at once. A file a rename replaced waits in
`.lazyfs-trash` in the backing root (hidden from the mount) until the rename is durable. On ext4 and XFS an fsync of any file commits every earlier metadata
change, so this mode is harsher than those; it finds code that relies on that.

The backing files are written, not fsynced, at an fsync: the backing file system is never
power-cut.

`drop_unsynced(torn_seed=N)` is another possible outcome: per file, on its own, a random prefix
of the unsynced pages (in offset order, cut on a 512-byte boundary) reaches the disk before the
cut, a torn tail as a disk writing back its cache would leave; so one file may keep unsynced
bytes that another, written earlier, lost. A file with an unsynced truncation loses all its
unsynced changes.

Use (as root, with /dev/fuse, libfuse2 and fusepy; `unavailable_reason()` says what is missing):

    with LazyFS(tmp / "disk", tmp / "mnt") as fs:     # mounts; unmounts (after a sync) on exit
        ... run a server with its data dir under tmp / "mnt", SIGKILL it ...
        report = fs.drop_unsynced()                   # waits until no file is open; remounts
        assert report.bytes_lost > 0, report.files    # what the power loss threw away
        ... restart the server on the same dir ...

Several nodes (scenario S9): one mount can hold every node's data and metadata dirs, so one
`drop_unsynced()` cuts the power of all at once (kill every node first); or one mount per
node, dropped one after the other. Unsynced data lives in the mount process's memory, with no
cap: fine for servers that fsync before acknowledging, not for hours of unflushed writes.
Measured on the 2-core VM: mount 50-130 ms; `gregor perf produce` of 100-byte records with
acks=all, 112k records/s on LazyFS against 170k on the plain disk (send mode), a single node.

The mount runs in its own process (`python lazyfs.py serve BACKING MOUNTPOINT`, own session),
controlled by JSON lines over its stdin/stdout; when its stdin closes (the test process died)
it unmounts itself. Multithreaded FUSE, page cache on (no direct_io, so mmap works), 128 KiB
writes (big_writes), hard_remove (an unlinked open file keeps working, no .fuse_hidden files).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lazyfs_ops import PAGE, serve

__all__ = ["PAGE", "DropReport", "LazyFS", "LazyFSError", "unavailable_reason"]


def unavailable_reason() -> str | None:
    """Why a LazyFS mount cannot be made here, or None when it can."""
    import ctypes.util

    if os.geteuid() != 0:
        return "LazyFS mounts need root"
    if not os.path.exists("/dev/fuse") or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "no usable /dev/fuse"
    if ctypes.util.find_library("fuse") is None:
        return "no libfuse2 (apt-get install libfuse2)"
    try:
        import fuse  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"fusepy unusable: {exc}"
    return None


class LazyFSError(RuntimeError):
    """The mount failed, or refused a command."""


@dataclass
class DropReport:
    """What a power loss threw away: per file (path inside the mount) its synced size, the
    size it had, the bytes written since its last sync and an unsynced truncation."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    bytes_lost: int = 0
    torn_bytes_kept: int = 0
    entries_undone: int = 0  # with dir_fsync: directory entries made since their dir's fsync
    remount_s: float = 0.0


def _unmount(mountpoint: Path) -> None:
    """fusermount -u, then umount -l when busy."""
    if not os.path.ismount(mountpoint):
        return
    tool = shutil.which("fusermount") or shutil.which("fusermount3")
    if tool and subprocess.run([tool, "-u", str(mountpoint)], capture_output=True).returncode == 0:
        return
    res = subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, text=True)
    if res.returncode != 0 and os.path.ismount(mountpoint):
        raise LazyFSError(f"cannot unmount {mountpoint}: {res.stderr.strip()}")


class LazyFS:
    """A LazyFS mount of `backing` on `mountpoint` (both made if missing), run in a child
    process. Not thread-safe: one test thread drives it. `stderr` takes the child's log."""

    def __init__(
        self,
        backing: Path | str,
        mountpoint: Path | str,
        stderr: IO | None = None,
        *,
        dir_fsync: bool = False,
    ):
        self.backing = Path(backing).resolve()
        self.dir_fsync = dir_fsync
        self.mountpoint = Path(mountpoint).resolve()
        self._stderr = stderr
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._pump_thread: threading.Thread | None = None
        self.mount_s: float | None = None  # seconds the last mount took

    def mount(self, timeout: float = 20.0) -> float:
        """Start the mount process and wait until the file system answers; returns seconds."""
        if self._proc is not None:
            raise LazyFSError("already mounted")
        reason = unavailable_reason()
        if reason:
            raise LazyFSError(reason)
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "serve"]
            + [str(self.backing), str(self.mountpoint)]
            + (["--dir-fsync"] if self.dir_fsync else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
            text=True,
        )
        self._lines = queue.Queue()
        self._pump_thread = threading.Thread(
            target=self._pump, args=(self._proc.stdout, self._lines), name="lazyfs-out"
        )
        self._pump_thread.daemon = True  # ends at the process's EOF, joined by _stop
        self._pump_thread.start()
        try:
            msg = self._read(timeout)
            if msg.get("event") != "ready":
                raise LazyFSError(f"unexpected first message {msg}")
            from helpers import wait_until  # (not at the top: the mount process runs this file)

            try:
                wait_until(
                    lambda: os.path.ismount(self.mountpoint), t0 + timeout - time.monotonic()
                )
            except AssertionError:
                raise LazyFSError(f"{self.mountpoint} not mounted within {timeout}s") from None
        except BaseException:
            self._stop(sync=False)
            raise
        self.mount_s = time.monotonic() - t0
        return self.mount_s

    def _read(self, timeout: float) -> dict[str, Any]:
        """The mount process's next message (its stdout is read by one thread per mount)."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        if not line:
            code = self._proc.poll() if self._proc is not None else None
            raise LazyFSError(f"no answer from the LazyFS process (exit status {code})")
        return json.loads(line)

    @staticmethod
    def _pump(stdout: IO[str], lines: queue.Queue[str | None]) -> None:
        for line in stdout:
            lines.put(line)
        lines.put(None)

    def _command(self, cmd: str, timeout: float = 60.0, **args: Any) -> Any:
        if self._proc is None or self._proc.poll() is not None:
            raise LazyFSError("not mounted")
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({"cmd": cmd, **args}) + "\n")
        self._proc.stdin.flush()
        msg = self._read(timeout)
        if "error" in msg:
            raise LazyFSError(f"{cmd}: {msg['error']}")
        return msg["ok"]

    def stats(self) -> dict[str, Any]:
        """{"files": {path: {...}}, "unsynced_bytes", "open_files", "fsyncs", "writes",
        "bytes_written"} (counters since this mount)."""
        return self._command("stats")

    def sync(self) -> None:
        """Make everything durable, as sync(1) would."""
        self._command("sync")

    def drop_unsynced(self, torn_seed: int | None = None, timeout: float = 10.0) -> DropReport:
        """Power loss. Waits (up to `timeout` s) until no file is open in the mount (kill the
        processes using it first: the kernel closes their files just after they die), throws
        away what was not fsynced, and remounts with cold kernel caches."""
        from helpers import wait_until

        try:
            wait_until(lambda: not self.stats()["open_files"], timeout)
        except AssertionError:
            open_files = self.stats()["open_files"]
            raise LazyFSError(f"files still open in {self.mountpoint}: {open_files[:10]}") from None
        before = self._command("drop", torn_seed=torn_seed)
        self._stop(sync=False)
        t0 = time.monotonic()
        self.mount()
        return DropReport(
            files=before["files"],
            bytes_lost=max(0, before["unsynced_bytes"] - before["torn_bytes_kept"]),
            torn_bytes_kept=before["torn_bytes_kept"],
            entries_undone=before["entries_undone"],
            remount_s=time.monotonic() - t0,
        )

    def unmount(self, sync: bool = True) -> None:
        """Unmount (after making everything durable, unless `sync` is False) and end the
        mount process."""
        self._stop(sync)

    def _stop(self, sync: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if sync and proc.poll() is None:
                self._proc = proc
                try:
                    self.sync()
                finally:
                    self._proc = None
        finally:
            try:
                _unmount(self.mountpoint)
            finally:
                if proc.stdin is not None:
                    proc.stdin.close()  # the child unmounts itself on EOF, if still mounted
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait(15)
                    _unmount(self.mountpoint)
                if self._pump_thread is not None:
                    self._pump_thread.join(10)
                if proc.stdout is not None:
                    proc.stdout.close()

    def __enter__(self) -> LazyFS:
        self.mount()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unmount(sync=exc[0] is None)


if __name__ == "__main__":
    args = sys.argv[1:]
    dir_fsync = "--dir-fsync" in args
    args = [a for a in args if a != "--dir-fsync"]
    if len(args) != 3 or args[0] != "serve":
        sys.exit("usage: lazyfs.py serve BACKING MOUNTPOINT [--dir-fsync]")
    serve(args[1], args[2], dir_fsync)
