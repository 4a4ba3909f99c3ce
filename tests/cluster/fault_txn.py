"""The fault harness's transactional workload (issue 29; docs/fault-harness.md, "Transactions"):
confluent-kafka (librdkafka) transactional producers over the brokers' KAFKA listeners, each
transaction writing several records over several partitions of TXN_TOPIC, each record naming
its transaction (`{transaction}:{i}`, the transaction `{producer}-{n}`), committed or aborted
at random (a seeded RNG per producer); a read_committed reader throughout; a read_committed
final read after heal. The history (fault_history.py) gets one op per transaction:

    {"type": "invoke", "op": 9, "process": "t1", "f": "txn", "txn": "t1-4", "commit": true,
     "values": {"0": ["t1-4:0", "t1-4:3"], "1": ["t1-4:1"], "2": ["t1-4:2"]}, "time": ...}
    then "ok" (committed), "fail" (aborted: it never committed) or "info" (unknown)

and the reader's records as {"type": "ok", "f": "tpoll", "partition", "offset", "value"}.
Outcomes: commit_transaction returned: committed. abort_transaction returned, or the
transaction was meant to abort (EndTxn(commit) was never sent, so whatever happens it ends
aborted, by the producer, by its successor's InitProducerId or by the coordinator's timeout):
aborted. A commit that failed with an error requiring an abort, then aborted: aborted. A
commit that failed otherwise (a timeout, a fatal error: the EndTxn may have been applied):
unknown; the producer is then replaced by a new one with the same transactional.id (fencing
the old one and ending its transaction). `fence(name)` makes a zombie (Kafka's fencing): the
producer's next transaction is written, a new producer of the same id initialised, then the
old one's commit must be refused (aborted: `fail`; a commit that returns is `ok`, and the
checker finds its records aborted). The checks are fault_checker.check_transactions.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from fault_history import History

TXN_TOPIC = "chaos-txn"
TXN_TIMEOUT_MS = 10_000  # a transaction of a vanished producer is aborted after this
OP_TIMEOUT_S = 10.0  # init / commit / abort
MAX_RECORDS = 6


def _ck() -> Any:
    import confluent_kafka  # (only where the workload runs: the scenario's `missing` says)

    return confluent_kafka


def missing_confluent() -> str | None:
    try:
        _ck()
    except ImportError:
        return "confluent_kafka is not installed"
    return None


class TxnWorkload:
    def __init__(
        self, bootstrap: str, partitions: int, history: History, seed: int, producers: int = 2
    ) -> None:
        """`bootstrap`: the KAFKA listeners; `seed`: each producer's RNG is seeded from it."""
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.history = history
        self.seed = seed
        self.stop_event = threading.Event()
        self.errors: list[BaseException] = []
        self.counts = {"ok": 0, "fail": 0, "info": 0}
        self.fenced = 0  # zombies whose commit was refused (fence())
        self.threads = [
            threading.Thread(
                target=self._guard, args=(self._produce, f"t{i + 1}"), name=f"t{i + 1}"
            )
            for i in range(producers)
        ] + [threading.Thread(target=self._guard, args=(self._read, "tr1"), name="tr1")]

        self._fence = {f"t{i + 1}": threading.Event() for i in range(producers)}

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(OP_TIMEOUT_S * 6)
        assert not any(t.is_alive() for t in self.threads), "txn workload threads did not stop"
        assert not self.errors, self.errors

    def committed(self) -> int:
        return self.counts["ok"]

    def _guard(self, target: Any, name: str) -> None:
        try:
            target(name)
        except BaseException as exc:  # (reported by stop())
            self.errors.append(exc)

    def _producer(self, name: str) -> Any:
        """A new producer under the id `name`, its transactions initialised (fencing any
        earlier one); None if the workload stops first."""
        ck = _ck()
        while not self.stop_event.is_set():
            p = ck.Producer(
                {"bootstrap.servers": self.bootstrap, "transactional.id": name,
                 "linger.ms": 2, "transaction.timeout.ms": TXN_TIMEOUT_MS,
                 "message.timeout.ms": TXN_TIMEOUT_MS, "request.timeout.ms": 2000,
                 "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 1000,
                 "log_level": 3}
            )  # fmt: skip
            try:
                p.init_transactions(OP_TIMEOUT_S)
                return p
            except ck.KafkaException:
                self.stop_event.wait(0.2)  # (a coordinator failing over): a new producer
        return None

    def _produce(self, name: str) -> None:
        rng = random.Random(f"{self.seed}-{name}")
        p = self._producer(name)
        n = 0
        while p is not None and not self.stop_event.is_set():
            txn = f"{name}-{n}"
            n += 1
            count = rng.randint(2, MAX_RECORDS)
            first = rng.randrange(self.partitions)
            values: dict[int, list[str]] = {}
            for i in range(count):
                values.setdefault((first + i) % self.partitions, []).append(f"{txn}:{i}")
            commit = rng.random() < 0.7
            op = self.history.txn(name, txn, values, commit)
            if commit and self._fence[name].is_set():
                self._fence[name].clear()
                kind, error, p = self._zombie(p, name, values)
            else:
                kind, error = self._one(p, values, commit)
                if error is not None and kind != "ok":
                    p = self._producer(name)  # the old one may be in an error state: fence it
            self.history.txn_done(op, kind, error)
            self.counts[kind] += 1
            self.stop_event.wait(0.01)

    def fence(self, name: str) -> None:
        """Producer `name`'s next transaction meant to commit is left to a zombie: its records
        are written, then a new producer of the same id is initialised (bumping the epoch and
        aborting the transaction), then the old one commits, which must be refused."""
        self._fence[name].set()

    def _zombie(self, p: Any, name: str, values: dict[int, list[str]]) -> tuple[str, str, Any]:
        """(outcome, error, the producer to go on with)."""
        ck = _ck()
        try:
            p.begin_transaction()
            for part, vs in values.items():
                for v in vs:
                    p.produce(TXN_TOPIC, v.encode(), partition=part)
            p.flush(OP_TIMEOUT_S)
        except ck.KafkaException as exc:
            return "fail", f"before the fence: {exc.args[0]}", self._producer(name)
        new = self._producer(name)  # None: stopped before it was initialised (no fence)
        try:
            p.commit_transaction(OP_TIMEOUT_S)
        except ck.KafkaException as exc:
            if new is None:
                return "info", f"unfenced zombie's commit: {exc.args[0]}", None
            self.fenced += 1
            return "fail", f"zombie fenced: {exc.args[0]}", new
        return "ok", "a zombie's commit returned", new

    def _one(self, p: Any, values: dict[int, list[str]], commit: bool) -> tuple[str, str | None]:
        """One transaction's outcome: ("ok" | "fail" | "info", the error or None)."""
        ck = _ck()
        try:
            p.begin_transaction()
            for part, vs in values.items():
                for v in vs:
                    p.produce(TXN_TOPIC, v.encode(), partition=part)
            if not commit:
                p.flush(OP_TIMEOUT_S)  # (else librdkafka purges what it has not sent)
                p.abort_transaction(OP_TIMEOUT_S)
                return "fail", None
            p.commit_transaction(OP_TIMEOUT_S)
            return "ok", None
        except ck.KafkaException as exc:
            err = exc.args[0]
            if not commit:
                return "fail", f"aborting: {err}"  # never committed, whatever happens now
            if err.txn_requires_abort():
                try:
                    p.abort_transaction(OP_TIMEOUT_S)
                    return "fail", f"aborted after: {err}"
                except ck.KafkaException as exc2:
                    return "info", f"{err}; abort: {exc2.args[0]}"
            if err.retriable():  # librdkafka: a retriable commit may be retried
                try:
                    p.commit_transaction(OP_TIMEOUT_S)
                    return "ok", None
                except ck.KafkaException as exc2:
                    return "info", f"{err}; retry: {exc2.args[0]}"
            return "info", str(err)

    def _read(self, name: str) -> None:
        ck = _ck()
        c = ck.Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "txn-reader-unused",
             "enable.auto.commit": False, "isolation.level": "read_committed",
             "topic.metadata.refresh.interval.ms": 1000, "log_level": 3}
        )  # fmt: skip
        try:
            c.assign([ck.TopicPartition(TXN_TOPIC, p, 0) for p in range(self.partitions)])
            while not self.stop_event.is_set():
                for m in c.consume(500, timeout=0.1):
                    if m.error() is None:
                        self.history.tpolled(name, m.partition(), m.offset(), m.value().decode())
        finally:
            c.close()


