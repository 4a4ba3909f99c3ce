"""producer.id.expiration.ms (KIP-854) on the producer state (producer_state.py), time as an
input: a producer with no batch or marker for that long is dropped unless its transaction is
open; a built state (from a snapshot or the log) drops them too, so a restart does not bring
them back; the next batch of a dropped producer is a new producer's."""

from __future__ import annotations

import pytest

from broker.log import Log, LogConfig
from broker.log.producer_state import ProducerStateManager
from client.errors import UnknownProducerIdError
from client.records import build_batch
from client.records.control import build_marker, parse_marker
from client.records.header import parse_header

EXPIRY = 60_000
T0 = 10_000_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def _batch(pid: int, seq: int, ts: int, txn: bool = False) -> bytes:
    return build_batch(
        [(None, b"v")],
        timestamp_ms=ts,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=txn,
    )


def test_remove_expired_is_a_function_of_time() -> None:
    state = ProducerStateManager()
    state.update(parse_header(_batch(1, 0, T0)), 0)  # idle
    state.update(parse_header(_batch(2, 0, T0 + 30_000)), 1)  # recent
    state.update(parse_header(_batch(3, 0, T0, txn=True)), 2)  # open transaction, old
    assert state.remove_expired(T0 + EXPIRY - 1, EXPIRY) == []
    assert state.remove_expired(T0 + EXPIRY, EXPIRY) == [1]  # at exactly the expiry: gone
    assert sorted(state.producers) == [2, 3]
    assert state.remove_expired(T0 + 10 * EXPIRY, EXPIRY) == [2]  # 3's transaction is open
    assert list(state.producers) == [3] and state.ongoing == {3: 2}
    # its marker closes the transaction (and is its last write): then it expires too
    marker = build_marker(3, 0, True, 0, T0 + 10 * EXPIRY)
    h = parse_header(marker)
    state.update(h, 3, parse_marker(h, marker))
    assert state.remove_expired(T0 + 11 * EXPIRY - 1, EXPIRY) == []
    assert state.remove_expired(T0 + 11 * EXPIRY, EXPIRY) == [3]
    assert not state.producers


def test_a_log_expires_idle_producers_and_keeps_them_expired(tmp_path) -> None:
    clock = Clock()
    cfg = LogConfig(segment_bytes=300, producer_id_expiration_ms=EXPIRY)

    def open_log() -> Log:
        return Log(tmp_path / "t-0", "t", 0, cfg, clock)

    log = open_log()
    try:
        log.append_as_leader(_batch(1, 0, T0), 0)
        log.append_as_leader(_batch(1, 1, T0), 0)
        log.append_as_leader(_batch(2, 0, T0, txn=True), 0)  # opens a transaction
        for i in range(3):  # rolls: the snapshots hold producers 1 and 2
            log.append_as_leader(build_batch([(None, b"x" * 200)], timestamp_ms=T0 + i), 0)
        assert [p.producer_id for p in log.producers.describe()] == [1, 2]
        assert log.producers.remove_expired(T0 + EXPIRY - 1) == 0
        clock.now = T0 + EXPIRY
        assert log.producers.remove_expired() == 1  # the log's clock
        assert [p.producer_id for p in log.producers.describe()] == [2]
        # producer 1's next batch is a new producer's: sequence 0, or UNKNOWN_PRODUCER_ID
        with pytest.raises(UnknownProducerIdError):
            log.append_as_leader(_batch(1, 2, clock.now), 0)
        log.flush()
    finally:
        log.close()
    assert list((tmp_path / "t-0").glob("*.snapshot"))
    log = open_log()  # the snapshot still holds producer 1: the build expires it again
    try:
        assert [p.producer_id for p in log.producers.describe()] == [2]
        assert log.producers.last_stable_offset(log.end_offset) == 2  # still open
        log.append_as_leader(_batch(1, 0, clock.now), 0)  # starts again at 0
        assert [p.producer_id for p in log.producers.describe()] == [1, 2]
    finally:
        log.close()


def test_log_manager_expires_every_loaded_log(tmp_path) -> None:
    from broker.log import LogManager

    clock = Clock()
    cfg = LogConfig(producer_id_expiration_ms=EXPIRY)
    mgr = LogManager([tmp_path / "d"], cfg, clock=clock)
    try:
        a = mgr.get_or_create("a", 0)
        b = mgr.get_or_create("b", 0)
        a.append_as_leader(_batch(1, 0, T0), 0)
        b.append_as_leader(_batch(2, 0, T0 + EXPIRY), 0)
        mgr.get_or_create("c", 0)  # no producer state built: nothing to do
        clock.now = T0 + EXPIRY
        assert mgr.remove_expired_producers() == 1
        assert a.producers.describe() == [] and len(b.producers.describe()) == 1
    finally:
        mgr.close()
