"""The in-memory Raft log of one node: a snapshot, the entries after it, and bookkeeping.

    snapshot.index        committed          applied <= committed          last_index
          |                   |                                                |
    [ compacted ... ][ e(snapshot.index+1) ... e(committed) ... e(last_index) ]
                                          stable_index: entries above it are not yet persisted

Pure: no I/O. Owned by one `RaftNode`; called only from the thread that owns that node.
"""

from __future__ import annotations

from controller.raft.messages import Entry, EntryKind, Snapshot


class RaftLog:
    def __init__(self, snapshot: Snapshot, entries: list[Entry], committed: int) -> None:
        self.snapshot = snapshot
        self.entries: list[Entry] = []
        for e in entries:
            if e.index <= snapshot.index:
                continue
            if e.index != snapshot.index + len(self.entries) + 1:
                raise ValueError(f"log gap: entry {e.index} after {self.last_index}")
            self.entries.append(e)
        self.config_entries: list[Entry] = [e for e in self.entries if e.kind is EntryKind.CONFIG]
        """The CONFIG entries still in the log, in index order (few: membership changes)."""
        self.committed = max(committed, snapshot.index)
        if self.committed > self.last_index:
            raise ValueError(f"commit {self.committed} beyond last index {self.last_index}")
        self.applied = snapshot.index
        self.stable_index = self.last_index
        """Every entry up to here has been handed to storage (and persisted after advance)."""

    # -- reading ---------------------------------------------------------------------------
    @property
    def first_index(self) -> int:
        return self.snapshot.index + 1

    @property
    def last_index(self) -> int:
        return self.snapshot.index + len(self.entries)

    @property
    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.snapshot.term

    def term(self, index: int) -> int | None:
        """Term of the entry at `index`; None if compacted away or beyond the end."""
        off = index - self.snapshot.index
        if off == 0:
            return self.snapshot.term
        if off < 0 or off > len(self.entries):
            return None
        return self.entries[off - 1].term

    def match_term(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def slice(self, lo: int, hi: int, max_entries: int | None = None) -> list[Entry]:
        """Entries with lo <= index < hi (lo must be > snapshot.index)."""
        assert lo > self.snapshot.index, (lo, self.snapshot.index)
        hi = min(hi, self.last_index + 1)
        if max_entries is not None:
            hi = min(hi, lo + max_entries)
        base = self.snapshot.index + 1
        return self.entries[lo - base : hi - base]

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Raft's election restriction: is a log ending at (last_index, last_term) at least as
        up to date as ours?"""
        return last_term > self.last_term or (
            last_term == self.last_term and last_index >= self.last_index
        )

    def latest_config(self) -> tuple[int, bytes]:
        """(index, data) of the latest membership in the log, else the snapshot's (data may be
        empty: the bootstrap membership)."""
        if self.config_entries:
            e = self.config_entries[-1]
            return e.index, e.data
        return self.snapshot.index, self.snapshot.config

    def config_at(self, index: int) -> bytes:
        """The membership in force at `index` (>= snapshot.index): for a snapshot taken there."""
        for e in reversed(self.config_entries):
            if e.index <= index:
                return e.data
        return self.snapshot.config

    def unstable_entries(self) -> list[Entry]:
        return self.slice(self.stable_index + 1, self.last_index + 1)

    def next_committed(self, max_entries: int | None = None) -> list[Entry]:
        """Committed entries not yet applied."""
        if self.committed <= self.applied:
            return []
        return self.slice(self.applied + 1, self.committed + 1, max_entries)

    def conflict_hint(self, index: int) -> int:
        """For a rejected append at `index`: the index the leader should retry after. Skips the
        whole run of the conflicting term, never below the commit index."""
        if index > self.last_index:
            return self.last_index
        t = self.term(index)
        hint = index - 1
        while hint > self.committed and self.term(hint) == t:
            hint -= 1
        return max(hint, self.committed)

    # -- writing ---------------------------------------------------------------------------
    def append(self, entries: list[Entry]) -> None:
        if not entries:
            return
        first = entries[0].index
        assert first > self.committed, f"append at {first} would overwrite commit {self.committed}"
        assert first <= self.last_index + 1, (
            f"append at {first} leaves a gap after {self.last_index}"
        )
        del self.entries[first - self.snapshot.index - 1 :]
        self.entries.extend(entries)
        self.config_entries = [e for e in self.config_entries if e.index < first]
        self.config_entries.extend(e for e in entries if e.kind is EntryKind.CONFIG)
        self.stable_index = min(self.stable_index, first - 1)

    def maybe_append(self, prev_index: int, entries: tuple[Entry, ...]) -> int:
        """Follower side of AppendEntries once (prev_index, prev_term) matched: keep matching
        entries, truncate at the first conflict, append the rest. Returns the last new index."""
        last_new = prev_index + len(entries)
        for i, e in enumerate(entries):
            if e.index <= self.snapshot.index:
                continue
            if self.term(e.index) != e.term:
                self.append(list(entries[i:]))
                break
        return last_new

    def commit_to(self, index: int) -> bool:
        if index <= self.committed:
            return False
        assert index <= self.last_index, f"commit {index} beyond last index {self.last_index}"
        self.committed = index
        return True

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the whole log by a snapshot received from the leader."""
        self.snapshot = snapshot
        self.entries = []
        self.config_entries = []
        self.committed = snapshot.index
        self.applied = snapshot.index
        self.stable_index = snapshot.index

    def compact(self, snapshot: Snapshot) -> None:
        """Drop entries up to `snapshot.index` (already applied) and keep the snapshot."""
        assert snapshot.index <= self.applied, (snapshot.index, self.applied)
        if snapshot.index <= self.snapshot.index:
            return
        assert self.term(snapshot.index) == snapshot.term, "snapshot term does not match the log"
        del self.entries[: snapshot.index - self.snapshot.index]
        self.config_entries = [e for e in self.config_entries if e.index > snapshot.index]
        self.snapshot = snapshot
