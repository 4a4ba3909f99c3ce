"""DeleteRecords across 3 `gregor broker` processes (replication factor 3): the answer comes
once every in-sync replica moved its log start offset (each broker's log-start-offset
checkpoint shows it as soon as Admin.delete_records returns), and a new leader after the old
one is killed answers ListOffsets earliest with the new start; consumers begin there."""

from __future__ import annotations

import signal

from helpers import known_partitions, poll_n, wait_until

from broker.log.checkpoint import read_offsets
from broker.log.manager import LOG_START_OFFSET_CHECKPOINT
from client import Admin, Consumer, Producer, TopicPartition

OVERRIDES = {"replica_lag_time_max_ms": 10_000, "replica_fetch_backoff_ms": 200}


def _isr3(b, topic: str):
    ps = known_partitions(b.bootstrap_all(), topic)
    return ps[0] if ps and ps[0].leader >= 0 and len(ps[0].isr) == 3 else None


def test_every_replica_moves_its_log_start(broker_cluster) -> None:
    _q, b = broker_cluster(**OVERRIDES)
    tp = TopicPartition("dr", 0)
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        admin.create_topic("dr", 1, 3, {"segment.bytes": "4096", "min.insync.replicas": "2"})
        first = wait_until(lambda: _isr3(b, "dr"), 30, "dr-0 with an ISR of 3")
        with Producer(bootstrap_servers=b.bootstrap_all(), acks="all", linger_ms=0) as p:
            for i in range(40):
                p.send("dr", b"%04d" % i + b"x" * 500, partition=0).result(30)
        # answered only once every ISR member reported its new log start
        assert admin.delete_records({tp: 25}) == {tp: 25}
        isr = admin.describe_topic("dr").partitions[0].isr

        def moved(n: int) -> bool:
            path = b.data_dirs[n] / LOG_START_OFFSET_CHECKPOINT
            on_disk = sorted(
                int(f.name.split(".")[0]) for f in (b.data_dirs[n] / "dr-0").glob("*.log")
            )
            return (
                read_offsets(path).get(("dr", 0)) == 25
                and on_disk[0] <= 25
                and all(base > 25 for base in on_disk[1:])
            )

        for n in isr:  # so every in-sync broker's checkpoint holds it already
            assert moved(n), (n, read_offsets(b.data_dirs[n] / LOG_START_OFFSET_CHECKPOINT))
        for n in b.ports:  # (one dropped from the ISR under load follows at its next fetch)
            wait_until(lambda n=n: moved(n), 30, f"broker {n}'s log start at 25")
        assert admin.list_offsets({tp: -2}) == {tp: 25}
    old = first.leader
    b.stop(old, signal.SIGKILL)
    new = wait_until(
        lambda: (lambda ps: ps[0] if ps and ps[0].leader not in (-1, old) else None)(
            known_partitions(b.bootstrap_all(), "dr")
        ),
        30,
        "a new leader for dr-0",
    )
    with Admin(bootstrap_servers=b.bootstrap(new.leader)) as admin:
        assert admin.list_offsets({tp: -2}) == {tp: 25}
        assert admin.describe_topic("dr").partitions[0].log_start_offset == 25
    with Consumer(bootstrap_servers=b.bootstrap(new.leader), auto_offset_reset="earliest") as c:
        c.assign([tp])
        got = poll_n(c, 15, timeout=30)
    assert [r.offset for r in got] == list(range(25, 40))
