"""Hypothesis state machine: Log (through a LogManager) against a naive in-memory model.

Random leader appends (one or several concatenated batches), reads with random limits, rolls
(small segment_bytes), truncations, retention, delete_records, flushes, timestamp and epoch
lookups, and clean or unclean reopen. Invariants after every step: end offset, log start offset
and leader-epoch entries equal the model's.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from conftest import make_batch
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from broker.log import LogConfig, LogManager
from client.errors import OffsetOutOfRangeError
from client.records.header import CRC_START, iter_headers


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class LogMachine(RuleBasedStateMachine):
    @initialize(segment_bytes=st.integers(300, 1500), interval=st.sampled_from([0, 50, 200, 4096]))
    def setup(self, segment_bytes, interval):
        self.root = Path(tempfile.mkdtemp(prefix="logsm-"))
        self.clock = Clock()
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=interval,
            retention_ms=50_000,
            retention_bytes=-1,
        )
        self.mgr = LogManager([self.root], self.config, self.clock)
        self.log = self.mgr.get_or_create("t", 0)
        self.batches: list[
            tuple[int, int, bytes, int]
        ] = []  # base, last, crc-covered bytes, max_ts
        self.lso = 0
        self.end = 0
        self.epochs: list[tuple[int, int]] = []
        self.epoch = 0

    def teardown(self):
        if hasattr(self, "mgr"):
            self.mgr.close(clean=False)
            shutil.rmtree(self.root, ignore_errors=True)

    # -- model helpers -------------------------------------------------------------------------

    def _model_truncate_epochs_end(self):
        self.epochs = [(e, o) for e, o in self.epochs if o < self.end]

    def _model_truncate_epochs_start(self):
        es = self.epochs
        i = 0
        while i + 1 < len(es) and es[i + 1][1] <= self.lso:
            i += 1
        keep = es[i:]
        if keep and keep[0][1] < self.lso:
            keep[0] = (keep[0][0], self.lso)
        self.epochs = keep

    # -- rules ---------------------------------------------------------------------------------

    @rule(
        shape=st.lists(
            st.tuples(st.integers(1, 4), st.integers(0, 120), st.integers(0, 5000)),
            min_size=1,
            max_size=3,
        ),
        bump=st.integers(0, 2),
    )
    def append(self, shape, bump):
        self.epoch += bump
        data = b"".join(
            make_batch([bytes([n]) * size] * n, timestamp=self.clock.now - 10_000 + ts)
            for n, size, ts in shape
        )
        info = self.log.append_as_leader(data, self.epoch)
        assert info.first_offset == self.end
        if not self.epochs or self.epoch > self.epochs[-1][0]:
            # as Kafka: a new epoch replaces entries that start at or after its start offset
            self.epochs = [(e, o) for e, o in self.epochs if o < self.end]
            self.epochs.append((self.epoch, self.end))
        pos = 0
        for n, _size, _ts in shape:
            h = next(iter_headers(data[pos:]))[1]
            self.batches.append(
                (self.end, self.end + n - 1, data[pos + CRC_START : pos + h.size], h.max_timestamp)
            )
            self.end += n
            pos += h.size
        assert info.last_offset == self.end - 1

    @precondition(lambda self: self.end > self.lso)
    @rule(data=st.data(), max_bytes=st.integers(1, 3000), use_max=st.booleans())
    def read(self, data, max_bytes, use_max):
        offset = data.draw(st.integers(self.lso, self.end))
        max_offset = data.draw(st.integers(self.lso, self.end)) if use_max else None
        r = self.log.read(offset, max_bytes, max_offset)
        got = [
            (h.base_offset, h.last_offset, bytes(r.data[p + CRC_START : p + h.size]))
            for p, h in iter_headers(r.data, check_crc=True)
        ]
        assert sum(len(b) + CRC_START for *_, b in got) == len(r.data)
        limit = self.end if max_offset is None else max_offset
        if offset >= limit:
            assert got == []
            return
        by_base = {b: (b, last, body) for b, last, body, _ in self.batches}
        assert got, (offset, limit)
        assert got[0][0] <= offset <= got[0][1]
        for item in got:
            assert by_base[item[0]] == item
            assert item[0] < limit
        assert r.next_offset == got[-1][1] + 1
        if len(got) > 1:
            assert len(r.data) <= max_bytes

    @rule(offset=st.integers(-5, 3))
    def read_out_of_range(self, offset):
        bad = self.lso - 1 - abs(offset) if offset < 0 else self.end + 1 + offset
        if bad < 0 and self.lso == 0:
            bad = -1 - abs(offset)
        try:
            self.log.read(bad, 100)
        except OffsetOutOfRangeError:
            return
        raise AssertionError(f"read({bad}) outside [{self.lso}, {self.end}] did not raise")

    @rule()
    def roll(self):
        self.log.roll()

    @precondition(lambda self: self.end > self.lso)
    @rule(data=st.data())
    def truncate(self, data):
        offset = data.draw(st.integers(self.lso, self.end))
        first_base = self.log.segment_base_offsets[0]
        self.log.truncate_to(offset)
        if offset >= self.end:
            return
        if offset <= first_base:  # truncate fully and start at offset
            self.batches, self.end, self.lso, self.epochs = [], offset, offset, []
            return
        self.end = next(b for b, last, _, _ in self.batches if last >= offset)
        self.batches = [b for b in self.batches if b[1] < offset]
        self.lso = min(self.lso, self.end)
        self._model_truncate_epochs_end()

    @precondition(lambda self: self.end > self.lso)
    @rule(data=st.data())
    def delete_records(self, data):
        offset = data.draw(st.integers(self.lso, self.end))
        assert self.log.retention.delete_records_before(offset) == offset
        self.lso = offset
        self._model_truncate_epochs_start()

    @rule(advance=st.integers(0, 60_000))
    def retention(self, advance):
        self.clock.now += advance
        self.mgr.run_retention()
        new = self.log.log_start_offset
        assert self.lso <= new <= self.end
        assert new == self.log.segment_base_offsets[0] or new == self.lso
        self.lso = new
        self._model_truncate_epochs_start()

    @rule()
    def flush(self):
        assert self.log.flush() == self.end

    @rule(ts=st.integers(-10_100, 0))
    def offset_for_timestamp(self, ts):
        ts += self.clock.now
        got = self.log.offset_for_timestamp(ts)
        want = next(
            (
                max(b, self.lso)
                for b, last, _, mts in self.batches
                if last >= self.lso and mts >= ts
            ),
            None,
        )
        assert (got.offset if got else None) == want

    @rule(epoch=st.integers(0, 12))
    def end_offset_for_epoch(self, epoch):
        es = self.epochs
        if not es or epoch < es[0][0]:
            want = (-1, -1)
        elif epoch >= es[-1][0]:
            want = (es[-1][0], self.end)
        else:
            i = max(j for j, (e, _) in enumerate(es) if e <= epoch)
            want = (es[i][0], es[i + 1][1])
        assert self.log.end_offset_for_epoch(epoch) == want

    @rule(clean=st.booleans())
    def reopen(self, clean):
        self.mgr.close(clean=clean)
        self.mgr = LogManager([self.root], self.config, self.clock)
        self.log = self.mgr.get("t", 0)

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def offsets_match(self):
        if hasattr(self, "log"):
            assert (self.log.log_start_offset, self.log.end_offset) == (self.lso, self.end)
            assert self.log.epoch_cache.entries == self.epochs


LogMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
TestLogStateMachine = LogMachine.TestCase
