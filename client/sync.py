"""Synchronous facade: the asyncio core on one background event-loop thread per client object.

    from client import Producer, Consumer, Admin
    with Producer({"bootstrap.servers": "localhost:9092"}) as p:
        p.send("t", b"v").result(10)        # a concurrent.futures.Future -> RecordMetadata

Same names and arguments as `client.aio`; every coroutine becomes a blocking method.
`Producer.send()` appends to the accumulator directly from the caller's thread when the
topic's metadata is known and the buffer has room (no thread hop per record), else it waits on
the loop. Consumer.poll() decodes on the loop thread and hands back a list.

Any thread may call these methods; close() stops the loop thread (also on garbage collection).
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from client import aio
from client.aio.accumulator import RECORD_OVERHEAD
from client.aio.admin_groups import GroupDescription, GroupListing
from client.aio.admin_quorum import QuorumDescription
from client.aio.admin_quotas import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilterComponent,
)
from client.aio.admin_txn import ProducerState, TransactionDescription, TransactionListing
from client.aio.admin_users import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from client.aio.futures import FUTURE_PROTOTYPE, DeliveryFuture
from client.aio.group import Callback, GroupEvent
from client.aio.types import (
    ConfigEntry,
    ConsumerGroupMetadata,
    ConsumerRecord,
    RecordMetadata,
    TopicPartition,
)
from client.errors import GregorError
from client.records.extensions import optional_extension
from client.security.acl import AclBinding, AclBindingFilter
from client.sync_loop import SyncClient

log = logging.getLogger(__name__)
T = TypeVar("T")

# Producer.send()'s common case in C (client/records/_append.c): a bytes value appended to the
# sticky partition's open batch, the future made without __init__
_append_ext = optional_extension("client.records._append")
_append_plain: (
    Callable[[tuple[object, ...], str, bytes, int | None], DeliveryFuture | None] | None
) = getattr(_append_ext, "append_plain", None)


class Producer(SyncClient):
    """Blocking producer; `send()` returns a concurrent.futures.Future of RecordMetadata."""

    _core_cls = aio.Producer
    _core: aio.Producer
    _role = "producer"

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        core = self._core
        # what _append_plain reads and writes (client/records/_append.c)
        acc = core._acc
        # every future this facade puts in a batch is a DeliveryFuture, out of the cyclic GC
        # while it runs, and `_abandon` fails what is queued when the loop stops: the batches
        # and their lists of futures can be out of it too (client/aio/accumulator.py)
        acc.untracked_batches = True
        self._plain_ctx = (
            core,
            acc,
            core._cluster,
            core._sticky._current,
            FUTURE_PROTOTYPE,
            RECORD_OVERHEAD,
            acc.lock,  # (these are set once, in the constructors)
            acc.batches,
            core._plain_topics,
            core._max_record,
            acc.buffer_memory,
            acc.batch_size,
        )
        # closed or garbage-collected without close(): once the loop stops, no record's future
        # is left running (client/aio/futures.py relies on it to keep them out of the GC)
        self._lt.at_stop.append(core._abandon)
        try:
            self._run(self._core.start())
        except BaseException:
            self.close()
            raise

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamp_ms: int | None = None,
    ) -> concurrent.futures.Future[RecordMetadata]:
        """Queue one record; a concurrent.futures.Future of its RecordMetadata. (With the C
        extension built, a method descriptor of client/records/_append.c's producer_send runs
        instead: it does the first branch below in C and calls this method for the rest.)"""
        core = self._core
        # (chained: key, headers and timestamp_ms all None)
        if type(value) is bytes and key is headers is timestamp_ms is None and core._plain:
            if _append_plain is not None:  # the common case in one C call, else None
                fut = _append_plain(self._plain_ctx, topic, value, partition)
                if fut is not None:
                    return fut
            return self._send_plain_slow(topic, value, partition)
        fut = DeliveryFuture()
        rec = core._prepare(topic, value, key, headers, timestamp_ms)
        if core._try_append(topic, partition, rec, fut) != "ok":
            self._run(core._send_into(fut, topic, value, key, partition, headers, timestamp_ms))
        return fut

    def _send_plain_slow(
        self, topic: str, value: bytes, partition: int | None
    ) -> concurrent.futures.Future[RecordMetadata]:
        """send() of a bytes value with no key, headers or timestamp that the C append did
        not take (a new batch, a full one, stale metadata, the lock held, ...)."""
        core = self._core
        fut = DeliveryFuture()  # a concurrent.futures.Future; delivery cannot be cancelled
        if core._append_plain(topic, value, fut, partition):  # (caches what the C call reads)
            return fut
        rec = core._prepare(topic, value, None, None, None)
        if core._try_append(topic, partition, rec, fut) != "ok":
            self._run(core._send_into(fut, topic, value, None, partition, None, None))
        return fut

    def send_many(
        self, topic: str, values_or_pairs: Iterable[Any], partition: int | None = None
    ) -> concurrent.futures.Future[int]:
        """Queue many records (values or (key, value) pairs) with one future for the call,
        resolving to the record count once all are acknowledged."""
        core = self._core
        fut: concurrent.futures.Future[int] = concurrent.futures.Future()
        fut.set_running_or_notify_cancel()
        items = values_or_pairs if isinstance(values_or_pairs, list) else list(values_or_pairs)
        acc = core._acc
        n = core._cluster.metadata.num_partitions(topic)
        if (
            n
            and (partition is None or partition < n)  # else: wait on the loop for it to appear
            and (acc.buffered == 0 or acc.buffered < core.settings.buffer_memory)
        ):
            core._bulk_nowait(fut, topic, items, partition)
        else:
            self._run(core._send_many_into(fut, topic, items, partition))
        return fut

    def flush(self, timeout: float | None = None) -> None:
        self._run(self._core.flush(timeout))

    # transactions: as client.aio.Producer's (docs/transactions.md, "The producer")
    def init_transactions(self) -> None:
        self._run(self._core.init_transactions())

    def begin_transaction(self) -> None:
        self._run(_call(self._core.begin_transaction))

    def commit_transaction(self) -> None:
        self._run(self._core.commit_transaction())

    def abort_transaction(self) -> None:
        self._run(self._core.abort_transaction())

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        self._run(self._core.send_offsets_to_transaction(offsets, group_metadata))

    def partitions_for(self, topic: str) -> list[int]:
        return self._run(self._core.partitions_for(topic))

    def metrics(self) -> dict[str, dict[str, float]]:
        """See client.aio.Producer.metrics (read on the client's loop thread)."""
        return self._run(_call(self._core.metrics))


# Producer.send as a method descriptor of a C function (client/records/_append.c, bind_send):
# a plain `producer.send(topic, value)` then runs with no Python frame of its own (~0.15 us a
# record); the Python method above stays the fallback for every other call.
_bind_send: Callable[..., object] | None = getattr(_append_ext, "bind_send", None)
if _bind_send is not None and _append_plain is not None:
    setattr(  # noqa: B010 (a method replaced on the class: no static type for it)
        Producer, "send", _bind_send(Producer, Producer.send)
    )


class Consumer(SyncClient):
    """Blocking consumer; iteration yields ConsumerRecords (polling 1 s at a time)."""

    _core_cls = aio.Consumer
    _core: aio.Consumer
    _role = "consumer"

    def __init__(self, *topics: Any, **kwargs: Any) -> None:
        super().__init__(*topics, **kwargs)
        self._pending: list[ConsumerRecord] = []

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._run(_call(self._core.assign, list(partitions)))

    def subscribe(
        self,
        topics: Iterable[str] | re.Pattern[str],
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
    ) -> None:
        """As client.aio.Consumer.subscribe; the callbacks run from poll() in this thread."""
        if not isinstance(topics, (str, re.Pattern)):
            topics = list(topics)
        self._run(_call(self._core.subscribe, topics, on_assign, on_revoke, on_lost))

    def unsubscribe(self) -> None:
        """In a group: commit (enable.auto.commit), run on_revoke here, leave at once."""
        self._leave_group()
        self._run(_call(self._core.unsubscribe))

    def _leave_group(self) -> None:
        ev = self._run(self._core._leave_prepare())
        try:
            if ev is not None and ev.callback is not None:
                ev.callback(list(ev.partitions))
        finally:
            self._run(self._core._leave_finish())

    def subscription(self) -> set[str]:
        return self._core.subscription()

    def assignment(self) -> set[TopicPartition]:
        return self._run(_call(self._core.assignment))

    def metrics(self) -> dict[str, dict[str, float]]:
        """See client.aio.Consumer.metrics (read on the client's loop thread)."""
        return self._run(_call(self._core.metrics))

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records, after running any group callback (on_assign/on_revoke/on_lost) here, in
        the caller's thread."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            got = self._run(self._core._poll((deadline - time.monotonic()) * 1000, max_records))
            if not isinstance(got, GroupEvent):
                return got
            try:
                if got.callback is not None:
                    got.callback(list(got.partitions))
            finally:
                self._run(self._core._event_done(got))

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, asynchronous: bool = False
    ) -> None:
        """Commit `offsets` ({tp: next offset}), default every assigned partition's position.
        asynchronous=True returns at once (a failure is logged)."""
        self._run(self._core.commit(offsets, asynchronous))

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return self._run(self._core.committed(list(partitions)))

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For Producer.send_offsets_to_transaction (reads the member's id and epoch)."""
        return self._core.group_metadata()

    def close(self, timeout: float | None = None) -> None:
        """Commit (enable.auto.commit), run on_revoke here, leave the group at once, close."""
        if self._closed:
            return
        try:
            self._leave_group()
        finally:
            super().close(timeout)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while not self._closed:
            if not self._pending:
                self._pending = self.poll(timeout_ms=1000)[::-1]
                continue
            yield self._pending.pop()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._run(_call(self._core.seek, tp, offset))

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        self._run(self._core.seek_to_beginning(*tps))

    def seek_to_end(self, *tps: TopicPartition) -> None:
        self._run(self._core.seek_to_end(*tps))

    def position(self, tp: TopicPartition) -> int:
        return self._run(self._core.position(tp))

    def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._core.beginning_offsets(list(tps)))

    def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._core.end_offsets(list(tps)))

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        return self._run(self._core.offsets_for_times(dict(timestamps)))

    def pause(self, *tps: TopicPartition) -> None:
        self._run(_call(self._core.pause, *tps))

    def resume(self, *tps: TopicPartition) -> None:
        self._run(_call(self._core.resume, *tps))

    def paused(self) -> set[TopicPartition]:
        return self._run(_call(self._core.paused))

    def topics(self) -> list[str]:
        return self._run(self._core.topics())

    def partitions_for_topic(self, topic: str) -> list[int]:
        return self._run(self._core.partitions_for_topic(topic))


