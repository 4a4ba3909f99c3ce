"""LocalMetadataLog on a full disk (a 256 KiB tmpfs): a failed append leaves no partial bytes,
later appends succeed once space is freed, and reopening loses nothing acknowledged."""

from __future__ import annotations

import os
import subprocess

import pytest

from client.errors import StorageError
from controller.quorum.log import LocalMetadataLog


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_enospc_append_is_undone(small_fs):
    filler = small_fs / "filler"
    filler.write_bytes(b"\0" * 64 * 1024)
    log = LocalMetadataLog(str(small_fs / "meta"))
    acked = []
    payload = b"r" * 3000
    with pytest.raises(StorageError):
        for _ in range(1000):
            acked.append(log.append([payload, payload]))
    assert acked, "some appends fit before the disk filled"
    size_after_failure = os.path.getsize(small_fs / "meta" / "metadata.log")
    filler.unlink()
    last = log.append([b"after"])
    assert last == acked[-1] + 1
    log.close()
    reopened = LocalMetadataLog(str(small_fs / "meta"))
    recs = reopened.read(0, 10_000)
    assert [o for o, _ in recs] == list(range(acked[-1] + 2)), "contiguous, nothing lost"
    assert recs[-1] == (last, b"after")
    assert size_after_failure <= os.path.getsize(small_fs / "meta" / "metadata.log")
    reopened.close()
