"""Graceful stop: SIGTERM a `gregor server` while acks=all producers run; it exits 0 after
answering or refusing in-flight requests, writes the clean-shutdown marker (the restart skips
recovery), and every acknowledged record is there after the restart."""

from __future__ import annotations

import os
import signal

import pytest
from helpers import RawClient, wait_until
from test_broker_crash import PARTITIONS, RECORDS_PER_BATCH, ProducerThread, _create, _read_all


@pytest.mark.slow
def test_sigterm_under_load_is_clean_and_keeps_acknowledged_records(gregor_process, tmp_path):
    data = tmp_path / "data"
    gp = gregor_process(data_dir=data)
    with RawClient(gp.address) as c:
        _create(c, "graceful")
    producers = [ProducerThread(gp.address, "graceful", p) for p in range(PARTITIONS)]
    for t in producers:
        t.start()
    wait_until(lambda: min(len(t.acked) for t in producers) >= 10, 60, "10 acks each")
    os.killpg(gp.proc.pid, signal.SIGTERM)
    assert gp.proc.wait(30) == 0, gp.stderr()
    for t in producers:
        t.join(15)
        assert not t.is_alive()
    assert (data / ".gregor_clean_shutdown").exists()
    gp2 = gregor_process(data_dir=data)
    assert "UNCLEAN" not in gp2.stderr()
    with RawClient(gp2.address) as c:
        for t in producers:
            values = _read_all(c, "graceful", t.partition)
            batches = len(values) // RECORDS_PER_BATCH
            assert values == [v for n in range(batches) for v in t.values(n)]
            assert batches >= len(t.acked)