class Admin(SyncClient):
    """Blocking admin client."""

    _core_cls = aio.Admin
    _core: aio.Admin
    _role = "admin"

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, str] | None = None,
        **kw: Any,
    ) -> None:
        self._run(self._core.create_topic(name, partitions, replication_factor, config, **kw))

    def create_partitions(
        self,
        topic: str,
        total_count: int,
        assignments: Iterable[Iterable[int]] | None = None,
        **kw: Any,
    ) -> None:
        self._run(self._core.create_partitions(topic, total_count, assignments, **kw))

    def delete_topic(self, name: str, **kw: Any) -> None:
        self._run(self._core.delete_topic(name, **kw))

    def elect_leaders(
        self, partitions: Iterable[TopicPartition] | None = None, **kw: Any
    ) -> dict[TopicPartition, Exception | None]:
        """Preferred or unclean leader election (see client.aio.Admin.elect_leaders)."""
        return self._run(self._core.elect_leaders(partitions, **kw))

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None], **kw: Any
    ) -> dict[TopicPartition, Exception | None]:
        """Start, replace (target list) or cancel (None) reassignments (see
        client.aio.Admin.alter_partition_reassignments)."""
        return self._run(self._core.alter_partition_reassignments(dict(reassignments), **kw))

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None, **kw: Any
    ) -> dict[TopicPartition, aio.PartitionReassignment]:
        """The reassignments in flight (see client.aio.Admin.list_partition_reassignments)."""
        return self._run(self._core.list_partition_reassignments(partitions, **kw))

    def describe_log_dirs(
        self, brokers: Iterable[int], **kw: Any
    ) -> dict[int, dict[str, aio.LogDirDescription]]:
        """Each broker's log dirs and replica sizes (see client.aio.Admin.describe_log_dirs)."""
        return self._run(self._core.describe_log_dirs(brokers, **kw))

    def list_topics(self) -> list[str]:
        return self._run(self._core.list_topics())

    def describe_topic(self, name: str) -> aio.TopicDescription:
        return self._run(self._core.describe_topic(name))

    def list_groups(self) -> list[GroupListing]:
        return self._run(self._core.list_groups())

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int = -1
    ) -> list[TransactionListing]:
        return self._run(self._core.list_transactions(states, producer_ids, duration_ms))

    def describe_transactions(
        self, transactional_ids: Iterable[str], *, timeout_ms: int | None = None
    ) -> dict[str, TransactionDescription]:
        ids = list(transactional_ids)
        return self._run(self._core.describe_transactions(ids, timeout_ms=timeout_ms))

    def describe_producers(
        self, partitions: Iterable[TopicPartition], *, timeout_ms: int | None = None
    ) -> dict[TopicPartition, list[ProducerState]]:
        """Each partition's active producers at its leader (see
        client.aio.Admin.describe_producers)."""
        tps = list(partitions)
        return self._run(self._core.describe_producers(tps, timeout_ms=timeout_ms))

    def abort_transaction(
        self,
        partition: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """An ABORT marker for the producer to the partition (see
        client.aio.Admin.abort_transaction)."""
        return self._run(
            self._core.abort_transaction(
                partition, producer_id, producer_epoch, coordinator_epoch, timeout_ms=timeout_ms
            )
        )

    def describe_user_scram_credentials(
        self, users: list[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        return self._run(self._core.describe_user_scram_credentials(users))

    def alter_user_scram_credentials(
        self,
        upsertions: list[UserScramCredentialUpsertion] = (),  # type: ignore[assignment]
        deletions: list[UserScramCredentialDeletion] = (),  # type: ignore[assignment]
    ) -> dict[str, GregorError | None]:
        return self._run(self._core.alter_user_scram_credentials(upsertions, deletions))

    def create_user(
        self, name: str, password: str, mechanism: str = "SCRAM-SHA-512", iterations: int = 8192
    ) -> None:
        self._run(self._core.create_user(name, password, mechanism, iterations))

    def delete_user(self, name: str) -> None:
        self._run(self._core.delete_user(name))

    def list_users(self) -> dict[str, list[ScramCredentialInfo]]:
        return self._run(self._core.list_users())

    def create_acls(self, bindings: list[AclBinding]) -> dict[AclBinding, GregorError | None]:
        return self._run(self._core.create_acls(bindings))

    def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        return self._run(self._core.describe_acls(acl_filter))

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        return self._run(self._core.delete_acls(filters))

    def describe_client_quotas(
        self, components: Sequence[ClientQuotaFilterComponent] = (), strict: bool = False
    ) -> dict[ClientQuotaEntity, dict[str, float]]:
        return self._run(self._core.describe_client_quotas(components, strict))

    def alter_client_quotas(
        self, alterations: Sequence[ClientQuotaAlteration], validate_only: bool = False
    ) -> dict[ClientQuotaEntity, GregorError | None]:
        return self._run(self._core.alter_client_quotas(alterations, validate_only))

    def describe_group(self, group_id: str, **kw: Any) -> GroupDescription:
        return self._run(self._core.describe_group(group_id, **kw))

    def delete_group(self, group_id: str, **kw: Any) -> None:
        self._run(self._core.delete_group(group_id, **kw))

    def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        self._run(self._core.delete_group_offsets(group_id, list(partitions)))

    def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], **kw: Any
    ) -> None:
        self._run(self._core.alter_group_offsets(group_id, dict(offsets), **kw))

    def describe_cluster(self, *, include_fenced: bool = False) -> aio.ClusterDescription:
        """Cluster id, active controller and brokers (see client.aio.Admin.describe_cluster)."""
        return self._run(self._core.describe_cluster(include_fenced=include_fenced))

    def list_offsets(self, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        return self._run(self._core.list_offsets(dict(query)))

    def delete_records(
        self, offsets: Mapping[TopicPartition, int], **kw: Any
    ) -> dict[TopicPartition, int]:
        """{tp: offset (-1 = last stable offset)} -> {tp: low watermark} (see
        client.aio.Admin.delete_records)."""
        return self._run(self._core.delete_records(dict(offsets), **kw))

    def describe_quorum(self, **kw: Any) -> QuorumDescription:
        """The metadata quorum (see client.aio.Admin.describe_quorum)."""
        return self._run(self._core.describe_quorum(**kw))

    def describe_configs(
        self,
        topics: Iterable[str] = (),
        brokers: Iterable[int] = (),
        keys: Iterable[str] | None = None,
    ) -> dict[tuple[str, str], dict[str, ConfigEntry]]:
        """{("topic", name) | ("broker", id): {key: ConfigEntry}} (see client.aio.Admin)."""
        return self._run(self._core.describe_configs(list(topics), list(brokers), keys))

    def incremental_alter_configs(
        self, changes: Mapping[tuple[str, str], Mapping[str, Any]], **kw: Any
    ) -> None:
        """Set (value) or delete (None) configs of topics or brokers (see client.aio.Admin)."""
        return self._run(self._core.incremental_alter_configs(changes, **kw))


async def _call(fn: Callable[..., T], *args: Any) -> T:
    """Run a plain (loop-owned) method on the loop thread."""
    return fn(*args)
