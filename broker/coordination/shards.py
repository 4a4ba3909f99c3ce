"""CoordinatorShards: the partitions of an internal topic this broker leads, and their loading.

    shards = CoordinatorShards(node_id, "__consumer_offsets", replica_manager, image, 50,
                               new_shard=Shard, loader=read_offsets, on_tick=expire,
                               name="group-coordinator")
    publisher.subscribe(shards.on_metadata)   # become / stop being coordinator of partitions
    shards.start() ... shards.shutdown()      # the named thread: loads, then on_tick

A coordinator (groups over `__consumer_offsets`, transactions over `__transaction_state`) keeps
its state per partition of its internal topic: a "shard". While this broker leads a partition
the table holds a shard for it, made by `new_shard(partition, leader_epoch)`; leading it at a
new epoch replaces the shard. A new shard is not loaded: the table's thread reads the
partition from its log start to its end and hands the bytes to `loader`, which rebuilds what
the shard holds (without the lock) and returns how to install it; the table installs it (lock
held) if the shard is still the current one at that epoch, and marks it loaded. A failed load
is retried on the next round. A partition this broker no longer leads loses its shard.

`lock` guards the table and what every shard holds: its users take it around `at` and
whatever they do to the shard. `loader`, `on_tick` and the install run on the table's thread
(tests call `load` directly); `on_metadata` on the metadata publisher's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from broker.log import Log
    from broker.replica import ReplicaManager
    from controller.metadata.image import MetadataImage

log = logging.getLogger(__name__)

LOAD_READ_BYTES = 1024 * 1024  # bytes asked of the log per read while loading
POLL_S = 0.1  # the thread's longest wait between rounds with nothing to load


class Shard(Protocol):
    """What the table needs of a shard; a coordinator's shard adds what it holds."""

    @property
    def partition(self) -> int: ...

    @property
    def leader_epoch(self) -> int: ...

    loaded: bool

    def contents(self) -> str:
        """What it holds, for the log line when it is dropped ("3 groups")."""
        ...


S = TypeVar("S", bound=Shard)


@dataclass(frozen=True)
class Loaded(Generic[S]):
    """What a loader read from a partition: `install` puts it into the shard (lock held, the
    shard current at the epoch it was read for); `summary` says what it was, for the log line
    ("12 records, 3 groups with offsets"), called after `install`."""

    install: Callable[[S], None]
    summary: Callable[[], str]


# (batches read from the partition as (offset asked, bytes), where for warnings) -> Loaded
Loader = Callable[[Iterator[tuple[int, bytes]], str], Loaded[S]]


def read_chunks(log_: Log) -> Iterator[tuple[int, bytes]]:
    """The log from its start to the end it had when called, as (offset asked, whole batches
    from the one holding it); a batch may start before the offset asked."""
    offset, end = log_.log_start_offset, log_.end_offset
    while offset < end:
        got = log_.read(offset, LOAD_READ_BYTES)
        if not got.data:
            return
        yield offset, got.data
        offset = got.next_offset


class CoordinatorShards(Generic[S]):
    def __init__(
        self,
        node_id: int,
        topic: str,
        replica_manager: ReplicaManager,
        image: Callable[[], MetadataImage],
        default_partitions: int,
        *,
        new_shard: Callable[[int, int], S],
        loader: Loader[S],
        on_tick: Callable[[bool], None],
        name: str,
        wait_s: Callable[[], float] = lambda: POLL_S,
    ) -> None:
        """`on_tick(loaded)` runs after every round of the thread (`loaded`: the round loaded
        something); `wait_s()` is how long the next round may wait (at most POLL_S)."""
        self.node_id = node_id
        self.topic = topic
        self.replica_manager = replica_manager
        self._image = image
        self._default_partitions = default_partitions
        self._new_shard = new_shard
        self._loader = loader
        self._on_tick = on_tick
        self._wait_s = wait_s
        self._name = name
        self.lock = threading.Lock()
        self._wake = threading.Condition(self.lock)
        self._shards: dict[int, S] = {}
        self._loads: list[tuple[int, int]] = []  # (partition, leader epoch) to load
        self._stop = False
        self._thread: threading.Thread | None = None
        self.prefix = f"[broker={node_id} {name}]"

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        with self.lock:
            self._stop = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _run(self) -> None:
        while True:
            with self.lock:
                if self._stop:
                    return
                if not self._loads:
                    self._wake.wait(max(0.0, min(POLL_S, self._wait_s())))
                loads, self._loads = self._loads, []
            for p, epoch in loads:
                try:
                    self.load(p, epoch)
                except Exception:
                    log.exception("%s loading %s-%d failed", self.prefix, self.topic, p)
                    with self.lock:
                        self._loads.append((p, epoch))  # retried on the next round
            self._on_tick(bool(loads))

    # -- leadership and loading -----------------------------------------------------------------

    def on_metadata(self, image: MetadataImage, delta: object) -> None:
        """Publisher subscriber (after the ReplicaManager applied the image)."""
        topic = image.topics.get(self.topic)
        parts = topic.partitions if topic is not None else {}
        with self.lock:
            for p, reg in parts.items():
                shard = self._shards.get(p)
                if reg.leader == self.node_id:
                    if shard is None or shard.leader_epoch != reg.leader_epoch:
                        self._shards[p] = self._new_shard(p, reg.leader_epoch)
                        self._loads.append((p, reg.leader_epoch))
                        self._wake.notify_all()
                elif shard is not None:
                    del self._shards[p]
                    log.info("%s no longer coordinator of %s-%d (%s dropped)",
                             self.prefix, self.topic, p, shard.contents())  # fmt: skip
            for p in [p for p in self._shards if p not in parts]:
                del self._shards[p]

    def load(self, p: int, epoch: int) -> None:
        """Rebuild partition `p`'s shard from its log, if this broker still leads it at
        `epoch`; the shard is then loaded. Runs on the table's thread (tests call it)."""
        start = time.monotonic()
        part = self.replica_manager.get_partition(self.topic, p)
        if part is None or not part.is_leader or part.leader_epoch != epoch:
            return
        got = self._loader(read_chunks(part.log), f"{self.prefix} {self.topic}-{p}")
        with self.lock:
            shard = self._shards.get(p)
            if shard is None or shard.leader_epoch != epoch:
                return
            got.install(shard)
            shard.loaded = True
            summary = got.summary()
        log.info("%s coordinator of %s-%d (leader epoch %d): loaded %s, in %.0f ms",
                 self.prefix, self.topic, p, epoch, summary,
                 (time.monotonic() - start) * 1000)  # fmt: skip

    # -- lookups (lock held) ----------------------------------------------------------------------

    def at(self, p: int) -> S | None:
        """The shard of partition `p`, loaded or not; None when this broker does not lead it."""
        return self._shards.get(p)

    def is_current(self, shard: S) -> bool:
        """Whether `shard` is still the one this broker coordinates: false once leadership of
        its partition moved, even if it came back at a later epoch."""
        return self._shards.get(shard.partition) is shard

    def all(self) -> Iterator[S]:
        """Every shard."""
        return iter(list(self._shards.values()))

    def loaded(self) -> Iterator[S]:
        """The loaded shards."""
        return (s for s in self.all() if s.loaded)

    def num_partitions(self) -> int:
        """The topic's partition count: the image's, else the configured one (no topic yet)."""
        topic = self._image().topics.get(self.topic)
        return len(topic.partitions) if topic is not None else self._default_partitions
