"""RaftStorage on real files: round trips, reopen, torn tails at every byte, snapshots."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from client.errors import StorageError
from controller.raft.messages import Entry, EntryKind, HardState, Snapshot
from controller.raft.state import Ready
from controller.raft.storage import RaftStorage, encode_entry


def ready(
    entries: list[Entry] = (),  # type: ignore[assignment]
    hard_state: HardState | None = None,
    install: Snapshot | None = None,
    compact: Snapshot | None = None,
) -> Ready:
    return Ready(
        soft_state=None,
        hard_state=hard_state,
        snapshot_to_install=install,
        snapshot_to_persist=compact,
        entries_to_persist=list(entries),
        messages=[],
        committed_entries=[],
    )


def ents(first: int, last: int, term: int = 1) -> list[Entry]:
    return [Entry(i, term, f"e{i}-t{term}".encode()) for i in range(first, last + 1)]


def reopen(path: Path, **kw: int):  # type: ignore[no-untyped-def]
    s = RaftStorage(path, **kw)
    return s, s.load()


def test_empty_directory_loads_empty_state(tmp_path: Path) -> None:
    s, st = reopen(tmp_path / "raft")
    assert st.hard_state == HardState() and st.snapshot.index == 0 and st.entries == ()
    s.close()


def test_round_trip_and_reopen(tmp_path: Path) -> None:
    s, _ = reopen(tmp_path)
    noop = Entry(1, 1, b"", EntryKind.NOOP)
    s.persist(ready([noop, *ents(2, 10)], HardState(1, 3, 4)))
    s.persist(ready(ents(11, 12)))
    s.close()
    s, st = reopen(tmp_path)
    assert st.hard_state == HardState(1, 3, 4)
    assert list(st.entries) == [noop, *ents(2, 12)]
    s.close()


def test_hard_state_rewritten_on_term_or_vote_change(tmp_path: Path) -> None:
    s, _ = reopen(tmp_path)
    s.persist(ready(hard_state=HardState(2, None, 0)))
    s.persist(ready(hard_state=HardState(2, 5, 0)))
    s.close()
    assert reopen(tmp_path)[1].hard_state == HardState(2, 5, 0)


def test_conflicting_suffix_is_truncated_across_segments(tmp_path: Path) -> None:
    s, _ = reopen(tmp_path, segment_bytes=100)
    s.persist(ready(ents(1, 20, term=1)))
    assert len(list(tmp_path.glob("log-*.seg"))) > 3
    s.persist(ready(ents(7, 9, term=2)))
    s.persist(ready(ents(10, 11, term=2)))
    s.close()
    _, st = reopen(tmp_path, segment_bytes=100)
    assert list(st.entries) == ents(1, 6) + ents(7, 11, term=2)


@pytest.mark.parametrize("segment_bytes", [100, 1 << 20])
def test_torn_tail_at_every_byte_of_the_last_entry(
    tmp_path: Path, segment_bytes: int, caplog: pytest.LogCaptureFixture
) -> None:
    base = tmp_path / "base"
    s, _ = reopen(base, segment_bytes=segment_bytes)
    s.persist(ready(ents(1, 8)))
    s.close()
    saved = {p.name: p.read_bytes() for p in base.iterdir()}
    seg = sorted(base.glob("log-*.seg"))[-1]
    full = seg.read_bytes()
    last_len = len(encode_entry(ents(8, 8)[0]))
    good = full[: len(full) - last_len]
    caplog.set_level(logging.WARNING)
    for cut in range(1, last_len):
        for p in base.iterdir():
            if p.name not in saved:
                p.unlink()
        for name, data in saved.items():
            (base / name).write_bytes(data)
        seg.write_bytes(full[: len(good) + cut])
        s, st = reopen(base, segment_bytes=segment_bytes)
        assert list(st.entries) == ents(1, 7), cut
        assert seg.read_bytes() == good  # truncated on disk
        s.persist(ready(ents(8, 9)))  # and appendable again
        s.close()
        assert list(reopen(base, segment_bytes=segment_bytes)[1].entries) == ents(1, 9)
    assert "torn tail" in caplog.text


def test_corrupt_byte_in_last_entry_truncates_it(tmp_path: Path) -> None:
    s, _ = reopen(tmp_path)
    s.persist(ready(ents(1, 3)))
    s.close()
    seg = next(tmp_path.glob("log-*.seg"))
    raw = bytearray(seg.read_bytes())
    raw[-2] ^= 0xFF
    seg.write_bytes(bytes(raw))
    assert list(reopen(tmp_path)[1].entries) == ents(1, 2)


def test_corruption_in_an_older_segment_is_an_error(tmp_path: Path) -> None:
    s, _ = reopen(tmp_path, segment_bytes=60)
    s.persist(ready(ents(1, 10)))
    s.close()
    first = sorted(tmp_path.glob("log-*.seg"))[0]
    raw = bytearray(first.read_bytes())
    raw[10] ^= 0xFF
    first.write_bytes(bytes(raw))
    with pytest.raises(StorageError):
        reopen(tmp_path, segment_bytes=60)


def test_compaction_drops_segments_below_the_snapshot(tmp_path: Path) -> None:
    s, _ = reopen(tmp_path, segment_bytes=100)
    s.persist(ready(ents(1, 30)))
    before = len(list(tmp_path.glob("log-*.seg")))
    s.persist(ready(compact=Snapshot(20, 1, b"state@20")))
    after = sorted(tmp_path.glob("log-*.seg"))
    assert len(after) < before
    assert int(after[0].stem[4:]) <= 21  # the segment holding 21 survives
    s.persist(ready(ents(31, 32)))
    s.close()
    _, st = reopen(tmp_path, segment_bytes=100)
    assert st.snapshot == Snapshot(20, 1, b"state@20")
    assert list(st.entries) == ents(21, 32)
    assert len(list(tmp_path.glob("snapshot-*.snap"))) == 1


def test_installed_snapshot_replaces_the_log(tmp_path: Path) -> None:
    s, _ = reopen(tmp_path)
    s.persist(ready(ents(1, 5)))
    s.persist(ready(install=Snapshot(50, 3, b"leader state"), hard_state=HardState(3, None, 50)))
    s.persist(ready(ents(51, 52, term=3)))
    s.close()
    _, st = reopen(tmp_path)
    assert st.snapshot == Snapshot(50, 3, b"leader state")
    assert list(st.entries) == ents(51, 52, term=3)
    assert st.hard_state == HardState(3, None, 50)


def test_corrupt_snapshot_is_an_error(tmp_path: Path) -> None:
    s, _ = reopen(tmp_path)
    s.persist(ready(install=Snapshot(5, 1, b"abc")))
    s.close()
    snap = next(tmp_path.glob("snapshot-*.snap"))
    snap.write_bytes(snap.read_bytes()[:-1] + b"X")
    with pytest.raises(StorageError):
        reopen(tmp_path)


def test_leftover_tmp_files_are_removed(tmp_path: Path) -> None:
    (tmp_path / "hardstate.tmp").write_bytes(b"half written")
    s, st = reopen(tmp_path)
    assert st.hard_state == HardState() and not (tmp_path / "hardstate.tmp").exists()
    s.close()


def test_append_with_a_gap_is_refused(tmp_path: Path) -> None:
    s, _ = reopen(tmp_path)
    s.persist(ready(ents(1, 2)))
    with pytest.raises(StorageError):
        s.persist(ready(ents(5, 6)))
    s.close()


def test_a_node_survives_restart_from_disk(tmp_path: Path) -> None:
    """Core + storage together: a one-voter group writes, compacts, restarts from its files."""
    import random

    from controller.raft.core import RaftNode
    from controller.raft.state import Role

    def drive(node: RaftNode, storage: RaftStorage, applied: list[bytes]) -> None:
        while node.has_ready():
            rd = node.ready()
            storage.persist(rd)
            if rd.snapshot_to_install is not None:
                applied[:] = [rd.snapshot_to_install.data]
            applied.extend(e.data for e in rd.committed_entries if e.kind is EntryKind.NORMAL)
            node.advance(rd)

    def start() -> tuple[RaftNode, RaftStorage, list[bytes]]:
        storage = RaftStorage(tmp_path, segment_bytes=256)
        state = storage.load()
        node = RaftNode(1, [1], storage_state=state, rng=random.Random(3))
        applied = [state.snapshot.data] if state.snapshot.index else []
        return node, storage, applied

    node, storage, applied = start()
    while node.role is not Role.LEADER:
        node.tick()
        drive(node, storage, applied)
    for i in range(30):
        node.propose([f"r{i}".encode()])
        drive(node, storage, applied)
    node.compact(20, b"snapshot@20")
    drive(node, storage, applied)
    storage.close()

    node, storage, applied = start()
    assert node.term == 1 and node.last_index == 31 and node.snapshot.index == 20
    while node.role is not Role.LEADER:
        node.tick()
        drive(node, storage, applied)
    assert node.term == 2 and node.commit_index == 32  # the new NOOP commits the old tail
    assert applied == [b"snapshot@20"] + [f"r{i}".encode() for i in range(19, 30)]
    storage.close()
