"""Crash during compaction: a real `gregor server` whose cleaner is busy compacting a topic
(every 10 ms, tiny segments) while an acks=all producer rewrites keys is SIGKILLed at a seeded
moment, then restarted on the same data dir. Whatever step of a swap the kill hit, the restart
completes or rolls it back: every record read is one that was sent, at increasing offsets, and
the latest acknowledged value of every key is there (or a later one).

The swap steps themselves are each interrupted in tests/unit/log/test_cleaner.py; this test is
the real process, with its flusher, replica manager and recovery, killed mid-work.
"""

from __future__ import annotations

import os
import random
import signal
import threading

import pytest
from helpers import read_to_end, wait_until

from client import Admin, Producer

KEYS = 40


class Writer(threading.Thread):
    """Sends value seq to key seq % KEYS, one at a time (acks=all), recording each ack."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.acked: list[tuple[int, int]] = []  # (seq, offset)
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            with Producer(
                bootstrap_servers=self.bootstrap, acks="all", linger_ms=0, retries=0
            ) as p:
                seq = 0
                while not self.stop.is_set():
                    value = b"%d-" % seq + b"x" * 100
                    md = p.send("kc", value, key=b"k%d" % (seq % KEYS), partition=0).result(10)
                    self.acked.append((seq, md.offset))
                    seq += 1
        except Exception:  # the server died under us: expected
            pass


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(3))
def test_sigkill_while_cleaning_loses_no_latest_value(gregor_process, tmp_path, round_) -> None:
    seed = int(os.environ.get("GREGOR_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed} (GREGOR_TEST_SEED replays)")
    rng = random.Random(seed + round_)
    data = tmp_path / "data"
    gp = gregor_process("--override", "log.cleaner.backoff.ms=10", data_dir=data)
    with Admin(bootstrap_servers=gp.bootstrap) as admin:
        admin.create_topic(
            "kc",
            config={"cleanup.policy": "compact", "segment.bytes": "2048",
                    "min.cleanable.dirty.ratio": "0.0", "delete.retention.ms": "0"},
        )  # fmt: skip
    writer = Writer(gp.bootstrap)
    writer.start()
    target = rng.randrange(300, 900)
    wait_until(lambda: len(writer.acked) >= target, 120, f"{target} acks")
    wait_until(lambda: gp.stderr().count("cleaned [") >= 3, 60, "the cleaner at work")
    more = len(writer.acked) + rng.randrange(0, 60)  # the seeded kill moment
    wait_until(lambda: len(writer.acked) >= more, 60, f"{more} acks")
    os.killpg(gp.proc.pid, signal.SIGKILL)
    gp.proc.wait(10)
    writer.stop.set()
    writer.join(30)
    assert not writer.is_alive()
    acked = list(writer.acked)

    gp2 = gregor_process(data_dir=data)
    assert "UNCLEAN" in gp2.stderr()
    got = read_to_end(gp2.bootstrap, "kc")
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    seqs = []
    for r in got:  # only records that were sent, each under its key
        seq = int(r.value.split(b"-")[0])
        assert r.key == b"k%d" % (seq % KEYS), r
        seqs.append(seq)
    assert seqs == sorted(seqs)  # the log's order is the order of sending
    at = dict(acked)
    for r, seq in zip(got, seqs, strict=True):
        if seq in at:
            assert r.offset == at[seq], (seq, r.offset, at[seq])
    latest_read: dict[bytes, int] = {}
    for r, seq in zip(got, seqs, strict=True):
        latest_read[r.key] = seq
    for seq, _offset in acked[-KEYS:]:  # the latest acknowledged value of every key
        key = b"k%d" % (seq % KEYS)
        assert latest_read.get(key, -1) >= seq, (key, seq, latest_read.get(key))
    assert len(got) < len(acked)  # it was compacted
    settled = [line for line in gp2.stderr().splitlines() if "compaction swap" in line
               or "unfinished cleaned segment" in line]  # fmt: skip
    print(f"acked {len(acked)}, read {len(got)} after the restart; swaps settled: {settled}")
