"""Cluster metadata cache and the connection manager every client object owns.

`ClusterMetadata` is an immutable snapshot (brokers, topics -> partitions -> leader); it is
replaced as a whole on refresh, so readers on other threads (the sync facade's fast path) may
read `ClusterClient.metadata` without a lock.

`ClusterClient` keeps one `BrokerConnection` per broker node (plus bootstrap connections),
refreshes metadata on demand (coalescing concurrent refreshes), when it is older than
metadata.max.age.ms, and when callers report NOT_LEADER_OR_FOLLOWER /
UNKNOWN_TOPIC_OR_PARTITION (`request_update()`). A topic met for the first time while the rest
is fresh is asked for alone (Kafka's KIP-526): a producer writing to its 50th topic does not
fetch the other 49 again, so starting on N topics costs N topics of answers, not N²/2.
Loop-owned: call it on its event loop only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypeVar

from client.aio.connection import BrokerConnection
from client.aio.link_settings import ClusterSettings
from client.aio.retry_log import RetryLog
from client.aio.types import BrokerDescription, TopicPartition
from client.errors import (
    BrokerResponseError,
    ClientClosedError,
    ConnectionFailedError,
    GregorError,
    GregorTimeoutError,
    LocalError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from client.protocol import ApiKey
from client.protocol.body import Body

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int  # -1 when offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True)
class ClusterMetadata:
    brokers: dict[int, BrokerDescription] = field(default_factory=dict)
    topics: dict[str, tuple[PartitionInfo, ...]] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)
    cluster_id: str | None = None
    controller_id: int = -1
    updated_at: float = 0.0  # time.monotonic() of the refresh; 0 = never
    _available: dict[str, list[int]] = field(default_factory=dict, compare=False, repr=False)
    # topic -> the id the controller gave it (Kafka's text form); absent when the broker
    # did not say (an older broker)
    topic_ids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_response(
        cls, body: Body, previous: ClusterMetadata | None, full: bool, keep_age: bool = False
    ) -> ClusterMetadata:
        """Merge a Metadata response into `previous` (replacing it when `full`). `keep_age`:
        the response covers only some of the topics (the rest is as old as before), so
        `updated_at` stays `previous`'s."""
        brokers = {
            b["node_id"]: BrokerDescription(b["node_id"], b["host"], b["port"], b["rack"])
            for b in body["brokers"]
        }
        topics = {} if full or previous is None else dict(previous.topics)
        errors = {} if full or previous is None else dict(previous.topic_errors)
        ids = {} if full or previous is None else dict(previous.topic_ids)
        for t in body["topics"]:
            name = t["name"]
            if t["error_code"] != 0:
                errors[name] = t["error_code"]
                topics.pop(name, None)
                ids.pop(name, None)
                continue
            errors.pop(name, None)
            tid = t.get("topic_id")
            if tid:
                ids[name] = tid
            else:
                ids.pop(name, None)
            topics[name] = tuple(
                sorted(
                    (
                        PartitionInfo(
                            p["partition"],
                            p["leader_id"],
                            p["leader_epoch"],
                            tuple(p["replica_nodes"]),
                            tuple(p["isr_nodes"]),
                            p["error_code"],
                        )
                        for p in t["partitions"]
                    ),
                    key=lambda p: p.partition,
                )
            )
        updated_at = previous.updated_at if keep_age and previous is not None else 0.0
        return cls(
            brokers,
            topics,
            errors,
            body["cluster_id"],
            body["controller_id"],
            updated_at or time.monotonic(),
            topic_ids=ids,
        )

    def partitions_for(self, topic: str) -> list[int] | None:
        parts = self.topics.get(topic)
        return None if parts is None else [p.partition for p in parts]

    def num_partitions(self, topic: str) -> int:
        parts = self.topics.get(topic)
        return 0 if parts is None else len(parts)

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions of `topic` with a leader (memoized: the snapshot never changes)."""
        got = self._available.get(topic)
        if got is None:
            got = [p.partition for p in self.topics.get(topic, ()) if p.leader >= 0]
            self._available[topic] = got
        return got

    def leader_epoch_for(self, tp: TopicPartition) -> int:
        """The partition's leader epoch in this metadata (-1 when unknown)."""
        parts = self.topics.get(tp.topic)
        if parts is None or not 0 <= tp.partition < len(parts):
            return -1
        p = parts[tp.partition]
        return p.leader_epoch if p.partition == tp.partition else -1

    def leader_for(self, tp: TopicPartition) -> int:
        parts = self.topics.get(tp.topic)
        if parts is None or not 0 <= tp.partition < len(parts):
            return -1
        p = parts[tp.partition]
        return p.leader if p.partition == tp.partition else -1


