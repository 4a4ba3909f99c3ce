"""RaftMetadataLog with a single voter on a real event loop and real RaftStorage files."""

from __future__ import annotations

import asyncio
import random

import pytest
from helpers import async_wait_until

from client.errors import NotControllerError, OffsetOutOfRangeError
from controller.quorum.raft_log import RaftMetadataLog


async def _until(cond, timeout=5.0, what="condition"):
    await async_wait_until(cond, timeout, what)


def _new(path, **kw):
    return RaftMetadataLog(
        1,
        [1],
        str(path),
        send=lambda to, m: None,
        tick_ms=5,
        election_timeout_ticks=4,
        rng=random.Random(1),
        **kw,
    )


def test_append_commit_read_snapshot_restart(tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        log = _new(tmp_path)
        seen, activations = [], []
        log.add_listener(seen.append)
        log.on_activate.append(lambda: activations.append(log.committed_offset()))
        with pytest.raises(NotControllerError):
            log.append([b"x"])
        log.start(loop)
        await _until(log.is_leader, what="single voter active")
        assert activations == [log.committed_offset()]
        first = log.append([b"a", b"b"]) - 1  # append returns the LAST offset
        last = log.append([b"c"])
        assert last == first + 2
        assert log.committed_offset() == last  # a single voter commits on its own fsync
        assert [r for batch in seen for r in batch] == [
            (first, b"a"),
            (first + 1, b"b"),
            (last, b"c"),
        ]
        assert log.read(0) == [(first, b"a"), (first + 1, b"b"), (last, b"c")], (
            "NOOP offsets skipped"
        )
        log.write_snapshot(first + 1, b"SNAP")
        assert log.latest_snapshot() == (first + 1, b"SNAP")
        with pytest.raises(OffsetOutOfRangeError):
            log.read(0)
        assert log.read(first + 2) == [(last, b"c")]
        log.close()
        again = _new(tmp_path)
        assert again.latest_snapshot() == (first + 1, b"SNAP")
        again.start(loop)
        await _until(again.is_leader, what="restarted voter active")
        assert again.read(first + 2) == [(last, b"c")]
        again.close()

    asyncio.run(main())


def test_read_fills_max_records_across_noops(tmp_path):
    """A NOOP (one per term) inside the range read does not shorten the answer: an observer
    paging with max_records takes a short answer as the end and jumps to the high watermark
    (RemoteMetadataLog), so a short one skipped the records after it (a broker restarted on a
    cluster with thousands of partitions lost the tail of a batch)."""

    async def main():
        loop = asyncio.get_running_loop()
        log = _new(tmp_path)
        log.start(loop)
        await _until(log.is_leader, what="single voter active")
        for i in range(5):
            log.append([b"a%d" % i])
        log.close()
        log = _new(tmp_path)  # a new term: its NOOP lands between the two runs of records
        log.start(loop)
        await _until(log.is_leader, what="restarted voter active")
        for i in range(5):
            log.append([b"b%d" % i])
        want = [b"a%d" % i for i in range(5)] + [b"b%d" % i for i in range(5)]
        for max_records in (1, 3, 4, 6, 9):
            got, position = [], 0
            while True:  # RemoteMetadataLog's paging rule
                page = log.read(position, max_records)
                got += page
                if len(page) < max_records:
                    break
                position = page[-1][0] + 1
            assert [d for _, d in got] == want, max_records
            assert len({o for o, _ in got}) == len(want)
        log.close()

    asyncio.run(main())


def test_storage_failure_is_fatal(tmp_path):
    async def main():
        fatal = []
        log = _new(tmp_path, on_fatal=fatal.append)
        deactivated = []
        log.on_deactivate.append(lambda: deactivated.append(True))
        log.start(asyncio.get_running_loop())
        await _until(log.is_leader, what="active")

        def broken(rd):
            raise OSError(5, "Input/output error")

        log.storage.persist = broken
        with pytest.raises(NotControllerError):
            log.append([b"a"])
        assert isinstance(fatal[0], OSError) and deactivated == [True]
        assert not log.is_leader() and log.failed is fatal[0]
        with pytest.raises(NotControllerError):
            log.append([b"b"])

    asyncio.run(main())