def txn_final_read(
    bootstrap: str, partitions: int, isolation: str = "read_committed", timeout: float = 45.0
) -> dict[int, list[tuple[int, str]]]:
    """Every record of TXN_TOPIC under `isolation`, read until each partition's end is reached
    at its high watermark (every transaction decided: the last stable offset is the HW; an
    open one left by a vanished producer is aborted after TXN_TIMEOUT_MS)."""
    ck = _ck()
    c = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"txn-final-{isolation}",
         "enable.auto.commit": False, "isolation.level": isolation,
         "enable.partition.eof": True, "log_level": 3}
    )  # fmt: skip
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    try:
        hw = _high_watermarks(bootstrap, partitions)
        c.assign([ck.TopicPartition(TXN_TOPIC, p, 0) for p in range(partitions)])
        done: set[int] = set()
        while len(done) < partitions:
            assert time.monotonic() < deadline, f"final read: only {sorted(done)} reached the end"
            for m in c.consume(500, timeout=0.2):
                if m.error() is None:
                    out[m.partition()].append((m.offset(), m.value().decode()))
                elif (
                    m.error().code() == ck.KafkaError._PARTITION_EOF
                    and m.offset() >= hw[m.partition()]
                ):
                    done.add(m.partition())
    finally:
        c.close()
    return out


def _high_watermarks(bootstrap: str, partitions: int) -> dict[int, int]:
    ck = _ck()
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-hw", "log_level": 3})
    try:
        return {
            p: c.get_watermark_offsets(ck.TopicPartition(TXN_TOPIC, p), timeout=10, cached=False)[1]
            for p in range(partitions)
        }
    finally:
        c.close()
