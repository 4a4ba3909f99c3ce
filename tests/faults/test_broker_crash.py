"""Crash: a real `gregor server` with acks=all producers running is SIGKILLed mid-write and
restarted on the same data dir; every acknowledged record must be there, in order.

One producer thread per partition sends numbered batches one at a time (acks=all) over the raw
protocol and records each acknowledged base offset. After the restart each partition's log must
be a prefix of what its producer sent (no gaps, no reordering, nothing invented) that includes
every acknowledged batch at the offset the ack named. Seeded: the seed picks the kill moment.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest
from helpers import RawClient, wait_until

from client.protocol import ApiKey
from client.records import build_batch, decode_records

PARTITIONS = 4
RECORDS_PER_BATCH = 20


def _create(c: RawClient, name: str) -> None:
    body = {
        "topics": [{"name": name, "num_partitions": PARTITIONS, "replication_factor": 1}],
        "timeout_ms": 10_000,
        "validate_only": False,
    }
    assert c.request(ApiKey.CREATE_TOPICS, 0, body)["topics"][0]["error_code"] == 0


class ProducerThread(threading.Thread):
    def __init__(self, address, topic: str, partition: int) -> None:
        super().__init__(daemon=True)
        self.address, self.topic, self.partition = address, topic, partition
        self.acked: list[tuple[int, int]] = []  # (batch number, base offset)
        self.sent = 0
        self.error: BaseException | None = None

    def values(self, n: int) -> list[bytes]:
        return [b"p%d-b%d-r%d" % (self.partition, n, i) for i in range(RECORDS_PER_BATCH)]

    def run(self) -> None:
        try:
            with RawClient(self.address, timeout=10) as c:
                n = 0
                while True:
                    records = build_batch([(None, v) for v in self.values(n)])
                    body = {
                        "acks": -1,
                        "timeout_ms": 10_000,
                        "topics": [
                            {
                                "name": self.topic,
                                "partitions": [{"partition": self.partition, "records": records}],
                            }
                        ],
                    }
                    self.sent = n + 1
                    resp = c.request(ApiKey.PRODUCE, 0, body, correlation_id=n + 1)
                    p = resp["topics"][0]["partitions"][0]
                    assert p["error_code"] == 0, p
                    self.acked.append((n, p["base_offset"]))
                    n += 1
        except (AssertionError, OSError) as exc:  # the broker died under us: expected
            self.error = exc


def _read_all(c: RawClient, topic: str, partition: int) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    while True:
        body = {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 8 << 20,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "fetch_offset": offset,
                            "partition_max_bytes": 4 << 20,
                        }
                    ],
                }
            ],
        }
        p = c.request(ApiKey.FETCH, 0, body)["topics"][0]["partitions"][0]
        assert p["error_code"] == 0, p
        recs = decode_records(p["records"]) if p["records"] else []
        recs = [r for r in recs if r.offset >= offset]
        if not recs:
            assert offset == p["high_watermark"], (offset, p)
            return out
        for r in recs:
            assert r.offset == offset, (r.offset, offset)  # no gaps
            out.append(r.value)
            offset = r.offset + 1


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(2))
def test_sigkill_with_acks_all_loses_no_acknowledged_record(gregor_process, tmp_path, round_):
    seed = int(os.environ.get("GREGOR_CRASH_SEED", random.randrange(1 << 30)))
    print(f"seed={seed}")
    rng = random.Random(seed + round_)
    data = tmp_path / "data"
    gp = gregor_process(data_dir=data)
    with RawClient(gp.address) as c:
        _create(c, "crash")
    producers = [ProducerThread(gp.address, "crash", p) for p in range(PARTITIONS)]
    for t in producers:
        t.start()
    target = rng.randrange(10, 60)
    wait_until(lambda: min(len(t.acked) for t in producers) >= target, 60, f"{target} acks each")
    os.killpg(gp.proc.pid, signal.SIGKILL)
    gp.proc.wait(10)
    for t in producers:
        t.join(15)
        assert not t.is_alive()
    t0 = time.monotonic()
    gp2 = gregor_process(data_dir=data)
    restart_s = time.monotonic() - t0
    assert "UNCLEAN" in gp2.stderr()  # the kill left no clean-shutdown marker: logs recovered
    with RawClient(gp2.address) as c:
        for t in producers:
            values = _read_all(c, "crash", t.partition)
            # a prefix of what was sent: whole batches, in order, nothing invented
            assert len(values) % RECORDS_PER_BATCH == 0, len(values)
            batches = len(values) // RECORDS_PER_BATCH
            expected = [v for n in range(batches) for v in t.values(n)]
            assert values == expected, f"partition {t.partition}: log is not a prefix of sent"
            assert batches <= t.sent
            # every acknowledged batch is there, at the offset its ack named
            assert batches >= len(t.acked), (t.partition, batches, len(t.acked))
            for n, base in t.acked:
                assert base == n * RECORDS_PER_BATCH
    print(f"acked per partition: {[len(t.acked) for t in producers]}, restart {restart_s:.2f}s")
