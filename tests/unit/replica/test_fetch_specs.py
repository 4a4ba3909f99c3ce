"""specs.diverging's lock-free common case answers as the rule over the locked epoch lookup
(state.diverging with Log.end_offset_for_epoch), for every fetch offset and last fetched
epoch around a log's epochs."""

from __future__ import annotations

from broker.log import Log, LogConfig
from broker.replica import FetchPartitionSpec
from broker.replica.partition import Partition
from broker.replica.specs import diverging
from broker.replica.state import diverging as rule
from client.records import build_batch


def _answers_agree(log: Log) -> int:
    part = Partition("t", 0, 1, log)
    checked = 0
    for offset in range(-1, log.end_offset + 3):
        for last_epoch in range(-2, 9):
            spec = FetchPartitionSpec("t", 0, offset, 1 << 20, -1, last_epoch)
            want = rule(offset, last_epoch, log.end_offset_for_epoch, log.log_start_offset)
            assert diverging(part, spec) == want, (offset, last_epoch)
            checked += 1
    return checked


def test_lock_free_divergence_check_answers_as_the_locked_lookup(tmp_path):
    log = Log(tmp_path / "t-0", "t", 0, LogConfig())
    try:
        assert _answers_agree(log)  # empty: no epoch known
        for epoch in (0, 0, 2, 5, 5):
            log.append_as_leader(build_batch([(None, b"x")] * 3), epoch)
            assert _answers_agree(log)
        log.truncate_to(12)  # (the last batch goes; epoch 5 keeps one)
        assert (log.end_offset, log.latest_epoch) == (12, 5) and _answers_agree(log)
        log.truncate_to(9)  # (epoch 5 gone: the latest is 2 again)
        assert (log.end_offset, log.latest_epoch) == (9, 2) and _answers_agree(log)
    finally:
        log.close()
