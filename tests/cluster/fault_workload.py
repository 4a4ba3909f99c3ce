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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fault_history import History

from client import Consumer, Producer, TopicPartition
from client.errors import GregorError, NotEnoughReplicasError

PACE_S = 0.002  # between one producer's writes: a few hundred writes/s each (CHECKER.md)
MAX_OUTSTANDING = 2000  # unresolved writes per producer


class ClientThreads:
    """Client threads started together; `stop()` ends them (each watches `_stop`) and raises
    what any of them raised (they append it to `errors`)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def _thread(self, name: str, target: Any, *args: Any) -> None:
        self._threads.append(threading.Thread(target=target, args=args, name=name))

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        assert not any(t.is_alive() for t in self._threads), "workload threads did not stop"
        assert not self.errors, self.errors


class Workload(ClientThreads):
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        history: History,
        producers: int = 2,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        """`security`: the clients' security settings (keyword arguments; none: PLAINTEXT)."""
        super().__init__()
        self.bootstrap = bootstrap
        self.security = dict(security or {})
        self.topic = topic
        self.partitions = partitions
        self.history = history
        for n in range(1, producers + 1):
            self._thread(f"w-p{n}", self._produce, f"p{n}")
        self._thread("w-reader", self._read)

    def acked(self) -> int:
        return sum(1 for e in list(self.history.entries) if e["type"] == "ok" and e["f"] == "send")

    def acked_since(self, t: float) -> bool:
        """Whether a write invoked at or after monotonic time `t` was acknowledged."""
        invoked = {e["op"] for e in list(self.history.entries)
                   if e["type"] == "invoke" and e["time"] >= t}  # fmt: skip
        return any(e["type"] == "ok" and e["op"] in invoked for e in list(self.history.entries))

    def produce_as(self, name: str, seq: list[int], stop: threading.Event) -> None:
        """Be producer `name` in this thread, from sequence numbers `seq` (one per partition),
        until `stop` (fault_producer.py runs one in a process of its own)."""
        self._stop = stop
        self._produce(name, seq)

    def _produce(self, name: str, seq: list[int] | None = None) -> None:
        """Write round-robin over the partitions without waiting for acknowledgements (each
        outcome is recorded by the future's callback), so a stalled partition does not hold
        up writes to the others; at most MAX_OUTSTANDING writes unresolved at once."""
        seq = list(seq) if seq is not None else [0] * self.partitions
        outstanding = threading.Semaphore(MAX_OUTSTANDING)
        try:
            with Producer(
                bootstrap_servers=self.bootstrap,
                **self.security,
                acks="all",
                linger_ms=2,
                request_timeout_ms=2000,
                delivery_timeout_ms=10_000,
                retry_backoff_ms=50,
            ) as prod:
                i = 0
                while not self._stop.is_set():
                    if not outstanding.acquire(timeout=0.1):
                        continue
                    p = i % self.partitions
                    i += 1
                    value = f"{name}-{seq[p]}"
                    seq[p] += 1
                    op = self.history.invoke(name, "send", p, value)
                    fut = prod.send(self.topic, value.encode(), partition=p)
                    fut.add_done_callback(lambda f, op=op: self._settle(op, f, outstanding))
                    self._stop.wait(PACE_S)  # the write rate (ends at once on stop)
            # closing the producer delivered or failed everything (delivery timeout); the
            # callbacks have run
            for _ in range(MAX_OUTSTANDING):
                if not outstanding.acquire(timeout=30):
                    raise AssertionError(f"{name}: writes still unresolved 30 s after close")
        except BaseException as exc:  # (reported by stop())
            self.errors.append(exc)

    def _settle(self, op: int, fut: Any, outstanding: threading.Semaphore) -> None:
        try:
            exc = fut.exception()
            if exc is None:
                self.history.ok(op, fut.result().offset)
            elif isinstance(exc, NotEnoughReplicasError):
                self.history.fail(op, repr(exc))
            else:  # timeouts, lost connections, AFTER_APPEND: unknown
                self.history.info(op, repr(exc))
        finally:
            outstanding.release()

    def _read(self) -> None:
        try:
            with Consumer(
                bootstrap_servers=self.bootstrap, request_timeout_ms=3000, **self.security
            ) as c:
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


def final_read(
    bootstrap: str,
    topic: str,
    partitions: int,
    timeout: float = 30.0,
    security: Mapping[str, Any] | None = None,
) -> dict:
    """Every partition from log start to its high watermark, read until the HW stays put."""
    out: dict[int, list[tuple[int, str]]] = {}
    deadline = time.monotonic() + timeout
    with Consumer(bootstrap_servers=bootstrap, **(security or {})) as c:
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


def log_order(path: Path) -> tuple[int, str]:
    """A node's log files in the order its processes ran: `broker-4.12.stderr` after
    `broker-4.3.stderr`, `controller-1.run10.stderr` after `controller-1.run2.stderr` (sorted
    by name, the 10th start came before the 2nd and epochs seemed to go back)."""
    m = re.search(r"\.(?:run)?(\d+)\.stderr$", path.name)
    return (int(m[1]) if m else -1, path.name)


def leader_events(stderr_files: dict[int, list[Path]], topic: str) -> list[dict]:
    """ "became leader" lines of each broker's logs, as checker events."""
    events = []
    for node, paths in stderr_files.items():
        for path in sorted(paths, key=log_order):
            for line in path.read_text(errors="replace").splitlines():
                m = _LEADER.search(line)
                if m and m["topic"] == topic:
                    events.append(
                        {
                            "type": "leader",
                            "node": node,
                            "partition": int(m["p"]),
                            "epoch": int(m["epoch"]),
                        }
                    )
    return events


ISR_SAMPLE_S = 0.5


class IsrMonitor(ClientThreads):
    """Samples every partition's leader and ISR from the brokers' metadata every ISR_SAMPLE_S
    into the history (the stall check asks whether the ISR satisfied min ISR while a partition
    took no write). A sample that cannot be had is skipped: the check then has no evidence
    for that time and flags nothing there."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        history: History,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.bootstrap = bootstrap
        self.security = dict(security or {})
        self.topic = topic
        self.history = history
        self._thread("w-isr", self._sample)

    def _sample(self) -> None:
        from client import Admin

        while not self._stop.is_set():
            try:
                with Admin(
                    bootstrap_servers=self.bootstrap, request_timeout_ms=2000, **self.security
                ) as admin:
                    while not self._stop.is_set():
                        parts = admin.describe_topic(self.topic).partitions
                        self.history.isr({p.partition: (p.leader, list(p.isr)) for p in parts})
                        self._stop.wait(ISR_SAMPLE_S)
            except GregorError:
                self._stop.wait(ISR_SAMPLE_S)  # (no sample now: the cluster is in a fault)
