"""The consumer's side of read_committed (client/records/reader.py): control batches are never
returned, and with a Fetch answer's aborted_transactions the records of those transactions are
dropped (Kafka's algorithm: a producer is aborted from its first offset until its ABORT
marker), whatever the codec, with producers interleaved and a fetch starting inside a
transaction. Checked against a naive model on seeded random logs."""

from __future__ import annotations

import os
import random

import pytest

from client.records import build_batch, decode_partition_records
from client.records.control import build_marker
from client.records.header import iter_headers, set_base_offset


def _log(spec: list[tuple]) -> tuple[bytes, list[dict], list[tuple[int, bytes]]]:
    """Batches from `spec` entries (("data", pid or None, n, codec) | ("end", pid, commit)), in
    order, with offsets assigned; the aborted_transactions a broker would answer for the whole
    range, and the (offset, value) pairs read_committed must return."""
    out, offset = bytearray(), 0
    open_first: dict[int, int] = {}
    aborted, pending = [], {}  # pending: pid -> [(offset, value)] of its open transaction
    expected: list[tuple[int, bytes]] = []
    for entry in spec:
        if entry[0] == "data":
            _kind, pid, n, codec = entry
            values = [b"%d" % (offset + i) for i in range(n)]
            batch = bytearray(
                build_batch(
                    [(None, v) for v in values],
                    compression=codec,
                    producer_id=-1 if pid is None else pid,
                    producer_epoch=0 if pid is not None else -1,
                    base_sequence=0 if pid is not None else -1,
                    is_transactional=pid is not None,
                )
            )
            rows = [(offset + i, v) for i, v in enumerate(values)]
            if pid is None:
                expected += rows
            else:
                open_first.setdefault(pid, offset)
                pending.setdefault(pid, []).extend(rows)
        else:
            _kind, pid, commit = entry
            batch = bytearray(build_marker(pid, 0, commit, 0, 1))
            n = 1
            if pid in open_first:
                if commit:
                    expected += pending.pop(pid)
                else:
                    aborted.append({"producer_id": pid, "first_offset": open_first[pid]})
                    pending.pop(pid)
                del open_first[pid]
        set_base_offset(batch, offset)
        out += batch
        offset += n
    return bytes(out), aborted, sorted(expected)


def _read(buf: bytes, aborted: list[dict] | None) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in decode_partition_records(buf, "t", 0, True, aborted)]


def test_interleaved_producers_and_codecs() -> None:
    spec = [
        ("data", None, 2, "none"),
        ("data", 1, 2, "gzip"),
        ("data", 2, 1, "none"),
        ("data", 1, 1, "none"),
        ("end", 1, False),
        ("data", 1, 2, "none"),  # producer 1's next transaction: committed
        ("end", 2, True),
        ("end", 1, True),
        ("data", None, 1, "gzip"),
    ]
    buf, aborted, expected = _log(spec)
    assert aborted == [{"producer_id": 1, "first_offset": 2}]
    assert _read(buf, aborted) == expected
    assert [v for _o, v in _read(buf, aborted)] == [b"0", b"1", b"4", b"7", b"8", b"11"]
    # read_uncommitted: every data record, no marker
    assert [v for _o, v in _read(buf, None)] == [b"%d" % o for o in (0, 1, 2, 3, 4, 5, 7, 8, 11)]


def test_a_fetch_starting_inside_an_aborted_transaction() -> None:
    buf, aborted, _expected = _log(
        [("data", 3, 1, "none"), ("data", None, 1, "none"), ("data", 3, 2, "none"),
         ("end", 3, False), ("data", None, 1, "none")]
    )  # fmt: skip
    pos = next(pos for pos, h in iter_headers(buf) if h.base_offset == 1)
    tail = buf[pos:]  # a fetch from offset 1: producer 3's transaction began before it
    assert [v for _o, v in _read(tail, aborted)] == [b"1", b"5"]


@pytest.mark.parametrize("run", range(5))  # (not random ids: xdist workers must collect alike)
def test_against_a_model(run: int) -> None:
    seed = int(os.environ.get("GREGOR_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed} (GREGOR_TEST_SEED={seed} replays it)")
    rng = random.Random(seed)
    spec: list[tuple] = []
    open_pids: set[int] = set()
    for _ in range(60):
        pid = rng.randrange(4)
        if pid in open_pids and rng.random() < 0.3:
            spec.append(("end", pid, rng.random() < 0.5))
            open_pids.discard(pid)
        elif rng.random() < 0.2:
            spec.append(("data", None, rng.randrange(1, 4), rng.choice(["none", "gzip"])))
        else:
            spec.append(("data", pid, rng.randrange(1, 4), rng.choice(["none", "gzip"])))
            open_pids.add(pid)
    for pid in sorted(open_pids):  # a read_committed fetch ends at the LSO: all decided
        spec.append(("end", pid, rng.random() < 0.5))
    buf, aborted, expected = _log(spec)
    assert _read(buf, aborted) == expected, f"seed {seed}"
