"""The log cleaner (broker/log/cleaner.py) against a model: latest record per key, tombstones
dropped after delete.retention.ms, offsets kept, the active segment untouched, any dedupe
buffer (smaller than the key count: several passes); and crashes at each step of the swap."""

from __future__ import annotations

import dataclasses
import os
import random

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from broker.log import Log, LogConfig
from broker.log.cleaner import Cleaner
from broker.log.cleaner_thread import CleanerSettings, LogCleaner
from broker.log.compaction import CLEANER_CHECKPOINT, cleaned_path
from broker.log.offset_map import ENTRY_BYTES
from client.errors import InvalidRecordError
from client.records.builder import build_batch
from client.records.reader import decode_records

SEED = int(os.environ.get("GREGOR_TEST_SEED", random.randrange(2**32)))
RETENTION_MS = 10_000
KEYS = [f"k{i}".encode() for i in range(12)]


class FakeClock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def compact_log(path, clock, segment_bytes=400, **cfg) -> Log:
    config = LogConfig(
        segment_bytes=segment_bytes,
        index_interval_bytes=64,
        cleanup_policy=("compact",),
        delete_retention_ms=RETENTION_MS,
        **cfg,
    )
    return Log(path / "t-0", "t", 0, config, clock)


def reopen(log: Log, clock) -> Log:
    """A crash: descriptors closed, nothing flushed or checkpointed; open with recovery."""
    log.close()
    return Log(log.directory, "t", 0, log.config, clock, clean=False)


