"""The fault harness's workload (CHECKER.md, "Workload"): idempotent acks=all producers writing
unique values `p{n}-{seq}` (each producer's seq increasing per partition), an assign-mode reader
reading every partition from offset 0 throughout, all recorded in a History; the final read
after heal; the leader events the brokers logged.

Outcomes: an acknowledgement is `ok` with its offset; NOT_ENOUGH_REPLICAS (refused before
appending) is `fail`; anything else (timeouts, expired deliveries, AFTER_APPEND, lost
connections) is `info`, unknown.
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from fault_history import History

from client import Consumer, Producer, TopicPartition
from client.errors import GregorError, NotEnoughReplicasError

PACE_S = 0.002  # between one producer's writes: a few hundred writes/s each (CHECKER.md)


class Workload:
    def __init__(
        self, bootstrap: str, topic: str, partitions: int, history: History, producers: int = 2
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, args=(f"p{n}",), name=f"w-p{n}")
            for n in range(1, producers + 1)
        ]
        self._threads.append(threading.Thread(target=self._read, name="w-reader"))
        self.errors: list[BaseException] = []

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        assert not any(t.is_alive() for t in self._threads), "workload threads did not stop"
        assert not self.errors, self.errors

    def acked(self) -> int:
        return sum(1 for e in list(self.history.entries) if e["type"] == "ok" and e["f"] == "send")

    def _produce(self, name: str) -> None:
        seq = [0] * self.partitions
        try:
            with Producer(
                bootstrap_servers=self.bootstrap,
                acks="all",
                linger_ms=2,
                request_timeout_ms=2000,
                delivery_timeout_ms=10_000,
                retry_backoff_ms=50,
            ) as prod:
                pending: list[tuple[int, Any]] = []
                i = 0
                while not self._stop.is_set():
                    p = i % self.partitions
                    i += 1
                    value = f"{name}-{seq[p]}"
                    seq[p] += 1
                    op = self.history.invoke(name, "send", p, value)
                    pending.append((op, prod.send(self.topic, value.encode(), partition=p)))
                    if len(pending) >= 50:
                        self._settle(pending)
                        pending = []
                    self._stop.wait(PACE_S)  # the write rate (ends at once on stop)
                self._settle(pending)
        except BaseException as exc:  # (reported by stop())
            self.errors.append(exc)

    def _settle(self, pending: list[tuple[int, Any]]) -> None:
        for op, fut in pending:
            try:
                md = fut.result(30)
            except NotEnoughReplicasError as exc:
                self.history.fail(op, repr(exc))
            except GregorError as exc:
                self.history.info(op, repr(exc))
            else:
                self.history.ok(op, md.offset)

    def _read(self) -> None:
        try:
            with Consumer(bootstrap_servers=self.bootstrap, request_timeout_ms=3000) as c:
                tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
                c.assign(tps)
                for tp in tps:
                    c.seek(tp, 0)
                while not self._stop.is_set():
                    try:
                        records = c.poll(timeout_ms=100)
                    except GregorError:
                        continue  # (retried on the next poll)
                    for r in records:
                        self.history.polled("r1", r.partition, r.offset, r.value.decode())
        except BaseException as exc:
            self.errors.append(exc)


def final_read(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> dict:
    """Every partition from log start to its high watermark, read until the HW stays put."""
    out: dict[int, list[tuple[int, str]]] = {}
    deadline = time.monotonic() + timeout
    with Consumer(bootstrap_servers=bootstrap) as c:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            while True:
                end = c.end_offsets([tp])[tp]
                c.assign([tp])
                c.seek_to_beginning(tp)
                got: list[tuple[int, str]] = []
                while (not got or got[-1][0] < end - 1) and time.monotonic() < deadline:
                    got += [(r.offset, r.value.decode()) for r in c.poll(timeout_ms=200)]
                if c.end_offsets([tp])[tp] == end or time.monotonic() > deadline:
                    out[p] = [(o, v) for o, v in got if o < end]
                    break
    return out


_LEADER = re.compile(r"\[(?P<topic>[^\[\]]+)-(?P<p>\d+)\] became leader \(epoch (?P<epoch>\d+)")


def leader_events(stderr_files: dict[int, list[Path]], topic: str) -> list[dict]:
    """ "became leader" lines of each broker's logs, as checker events."""
    events = []
    for node, paths in stderr_files.items():
        for path in sorted(paths):
            for line in path.read_text(errors="replace").splitlines():
                m = _LEADER.search(line)
                if m and m["topic"] == topic:
                    events.append(
                        {
                            "type": "leader",
                            "node": node,
                            "partition": int(m["p"]),
                            "epoch": int(m["epoch"]),
                        }  # fmt: skip
                    )
    return events
