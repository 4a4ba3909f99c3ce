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
