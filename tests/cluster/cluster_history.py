"""A produce load and the check of its history, shared by the cluster tests that change the
cluster under load (reassignment, automatic balancing, rebalance, failover, controller
membership).

`Load` runs one idempotent acks=all producer on its own thread, sending "0", "1", ... round-
robin over the partitions of a topic, a batch at a time (it waits for each batch: a steady
load, not a backlog). `check_history` then reads every partition back and asserts: every
acknowledged record is at its acknowledged offset (nothing lost or moved), no value twice
(idempotence), values in the order sent; with `every_send_acked`, also that no send failed
and the log holds nothing but the acknowledged records.
"""

from __future__ import annotations

import threading

from helpers import read_to_end, wait_until

from client import Producer


class Load:
    """`acked` holds (partition, value, offset) of every acknowledged record; `failed` a line
    per send that was not acknowledged (it may or may not be in the log)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = 1, batch: int = 20) -> None:
        self.topic = topic
        self.partitions = partitions
        self.batch = batch
        self.producer = Producer(
            bootstrap_servers=bootstrap, acks="all", linger_ms=2, delivery_timeout_ms=120_000
        )
        self.acked: list[tuple[int, int, int]] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{topic}-load", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            pending = []
            for _ in range(self.batch):
                p = i % self.partitions
                fut = self.producer.send(self.topic, str(i).encode(), partition=p)
                pending.append((p, i, fut))
                i += 1
            for p, value, fut in pending:
                try:
                    md = fut.result(150)
                except Exception as exc:  # not acknowledged: may or may not be in the log
                    self.failed.append(f"{p}/{value}: {type(exc).__name__}: {exc}")
                    continue
                self.acked.append((p, value, md.offset))

    def wait_acked(self, more: int, timeout: float = 60.0) -> None:
        target = len(self.acked) + more
        wait_until(lambda: len(self.acked) >= target, timeout, f"{more} more acknowledged writes")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(200)
        assert not self._thread.is_alive(), "the producer thread did not stop"
        self.producer.close()


def check_history(
    bootstrap: str, load: Load, *, minimum: int = 100, every_send_acked: bool = False
) -> None:
    """The history check of `load` (stopped) against what `bootstrap` serves now."""
    assert len(load.acked) > minimum, f"too little load to mean anything: {len(load.acked)}"
    if every_send_acked:
        assert not load.failed, f"{len(load.failed)} sends failed, e.g. {load.failed[:3]}"
    for p in range(load.partitions):
        name = f"{load.topic}-{p}"
        records = read_to_end(bootstrap, load.topic, p)
        values = [int(r.value) for r in records]
        by_offset = {r.offset: int(r.value) for r in records}
        acked = [(v, o) for q, v, o in load.acked if q == p]
        lost = [(v, o) for v, o in acked if by_offset.get(o) != v]
        assert not lost, f"{name}: acknowledged records lost or moved: {lost[:10]}"
        assert len(set(values)) == len(values), f"{name}: a value written twice (idempotence)"
        assert values == sorted(values), f"{name}: values out of the order sent"
        if every_send_acked:
            extra = sorted(set(by_offset) - {o for _, o in acked})
            assert not extra, f"{name}: records nobody acknowledged at offsets {extra[:10]}"
