"""client.fsutil.make_dirs: mkdir -p that fsyncs the parent of each directory it creates."""

from __future__ import annotations

from pathlib import Path

import pytest

from client import fsutil


def test_make_dirs_fsyncs_the_parent_of_each_directory_it_creates(tmp_path, monkeypatch):
    synced: list[Path] = []
    real = fsutil.fsync_dir
    monkeypatch.setattr(fsutil, "fsync_dir", lambda p: (synced.append(Path(p)), real(p)))
    fsutil.make_dirs(tmp_path / "a" / "b" / "c")
    assert (tmp_path / "a" / "b" / "c").is_dir()
    assert synced == [tmp_path, tmp_path / "a", tmp_path / "a" / "b"]
    synced.clear()
    fsutil.make_dirs(tmp_path / "a" / "b")  # exists: nothing to do
    fsutil.make_dirs(tmp_path / "a" / "d")
    assert synced == [tmp_path / "a"]


def test_make_dirs_under_a_file_fails(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError):
        fsutil.make_dirs(tmp_path / "f" / "sub")