def contents(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record, read with Log.read from the log start in small steps (gaps crossed)."""
    out = []
    offset = log.log_start_offset
    while offset < log.end_offset:
        r = log.read(offset, 200)
        assert r.data, f"no batch at or after {offset} below end {log.end_offset}"
        out += [(rec.offset, rec.key, rec.value) for rec in decode_records(r.data)]
        assert r.next_offset > offset
        offset = r.next_offset
    offsets = [o for o, _k, _v in out]
    assert offsets == sorted(set(offsets)), "offsets not strictly increasing"
    return [(o, k, v) for o, k, v in out if o >= log.log_start_offset]


def append(log: Log, clock, records: list[tuple[bytes | None, bytes | None]]) -> None:
    """Append as leader. Keyless records, which a compacted log refuses, are appended as if
    the topic were still cleanup.policy=delete (they were written before it changed)."""
    config = log.config
    if any(k is None for k, _v in records):
        log.config = dataclasses.replace(config, cleanup_policy=("delete",))
    try:
        log.append_as_leader(build_batch(records, timestamp_ms=clock.now), 0)
    finally:
        log.config = config


def clean_to_fixpoint(log: Log, cleaner: Cleaner, bound: int | None = None) -> int:
    passes = 0
    while cleaner.clean(log, log.end_offset if bound is None else bound) is not None:
        passes += 1
        assert passes < 1000
    return passes


def expected_after(produced, lo: int, hi: int, dropped_tombstone) -> list:
    """The model: below `hi` (the cleaned region) the latest keyed record of each key there,
    minus tombstones `dropped_tombstone(offset)` says went; from `hi` on, everything."""
    latest: dict[bytes, int] = {k: o for o, k, _v in produced if lo <= o < hi and k is not None}
    keep = set(latest.values())
    out = []
    for o, k, v in produced:
        if o >= hi or (o in keep and not (v is None and dropped_tombstone(o))):
            out.append((o, k, v))
    return out


record = st.tuples(
    st.sampled_from([*KEYS, None]),
    st.one_of(st.none(), st.binary(min_size=1, max_size=20)),
)
batches = st.lists(st.lists(record, min_size=1, max_size=6), min_size=1, max_size=30)


@seed(SEED)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(phase1=batches, phase2=batches, map_entries=st.integers(1, len(KEYS) + 2))
def test_cleaner_matches_the_model(tmp_path_factory, phase1, phase2, map_entries) -> None:
    print(f"seed {SEED} (GREGOR_TEST_SEED replays)")
    path = tmp_path_factory.mktemp("clean")
    clock = FakeClock()
    log = compact_log(path, clock)
    cleaner = Cleaner(map_entries * ENTRY_BYTES, clock)
    produced: list[tuple[int, bytes | None, bytes | None]] = []

    def produce(batch_list) -> None:
        for recs in batch_list:
            base = log.end_offset
            append(log, clock, recs)
            produced.extend((base + i, k, v) for i, (k, v) in enumerate(recs))

    produce(phase1)
    log.roll()
    bound1 = log.end_offset
    clean_to_fixpoint(log, cleaner)
    # nothing is old yet: every tombstone that is the latest of its key stays
    assert contents(log) == expected_after(produced, 0, bound1, lambda o: False)

    clock.now += RETENTION_MS + 1
    produce(phase2)
    active_base = log.segment_base_offsets[-1]
    log.roll()
    bound2 = log.end_offset
    produce([[(KEYS[0], b"active")]])  # the active segment: never cleaned
    active_before = log.read(bound2, 1 << 20).data
    clean_to_fixpoint(log, cleaner, bound2)

    # phase-1 tombstones (old, and already cleaned once) go; phase-2 ones are too young
    want = expected_after(produced, 0, bound2, lambda o: o < bound1)
    assert contents(log) == want
    assert log.read(bound2, 1 << 20).data == active_before
    assert log.segment_base_offsets[0] == 0 and active_base <= bound2
    assert log.end_offset == produced[-1][0] + 1
    # a restart after a crash finds the same log (recovery accepts the gaps)
    log = reopen(log, clock)
    assert contents(log) == want
    log.close()


def test_an_idempotent_producers_last_batch_stays_as_an_empty_batch(tmp_path) -> None:
    clock = FakeClock()
    log = compact_log(tmp_path, clock)
    log.append_as_leader(
        build_batch([(b"a", b"1")], timestamp_ms=clock.now, producer_id=7, producer_epoch=0, base_sequence=0), 0
    )  # fmt: skip
    append(log, clock, [(b"a", b"2")])
    log.roll()
    append(log, clock, [(b"b", b"x")])
    log.roll()
    Cleaner(1 << 20, clock).clean(log, log.end_offset)
    assert contents(log) == [(1, b"a", b"2"), (2, b"b", b"x")]
    headers = [h for seg in log.segments for h in seg.headers()]
    assert headers[0].producer_id == 7 and headers[0].record_count == 0
    assert headers[0].base_sequence == 0
    # the producer state rebuilt from the headers still knows sequence 0: a retry is a duplicate
    log = reopen(log, clock)
    dup = log.append_as_leader(
        build_batch([(b"a", b"1")], timestamp_ms=clock.now, producer_id=7, producer_epoch=0, base_sequence=0), 0
    )  # fmt: skip
    assert (dup.first_offset, dup.batch_count) == (0, 0)
    log.close()


def _fill(log: Log, clock) -> list:
    produced = []
    for i in range(40):
        base = log.end_offset
        recs = [(KEYS[(i + j) % 5], f"v{i}-{j}".encode()) for j in range(3)]
        append(log, clock, recs)
        produced.extend((base + j, k, v) for j, (k, v) in enumerate(recs))
    log.roll()
    return produced


@pytest.mark.parametrize(
    "step", ["written", "renamed_swap", "swap_durable", "deleted_old", "renamed_log", "done"]
)
def test_a_crash_at_each_step_of_the_swap_loses_nothing(tmp_path, step) -> None:
    clock = FakeClock()
    log = compact_log(tmp_path, clock, segment_bytes=1500)
    produced = _fill(log, clock)
    end = log.end_offset
    before = contents(log)
    assert len(log.segment_base_offsets) > 3

    class Crash(Exception):
        pass

    def fault(at: str) -> None:
        if at == step:
            raise Crash(at)

    if step == "written":  # the crash came while the .cleaned file was being written
        cleaned_path(log.directory, 0).write_bytes(b"\0" * 100)
    else:
        with pytest.raises(Crash):
            Cleaner(1 << 20, clock, fault=fault).clean(log, end)
    log = reopen(log, clock)
    assert not [p for p in os.listdir(log.directory) if p.endswith((".cleaned", ".swap"))]
    after = contents(log)
    assert log.end_offset == end
    # a run of old segments or its cleaned replacement, never a mix within a run: every
    # record there is an original one at its offset, and the latest of every key is there
    final = expected_after(produced, 0, end, lambda o: False)
    assert set(final) <= set(after) <= set(before)
    if step in ("swap_durable", "deleted_old", "renamed_log", "done"):
        assert after != before  # the commit point was passed: the first run is the cleaned one
    elif step == "written":
        assert after == before
    Cleaner(1 << 20, clock).clean(log, end)
    assert contents(log) == expected_after(produced, 0, end, lambda o: False)
    log.close()


def test_the_cleaner_thread_picks_logs_over_their_dirty_ratio(tmp_path) -> None:
    clock = FakeClock()
    logs = {}
    for name, policy, ratio in (("c", ("compact",), 0.5), ("d", ("delete",), 0.0), ("h", ("compact",), 1.0)):  # fmt: skip
        config = LogConfig(
            segment_bytes=400, cleanup_policy=policy, min_cleanable_dirty_ratio=ratio
        )
        logs[(name, 0)] = Log(tmp_path / f"{name}-0", name, 0, config, clock)
        for i in range(30):
            append(logs[(name, 0)], clock, [(KEYS[i % 3], b"x" * 20)])
        logs[(name, 0)].roll()
        logs[(name, 0)].flush()  # nothing above the flushed offset is cleaned
    cleaner = LogCleaner(lambda: logs, CleanerSettings(enable=False, dedupe_buffer_bytes=1 << 20))
    hws = dict.fromkeys(logs, 0)
    stats = cleaner.clean_once()
    assert stats is not None and (stats.topic, stats.first_dirty) == ("c", 0)
    assert (logs[("c", 0)].directory / CLEANER_CHECKPOINT).read_text().strip() == str(stats.map_end)
    # "h" (ratio 1.0, all dirty) is next; then nothing: "c" is clean, "d" is not compacted
    assert cleaner.clean_once().topic == "h"  # type: ignore[union-attr]
    assert cleaner.clean_once() is None
    assert len(contents(logs[("d", 0)])) == 30
    # nothing above the high watermark is cleaned
    append(logs[("c", 0)], clock, [(KEYS[0], b"y")])
    logs[("c", 0)].roll()
    logs[("c", 0)].flush()
    cleaner = LogCleaner(lambda: logs, CleanerSettings(enable=False), lambda: hws)
    assert cleaner.clean_once() is None
    for log in logs.values():
        log.close()


def test_retention_leaves_a_compact_only_log_alone(tmp_path) -> None:
    clock = FakeClock()
    for policy, left in ((("compact",), 5), (("compact", "delete"), 1)):
        log = Log(
            tmp_path / f"{len(policy)}-0", "t", 0,
            LogConfig(segment_bytes=200, retention_ms=10, cleanup_policy=policy), clock,
        )  # fmt: skip
        for _ in range(4):
            append(log, clock, [(b"k", b"v" * 80)])
        log.roll()
        clock.now += 1000
        log.retention.delete_old_segments()
        assert len(log.segment_base_offsets) == left, policy
        log.close()


def test_a_compacted_log_refuses_records_without_a_key(tmp_path) -> None:
    clock = FakeClock()
    log = compact_log(tmp_path, clock)
    with pytest.raises(InvalidRecordError, match="without a key"):
        log.append_as_leader(build_batch([(b"k", b"v"), (None, b"v")]), 0)
    assert log.end_offset == 0
    log.append_as_leader(build_batch([(b"k", b"v"), (b"k", None)]), 0)
    assert log.end_offset == 2
    log.close()


def test_runs_never_overflow_an_index(tmp_path) -> None:
    clock = FakeClock()
    config = LogConfig(
        index_interval_bytes=0, index_size_max_bytes=48, cleanup_policy=("compact",)
    )  # an entry for every batch, 4 entries per index: segments roll every 4 batches
    log = Log(tmp_path / "t-0", "t", 0, config, clock)
    produced = []
    for i in range(60):
        base = log.end_offset
        key = KEYS[0] if i % 10 == 0 else b"u%d" % i  # most batches stay
        append(log, clock, [(key, b"v%d" % i)])
        produced.append((base, key, b"v%d" % i))
        clock.now += 1
    log.roll()
    before = len(log.segment_base_offsets)
    Cleaner(1 << 20, clock).clean(log, log.end_offset)
    want = expected_after(produced, 0, log.end_offset, lambda o: False)
    assert contents(log) == want
    assert len(log.segment_base_offsets) <= before
    for seg in log.segments[:-1]:  # every batch indexed, within what one index holds
        assert len(seg.index) == len(list(seg.headers())) - 1, seg.base_offset  # (not the 1st)
        assert len(seg.index) <= seg.index.max_entries, seg.base_offset
    log = reopen(log, clock)
    assert contents(log) == want
    log.close()


def test_truncation_below_the_cleaning_point_moves_it_back(tmp_path) -> None:
    clock = FakeClock()
    log = compact_log(tmp_path, clock)
    produced = _fill(log, clock)
    Cleaner(1 << 20, clock).clean(log, log.end_offset)
    assert log.compaction.first_dirty_offset() == log.end_offset == len(produced)
    log.truncate_to(50)
    assert log.compaction.first_dirty_offset() == log.end_offset <= 50
    log.close()


def test_min_compaction_lag_keeps_young_records_uncompacted(tmp_path) -> None:
    clock = FakeClock()
    log = compact_log(tmp_path, clock, min_compaction_lag_ms=5_000)
    produced = _fill(log, clock)  # every record at clock.now: too young
    assert Cleaner(1 << 20, clock).clean(log, log.end_offset) is None
    assert contents(log) == produced
    clock.now += 5_000  # old enough now
    old_end = log.end_offset
    for i in range(10):  # younger records in later segments stay as they are
        append(log, clock, [(KEYS[i % 5], b"young")])
        produced.append((old_end + i, KEYS[i % 5], b"young"))
        if i == 4:
            log.roll()
    log.roll()
    assert Cleaner(1 << 20, clock).clean(log, log.end_offset) is not None
    assert log.compaction.first_dirty_offset() == old_end
    assert contents(log) == expected_after(produced, 0, old_end, lambda o: False)
    log.close()


def test_compressed_batches_are_rebuilt_with_their_codec(tmp_path) -> None:
    clock = FakeClock()
    log = compact_log(tmp_path, clock, segment_bytes=300)
    produced = []
    for i in range(20):
        base = log.end_offset
        recs = [(KEYS[(i + j) % 4], b"value %d %d " % (i, j) * 5) for j in range(3)]
        log.append_as_leader(build_batch(recs, compression="gzip", timestamp_ms=clock.now), 0)
        produced += [(base + j, k, v) for j, (k, v) in enumerate(recs)]
    log.roll()
    Cleaner(1 << 20, clock).clean(log, log.end_offset)
    assert contents(log) == expected_after(produced, 0, log.end_offset, lambda o: False)
    assert {h.compression for seg in log.segments for h in seg.headers()} == {1}  # gzip
    log.close()


def test_a_paused_log_is_not_cleaned(tmp_path) -> None:
    clock = FakeClock()
    log = compact_log(tmp_path, clock)
    _fill(log, clock)
    log.flush()
    cleaner = LogCleaner(lambda: {("t", 0): log}, CleanerSettings(enable=False))
    with cleaner.paused([("t", 0)]):
        assert cleaner.clean_once() is None
    assert cleaner.clean_once() is not None
    log.close()


def test_a_failing_log_is_skipped_and_the_others_cleaned(tmp_path) -> None:
    clock = FakeClock()
    good, bad = compact_log(tmp_path / "a", clock), compact_log(tmp_path / "b", clock)
    for log in (good, bad):
        _fill(log, clock)
        log.flush()
    bad.close()  # the failure: every read of it raises StorageError now
    logs = {("bad", 0): bad, ("good", 0): good}
    cleaner = LogCleaner(lambda: logs, CleanerSettings(enable=False))
    stats = [cleaner.clean_once() for _ in range(3)]
    assert [s.topic for s in stats if s is not None] == ["t"]  # "good" (its topic is "t")
    assert ("bad", 0) in cleaner._skip_until
    good.close()


def test_stopping_gives_up_a_pass_and_leaves_the_log_as_it_was(tmp_path) -> None:
    clock = FakeClock()
    log = compact_log(tmp_path, clock)
    _fill(log, clock)
    log.flush()
    before = contents(log)
    cleaner = LogCleaner(lambda: {("t", 0): log}, CleanerSettings(enable=False))
    cleaner.stop()
    assert cleaner.clean_once() is None
    assert contents(log) == before and not list(log.directory.glob("*.cleaned"))
    log.close()
