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


def test_write_plain_overwrites_in_place_and_cuts_to_the_new_length(tmp_path):
    path = tmp_path / "f"
    fsutil.write_plain(path, "0\n2\n1 0\n2 5\n")
    inode = path.stat().st_ino
    fsutil.write_plain(path, "0\n1\n1 0\n")  # shorter: the old tail is gone
    assert path.read_text() == "0\n1\n1 0\n"
    fsutil.write_plain(path, b"0\n3\n1 0\n2 5\n3 9\n")  # longer
    assert path.read_text() == "0\n3\n1 0\n2 5\n3 9\n"
    assert path.stat().st_ino == inode  # the same file throughout, never made again