_T = TypeVar("_T")


def _retrieve(task: asyncio.Task[_T]) -> None:
    """Mark a shared task's exception as seen: every waiter gets it through shield()."""
    if not task.cancelled():
        task.exception()


class ClusterClient:
    """Connections and metadata for one client object. Loop-owned."""

    def __init__(self, config: SimpleNamespace, *, allow_auto_topic_creation: bool = False) -> None:
        """With `allow_auto_topic_creation` (a producer's allow.auto.create.topics), Metadata
        requests let the broker create missing topics when its auto.create.topics.enable is
        set, as Kafka's producer does."""
        self.settings = ClusterSettings.from_config(config)  # (config: resolve_config's)
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.metadata = ClusterMetadata()
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._bootstrap = list(self.settings.bootstrap_servers)
        self._bootstrap_conn: BrokerConnection | None = None
        self._refresh_task: asyncio.Task[ClusterMetadata] | None = None
        self._need_update = True  # every topic must be asked for again (an error, a new client)
        self._topics: set[str] = set()  # topics this client cares about (None = all)
        self._new_topics: set[str] = set()  # of those, the ones not asked for yet
        self._all_topics = False
        self._closed = False
        self._backoff_until: dict[int, float] = {}
        self._failures: dict[int, int] = {}
        self._avoid: int | None = None  # a broker not to ask for the next metadata
        # Second connections for group coordination (see coordinator_connection)
        self._coord_conns: dict[int, BrokerConnection] = {}
        self._coord_lock = asyncio.Lock()
        # waits for a topic's metadata that keep failing (client/aio/retry_log.py)
        self.retry_log = RetryLog(log)

    # -- topics of interest ----------------------------------------------------------------------

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track `topics`; True if any is new (metadata needs a refresh: of the new ones alone
        when the rest is fresh)."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self._new_topics |= new
        return bool(new)

    def request_update(self, avoid: int | None = None) -> None:
        """Ask for a refresh before the next use (after NOT_LEADER / UNKNOWN_TOPIC errors).
        `avoid`: a broker whose view is in doubt (a leader that timed out or said it no longer
        leads); the refresh asks another broker when one answers."""
        self._need_update = True
        if avoid is not None:
            self._avoid = avoid

    @property
    def stale(self) -> bool:
        return self._need_update or bool(self._new_topics) or self._aged

    @property
    def _aged(self) -> bool:
        age_ms = (time.monotonic() - self.metadata.updated_at) * 1000
        return age_ms > self.settings.metadata_max_age_ms

    # -- metadata ------------------------------------------------------------------------------

    async def refresh(
        self, topics: Iterable[str] | None = None, *, all_topics: bool = False
    ) -> ClusterMetadata:
        """Fetch metadata now (joining a refresh already in flight for the same question)."""
        self._check_open()
        if topics is not None:
            self.add_topics(topics)
        if all_topics:
            return await self._fetch_metadata(None)
        task = self._refresh_task
        if task is None or task.done():
            if self._need_update or self._aged or not self._new_topics:
                ask, partial = sorted(self._topics), False
            else:  # the rest is fresh: only the topics not asked for yet (KIP-526)
                ask, partial = sorted(self._new_topics), True
            task = self._refresh_task = asyncio.ensure_future(self._fetch_metadata(ask, partial))
            task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    async def fetch_topics(self, topics: Iterable[str]) -> ClusterMetadata:
        """Fetch metadata of exactly `topics` now, merged into what is known (an admin waiting
        for one new topic asks for that one: not for every topic it knew before, whose
        answer grows with the cluster). They are added to the topics later refreshes ask
        for, as refresh(topics) does (what follows, e.g. offsets, may need them again)."""
        self._check_open()
        topics = list(topics)
        self.add_topics(topics)
        return await self._fetch_metadata(sorted(set(topics)), partial=True)

    async def maybe_refresh(self) -> ClusterMetadata:
        if self.stale:
            return await self.refresh()
        return self.metadata

    async def _fetch_metadata(
        self, topics: list[str] | None, partial: bool = False
    ) -> ClusterMetadata:
        """Ask for `topics` (None: every topic) and merge the answer. `partial`: only some of
        the tracked topics, so a full refresh still owed stays owed and the age is kept."""
        asked = () if topics is None else topics
        if partial:
            self._new_topics.difference_update(asked)
        else:
            self._need_update = False
            self._new_topics.clear()
        req = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": self.allow_auto_topic_creation and topics is not None,
        }
        try:
            conn = await self.any_connection(avoid=self._avoid)
            body: Any = await conn.request(ApiKey.METADATA, req)
        except BaseException:
            if partial:  # still not asked for
                self._new_topics.update(t for t in asked if t in self._topics)
            else:
                self._need_update = True
            raise
        if conn.node_id != self._avoid:
            self._avoid = None
        md = ClusterMetadata.from_response(
            body,
            self.metadata,
            full=topics is None or not self.metadata.updated_at,
            keep_age=partial and bool(self.metadata.updated_at),
        )
        self.metadata = md
        self._drop_departed(md)
        log.debug("metadata: %d brokers, %d topics", len(md.brokers), len(md.topics))
        return md

    def _drop_departed(self, md: ClusterMetadata) -> None:
        for node_id in list(self._conns):
            b = md.brokers.get(node_id)
            conn = self._conns[node_id]
            if b is None or (b.host, b.port) != (conn.host, conn.port):
                # (retriable: a request in flight there goes to the partition's new leader;
                # e.g. a broker in a controlled shutdown leaves the metadata before it exits)
                why = "left the cluster metadata" if b is None else "moved"
                self._conns.pop(node_id).close(
                    ConnectionFailedError(f"connection to {conn.address} closed: broker {why}")
                )

    async def wait_for_partitions(self, topic: str, timeout_ms: float) -> ClusterMetadata:
        """Metadata with `topic` known (refreshing with back-off); raises the topic's error or
        GregorTimeoutError after `timeout_ms`."""
        self.add_topics([topic])
        deadline = time.monotonic() + timeout_ms / 1000
        backoff = self.settings.retry_backoff_ms / 1000
        last: Exception | None = None
        key = ("topic", topic)
        while True:
            md = self.metadata
            if topic in md.topics and not self._need_update:
                self.retry_log.succeeded(key)
                return md
            if topic not in md.topics:
                self._new_topics.add(topic)  # asked for again, alone when the rest is fresh
            try:
                md = await self.refresh()
                if topic in md.topics:
                    self.retry_log.succeeded(key)
                    return md
                code = md.topic_errors.get(topic)
                if code is not None:
                    last = error_for_code(code)(f"topic {topic!r}")
                    if not last.retriable:
                        raise last
            except (BrokerResponseError, LocalError) as exc:
                if not exc.retriable:
                    raise
                last = exc
            if self.allow_auto_topic_creation and isinstance(last, UnknownTopicOrPartitionError):
                # Fail fast: a broker that creates topics answers LEADER_NOT_AVAILABLE until the
                # new topic is visible, so UNKNOWN_TOPIC_OR_PARTITION means it will not create it.
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} does not exist and the broker did not create it"
                    " (auto.create.topics.enable is false there): create it first"
                )
            if last is not None:
                # (a topic being created answers LEADER_NOT_AVAILABLE for a moment: no warning
                # unless it lasts)
                self.retry_log.failed(key, f"metadata of topic {topic!r}", last, grace_s=2.0)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.retry_log.forget(key)  # (the caller gets the error)
                msg = f"topic {topic!r} not in metadata after {timeout_ms:.0f} ms"
                if last is not None:
                    msg += f" (last error: {last})"
                raise GregorTimeoutError(msg)
            await asyncio.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, 1.0)

    # -- connections ---------------------------------------------------------------------------

    async def connection(self, node_id: int) -> BrokerConnection:
        """The connection to broker `node_id`, opening it if needed."""
        self._check_open()
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        task = self._connecting.get(node_id)
        if task is None:
            b = self.metadata.brokers.get(node_id)
            if b is None:
                raise ConnectionFailedError(f"broker {node_id} is not in the cluster metadata")
            task = asyncio.ensure_future(self._open(node_id, b.host, b.port))
            self._connecting[node_id] = task
            task.add_done_callback(functools.partial(self._connected_or_failed, node_id))
            task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    def connect_delay(self, node_id: int) -> float:
        """Seconds before a connection to `node_id` may be tried again (0: connected, or not
        backing off after a failed connect)."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return 0.0
        return max(0.0, self._backoff_until.get(node_id, 0.0) - time.monotonic())

    def _connected_or_failed(self, node_id: int, _task: asyncio.Task[BrokerConnection]) -> None:
        self._connecting.pop(node_id, None)

    def _new_connection(self, host: str, port: int, node_id: int = -1) -> BrokerConnection:
        """A connection (not yet connected) with this client's settings; node_id -1: bootstrap."""
        return BrokerConnection(
            host,
            port,
            node_id=node_id,
            client_id=self.settings.client_id,
            max_in_flight=self.settings.max_in_flight_requests_per_connection,
            request_timeout_ms=self.settings.request_timeout_ms,
            connect_timeout_ms=self.settings.socket_connection_setup_timeout_ms,
            max_frame_bytes=self.settings.max_response_bytes,
            ssl=self.settings.ssl_context,
            sasl=self.settings.sasl,
        )

    async def _open(self, node_id: int, host: str, port: int) -> BrokerConnection:
        wait = self._backoff_until.get(node_id, 0) - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        conn = self._new_connection(host, port, node_id)
        try:
            await conn.connect()
        except GregorError:
            n = self._failures[node_id] = self._failures.get(node_id, 0) + 1
            delay = min(
                self.settings.reconnect_backoff_ms * 2 ** (n - 1),
                self.settings.reconnect_backoff_max_ms,
            )
            self._backoff_until[node_id] = time.monotonic() + delay / 1000
            self.request_update()
            raise
        self._failures.pop(node_id, None)
        self._backoff_until.pop(node_id, None)
        if self._closed:
            conn.close()
            raise ClientClosedError("client closed")
        old = self._conns.get(node_id)
        if old is not None:
            old.close(ConnectionFailedError(f"connection to {old.address} replaced"))
        self._conns[node_id] = conn
        return conn

    async def coordinator_connection(self, node_id: int) -> BrokerConnection:
        """A second connection to broker `node_id` for a group's coordinator (as Kafka's
        clients keep one): requests on a connection are answered in order, so a commit or a
        heartbeat on the data connection would wait behind a Fetch long-polling there
        (fetch.max.wait.ms)."""
        self._check_open()
        async with self._coord_lock:
            conn = self._coord_conns.get(node_id)
            if conn is not None and conn.connected:
                return conn
            b = self.metadata.brokers.get(node_id)
            if b is None:
                raise ConnectionFailedError(f"broker {node_id} is not in the cluster metadata")
            conn = self._new_connection(b.host, b.port, node_id)
            await conn.connect()
            if self._closed:
                conn.close()
                raise ClientClosedError("client closed")
            self._coord_conns[node_id] = conn
            return conn

    async def any_connection(self, avoid: int | None = None) -> BrokerConnection:
        """A connection to some broker: the live one with the fewest requests in flight if any
        (Kafka's least-loaded node: a stalled broker, e.g. a paused leader, piles requests up
        and is not asked for metadata), else each known/bootstrap address. Broker `avoid` is
        taken only when no other answers."""
        self._check_open()
        live = [conn for conn in self._conns.values() if conn.connected]
        others = [conn for conn in live if conn.node_id != avoid]
        if others:
            return min(others, key=lambda conn: conn.in_flight)
        if self._bootstrap_conn is not None and self._bootstrap_conn.connected:
            return self._bootstrap_conn
        errors = []
        for node_id in sorted(self.metadata.brokers, key=lambda n: n == avoid):
            conn = self._conns.get(node_id)
            if conn is not None and conn.connected:
                return conn  # (the avoided one: no other broker answered)
            try:
                return await self.connection(node_id)
            except ConnectionFailedError as exc:
                errors.append(str(exc))
        for host, port in self._bootstrap:
            conn = self._new_connection(host, port)
            try:
                await conn.connect()
            except ConnectionFailedError as exc:
                errors.append(str(exc))
                continue
            if self._closed:
                conn.close()
                raise ClientClosedError("client closed")
            if self._bootstrap_conn is not None:
                self._bootstrap_conn.close()
            self._bootstrap_conn = conn
            return conn
        raise ConnectionFailedError("no broker reachable: " + "; ".join(errors))

    async def send_any(self, api_key: int, body: Body, timeout_ms: int | None = None) -> Body:
        conn = await self.any_connection()
        return await conn.request(api_key, body, timeout_ms=timeout_ms)  # type: ignore[return-value]

    async def send(
        self,
        node_id: int,
        api_key: int,
        body: Body,
        timeout_ms: int | None = None,
        expect_response: bool = True,
        vectored: bool = False,
    ) -> Body | None:
        conn = await self.connection(node_id)
        return await conn.request(
            api_key,
            body,
            timeout_ms=timeout_ms,
            expect_response=expect_response,
            vectored=vectored,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("client is closed")

    async def close(self) -> None:
        """Close every connection; connects and the metadata refresh in flight are cancelled
        and awaited (no task is left pending on the loop)."""
        self._closed = True
        tasks = [t for t in (*self._connecting.values(), self._refresh_task) if t is not None]
        for task in tasks:
            task.cancel()
        for conn in [*self._conns.values(), *self._coord_conns.values()]:
            conn.close()
        self._conns.clear()
        self._coord_conns.clear()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()
            self._bootstrap_conn = None
        await asyncio.gather(*tasks, return_exceptions=True)
