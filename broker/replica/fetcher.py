"""Replica fetchers: a follower's threads that copy its partitions from their leaders.

    fetchers = ReplicaFetcherManager(node_id, replica_manager, endpoint_for, settings)
    fetchers.add((topic, p), leader_id, leader_epoch)   # became follower (metadata publisher)
    fetchers.remove((topic, p))                         # became leader, stopped, deleted
    fetchers.shutdown()

One thread per (source broker, n) with n < num.replica.fetchers (a partition goes to
hash(tp) % num.replica.fetchers), as Kafka's ReplicaFetcherManager. Each thread loops:

    Fetch(replica_id = this broker, per partition: fetch offset = local log end, current
          leader epoch, last fetched epoch)  ──▶ the leader (waits up to replica.fetch.wait.max.ms)
    apply each partition's answer (broker/replica/follower.py: append, or truncate)
    fsync every log it appended to (log.flush.on.ack), so the next fetch offset is durable

Incremental fetch sessions (KIP-227, fetch_session_handler.py): each thread keeps one session
with its leader. The first Fetch names every partition; later ones name only partitions added
or whose fetch offset / epochs changed (those that got records, truncated, changed leader
epoch) and forget removed or backed-off ones, and the leader answers only partitions that
changed: an idle follower's fetch carries no partition either way. A session error, a lost
connection or a failed request starts over with a full fetch. A round builds its request from
the last one, looking again only at the partitions touched since (added, removed, answered,
due after a back-off, not fetchable yet): its cost follows what changed, not how many
partitions the leader has (decision 204); a full fetch or a throttled round looks at all.

Errors: a connection failure backs every partition of the thread off for
replica.fetch.backoff.ms; a partition error (FENCED_LEADER_EPOCH, a local storage error...)
backs that partition off for as long, or until the metadata moves it (add()). An answer that
the leader has not applied the metadata the follower fetches under (UNKNOWN_TOPIC_OR_PARTITION,
UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER: a new topic or leader that the follower heard of
first) is retried after 10 ms, doubled at each in a row up to replica.fetch.backoff.ms, and a
round left with only backed-off partitions waits until the first may go (decision 201).
OFFSET_OUT_OF_RANGE truncates to the leader's end (asked with ListOffsets) or restarts at the
leader's start.

Throttle (throttle.py): partitions this broker is adding by a reassignment are fetched within
`follower.replication.throttled.rate` bytes/s, shared by every fetcher thread of the broker;
while the budget is spent they are left out of fetches (as backed-off ones are). Each of their
fetches asks for 10 ms of the rate (at most replica.fetch.max.bytes), never the catch-up size:
many small fsynced appends, paced, rather than a few of megabytes.

Threads: add/remove from the metadata publisher's thread. `remove` waits until the thread is
not applying an answer for that partition, so a partition that became leader is never appended
to as a follower afterwards. A thread left without partitions stops.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.log import Log
from broker.replica.fetch_session_handler import FetchSessionHandler, PartitionData
from broker.replica.follower import (
    append_fetched,
    apply_fetched,
    diverges,
    fetch_position,
    truncate_out_of_range,
)
from broker.replica.leader_connection import LeaderConnection
from broker.replica.throttle import ReplicationThrottle
from client.config.loader import Config
from client.errors import ErrorCode, StorageError
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.scram import SaslCredentials
from client.security.tls import ReloadableContext

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Endpoint = tuple[str, int]


@dataclass(frozen=True)
class FetcherSettings:
    num_fetchers: int = 1
    partition_max_bytes: int = 1024 * 1024
    catchup_max_bytes: int = 8 * 1024 * 1024  # per partition behind the leader's HW
    min_bytes: int = 1
    max_wait_ms: int = 500
    response_max_bytes: int = 10 * 1024 * 1024
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30_000
    flush_on_ack: bool = True
    max_frame_bytes: int = 200 * 1024 * 1024
    # TLS to the leaders (inter.broker.listener.name is SSL): its current context per connection
    tls: ReloadableContext | None = None
    # SASL to the leaders (inter.broker.listener.name is SASL_*): this broker's own credentials
    sasl: SaslCredentials | None = None

    @classmethod
    def from_config(
        cls,
        config: Config,
        tls: ReloadableContext | None = None,
        sasl: SaslCredentials | None = None,
    ) -> FetcherSettings:
        return cls(
            tls=tls,
            sasl=sasl,
            num_fetchers=int(config.num_replica_fetchers),
            partition_max_bytes=int(config.replica_fetch_max_bytes),
            catchup_max_bytes=int(config.replica_fetch_catchup_max_bytes),
            min_bytes=int(config.replica_fetch_min_bytes),
            max_wait_ms=int(config.replica_fetch_wait_max_ms),
            response_max_bytes=int(config.replica_fetch_response_max_bytes),
            backoff_ms=int(config.replica_fetch_backoff_ms),
            socket_timeout_ms=int(config.replica_socket_timeout_ms),
            flush_on_ack=bool(config.log_flush_on_ack),
        )


@dataclass
class _FetchState:
    leader_epoch: int
    delayed_until: float = 0.0  # monotonic
    # what this round asks for the partition, kept between rounds: only this thread changes a
    # follower's log (appends and truncations in _apply, which drops it) and add() makes a
    # new state for a new epoch, so an idle partition costs no lookups per round (building
    # every entry each round was ~90 % of an idle broker's CPU at 10,000 partitions, RF 3)
    built: PartitionData | None = None
    # its last answer left it below the leader's high watermark: a replica catching up asks
    # for replica.fetch.catchup.max.bytes (fewer round trips and fsyncs per MB)
    behind: bool = False
    # answers in a row saying the leader has not applied the metadata this follower fetches
    # under (_LEADER_BEHIND): each doubles the next back-off, from LEADER_BEHIND_BACKOFF_MS
    leader_behind: int = 0


_RETRY_LATER = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
}


_SESSION_ERRORS = {ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH}

# The leader has not (yet) applied the metadata this follower fetches under: the partition is
# new to it, the follower's leader epoch is newer than its own, or it does not know yet that
# it leads. Right after a topic is created or a leader is elected the follower often learns
# first, and the leader catches up within milliseconds; a back-off of replica.fetch.backoff.ms
# (1 s, as Kafka's fetcher takes for every partition error) held every acks=all write to the
# partition for that long (the follower is in the ISR). These are retried after
# LEADER_BEHIND_BACKOFF_MS, doubled at each such answer in a row, up to replica.fetch.backoff.ms
# (decision 201). A follower whose own metadata is stale gets the same codes; its metadata
# moves the partition to the new leader in any case (add() starts it afresh).
_LEADER_BEHIND = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}
LEADER_BEHIND_BACKOFF_MS = 10


def partition_backoff_ms(code: int, leader_behind: int, backoff_ms: int) -> int:
    """How long a partition whose answer was error `code` (0: a failure of this follower's
    own, or a truncation that did not move it) waits before it is fetched again:
    replica.fetch.backoff.ms (`backoff_ms`), or for a leader behind on metadata
    LEADER_BEHIND_BACKOFF_MS doubled `leader_behind` times (such answers in a row before this
    one), at most `backoff_ms`."""
    if code in _LEADER_BEHIND:
        return min(backoff_ms, LEADER_BEHIND_BACKOFF_MS << min(leader_behind, 20))
    return backoff_ms


class ReplicaFetcherThread:
    def __init__(
        self,
        name: str,
        node_id: int,
        leader_id: int,
        replica_manager: Any,
        endpoint_for: Callable[[int], Endpoint | None],
        settings: FetcherSettings,
        throttle: ReplicationThrottle | None = None,
    ) -> None:
        self.name = name
        self.throttle = throttle or ReplicationThrottle()
        self._throttle_wait = 0.0  # set by _build: seconds until a throttled partition may go
        # set by _build for a round with nothing to ask: when its first backed-off partition
        # may go (None: the round asks, or none is backed off)
        self._idle_until: float | None = None
        self.node_id = node_id
        self.leader_id = leader_id
        self.rm = replica_manager
        self.endpoint_for = endpoint_for
        self.settings = settings
        self._lock = threading.Lock()  # held while an answer is applied; add/remove take it
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._parts: dict[TopicPartition, _FetchState] = {}
        # The last round's request, kept between rounds: a round looks again only at the
        # partitions touched since (added, removed, answered, due after a back-off, or not
        # fetchable yet), not at every partition of the leader (at 6,000 partitions a lightly
        # loaded follower spent ~30 % of its CPU rebuilding unchanged requests). A full fetch
        # or a throttled round looks at all of them. All under self._lock.
        self._wanted: dict[TopicPartition, PartitionData] = {}
        self._asked: dict[TopicPartition, int] = {}
        self._touched: set[TopicPartition] = set()
        self._backed_off: list[tuple[float, TopicPartition]] = []  # heap: (due, tp)
        self._throttled_last = False
        self._conn: LeaderConnection | None = None
        self.session = FetchSessionHandler()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.fetches = 0
        self.bytes_fetched = 0
        self._failing = False

    # -- control (publisher thread) ------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        with self._lock:
            st = self._parts.get(tp)
            if st is None or st.leader_epoch != leader_epoch:
                self._parts[tp] = _FetchState(leader_epoch)
                self._touched.add(tp)
        self._wake.set()

    def remove(self, tp: TopicPartition) -> bool:
        with self._lock:
            self._touched.add(tp)
            return self._parts.pop(tp, None) is not None

    @property
    def fetching(self) -> int:
        """How many partitions this thread fetches."""
        return len(self._parts)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        conn = self._conn
        if conn is not None:
            conn.close()  # unblocks a recv waiting on a silent leader

    def join(self, timeout: float) -> None:
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- the loop ------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._fetch_once():
                    self._wake.wait(self._idle_wait())
                    self._wake.clear()
            except Exception:
                _log.exception("[%s] fetch failed", self.name)
                self._close_conn()
                self._stop.wait(self.settings.backoff_ms / 1000)
        self._close_conn()

    def _idle_wait(self) -> float:
        """Seconds to wait after a round that fetched nothing: replica.fetch.backoff.ms (the
        leader unreachable, or nothing to ask), or less when the round had nothing to ask and
        a throttled or backed-off partition may go sooner (add() and stop() wake it earlier)."""
        wait = self.settings.backoff_ms / 1000
        if self._throttle_wait > 0:  # only throttled partitions were left out
            wait = min(wait, self._throttle_wait)
        due = self._idle_until
        if due is not None:
            wait = min(wait, max(0.0, due - time.monotonic()))
        return wait

    def _close_conn(self) -> None:
        self.session.reset()  # a new connection starts with a full fetch
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _build(self) -> tuple[Body, dict[TopicPartition, int]]:
        """The Fetch body for this round (full or incremental: the session decides) over every
        partition not backed off, and the epochs it fetches them under (kept until the next
        round builds: the answer is applied under them)."""
        now = time.monotonic()
        throttle = self.throttle
        # no rate: nothing is throttled this round (allowed, and asked for the usual size)
        throttled = throttle.rate is not None
        self._throttle_wait = 0.0
        with self._lock:
            if self.session.next_epoch == 0 or throttled or self._throttled_last:
                # a full fetch (everything looked at afresh), or throttled partitions that
                # may go or wait this round (or went with a throttled size last round): every
                # partition is looked at
                self._scan_all(now)
                self._throttled_last = throttled
                changed: list[TopicPartition] | None = None
            else:
                changed = self._scan_touched(now)
            backed_off = self._backed_off
            next_due = backed_off[0][0] if backed_off else 0.0
            self._idle_until = next_due if next_due and not self._asked else None
            request = self.session.build(self._wanted, changed)
        body = {
            "replica_id": self.node_id,
            "max_wait_ms": self.settings.max_wait_ms,
            "min_bytes": self.settings.min_bytes,
            "max_bytes": self.settings.response_max_bytes,
            **request.body_fields(),
        }
        return body, self._asked

    def _entry(self, tp: TopicPartition, st: _FetchState, rebuild: bool) -> PartitionData | None:
        """What this round asks for `tp` (None: not fetchable here now: unknown to the replica
        manager, or led here). Self._lock held."""
        max_bytes = self.settings.partition_max_bytes
        tp_max = max(max_bytes, self.settings.catchup_max_bytes) if st.behind else max_bytes
        throttle = self.throttle
        if throttle.rate is not None:
            if not throttle.allowed(tp):
                self._throttle_wait = throttle.wait_s()
                return None
            tp_max = throttle.fetch_max_bytes(tp, tp_max, max_bytes)
        data = st.built
        if data is None or rebuild or data.partition_max_bytes != tp_max:
            part = self.rm.get_partition(*tp)
            if part is None or part.is_leader:
                st.built = None
                return None
            offset, last_epoch = fetch_position(part)
            data = st.built = PartitionData(
                offset, st.leader_epoch, last_epoch, part.log.log_start_offset, tp_max
            )
        return data

    def _scan_all(self, now: float) -> None:
        """Look at every partition (self._lock held)."""
        rebuild = self.session.next_epoch == 0
        wanted: dict[TopicPartition, PartitionData] = {}
        asked: dict[TopicPartition, int] = {}
        backed_off: list[tuple[float, TopicPartition]] = []
        retry: set[TopicPartition] = set()
        for tp, st in self._parts.items():
            if st.delayed_until > now:
                backed_off.append((st.delayed_until, tp))
                continue
            data = self._entry(tp, st, rebuild)
            if data is None:
                retry.add(tp)
                continue
            wanted[tp] = data
            asked[tp] = st.leader_epoch
        heapq.heapify(backed_off)
        self._wanted, self._asked, self._backed_off = wanted, asked, backed_off
        self._touched = retry

    def _scan_touched(self, now: float) -> list[TopicPartition]:
        """Look again only at the partitions touched since the last round and those whose
        back-off ended; returns them (self._lock held). One that was not fetchable stays
        touched, looked at every round as a full scan would."""
        touched = self._touched
        backed_off = self._backed_off
        while backed_off and backed_off[0][0] <= now:
            touched.add(heapq.heappop(backed_off)[1])
        wanted, asked, parts = self._wanted, self._asked, self._parts
        retry: set[TopicPartition] = set()
        for tp in touched:
            st = parts.get(tp)
            if st is not None and st.delayed_until <= now:
                data = self._entry(tp, st, False)
                if data is not None:
                    wanted[tp] = data
                    asked[tp] = st.leader_epoch
                    continue
                retry.add(tp)
            elif st is not None:  # backed off: asked again once due
                heapq.heappush(backed_off, (st.delayed_until, tp))
            wanted.pop(tp, None)
            asked.pop(tp, None)
        changed = list(touched)
        self._touched = retry
        return changed

    def _connection(self) -> LeaderConnection:
        if self._conn is None:
            endpoint = self.endpoint_for(self.leader_id)
            if endpoint is None:
                raise ConnectionError(f"broker {self.leader_id} has no known endpoint")
            timeout = (self.settings.socket_timeout_ms + self.settings.max_wait_ms) / 1000
            tls = self.settings.tls
            self._conn = LeaderConnection(
                endpoint,
                timeout,
                self.settings.max_frame_bytes,
                f"replica-{self.node_id}",
                None if tls is None else tls.context,
                self.settings.sasl,
            )
        return self._conn

    def _fetch_once(self) -> bool:
        """One Fetch round; False when there was nothing to fetch or the leader is unreachable
        (the caller backs off)."""
        body, asked = self._build()
        if not asked:
            return False
        try:
            resp = self._connection().request(ApiKey.FETCH, body)
        except (OSError, ConnectionError) as exc:
            if not self._stop.is_set():  # the first failure in a row at INFO, the rest DEBUG
                level = logging.DEBUG if self._failing else logging.INFO
                _log.log(
                    level, "[%s] fetch from broker %d failed: %s", self.name, self.leader_id, exc
                )
            self._failing = True
            self._close_conn()
            return False
        self._failing = False
        self.fetches += 1
        code = int(resp.get("error_code", 0))
        if not self.session.handle_response(code, int(resp.get("session_id", 0))) and code:
            # the session is gone (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH):
            # a full fetch at once; any other whole-request error backs off first
            level = logging.DEBUG if code in _SESSION_ERRORS else logging.WARNING
            _log.log(level, "[%s] fetch session error %d: full fetch next", self.name, code)
            return code in _SESSION_ERRORS and body["session_epoch"] != 0
        appended_to: list[Log] = []
        parts = self._parts
        get_partition = self.rm.get_partition
        apply = self._apply
        with self._lock:
            for t in resp["topics"]:
                name = t["name"]
                for entry in t["partitions"]:
                    tp = (name, int(entry["partition"]))
                    st = parts.get(tp)
                    if st is None or asked.get(tp) != st.leader_epoch:
                        continue  # removed, or now fetched under another epoch
                    part = get_partition(*tp)
                    if part is None or part.is_leader:
                        continue
                    if apply(tp, st, part, entry):
                        appended_to.append(part.log)
        if self.settings.flush_on_ack and appended_to:
            # on disk before the next fetch says so (one syncfs for many partitions)
            self.rm.log_manager.flush_now(appended_to)
        return True

    def _apply(self, tp: TopicPartition, st: _FetchState, part: Any, entry: Body) -> bool:
        """Apply one partition's answer (the thread's lock held); True when data was appended."""
        st.built = None  # whatever happens here, the next round looks at the log again
        self._touched.add(tp)
        code = int(entry["error_code"])
        if code == 0:
            st.leader_behind = 0  # (it answers for the partition: it has its metadata)
        try:
            # A truncation that leaves the fetch position as it was backs the partition off:
            # in a fetch session the leader looks at a partition again only when the follower
            # names it (its position changed), when it changes there, or after a back-off
            # (forgotten, then named again); asking at once again could not help either.
            diverged = code == 0 and diverges(entry)
            if code == 0 and not diverged:  # records (or none): the common case
                n = append_fetched(part, entry)
                st.behind = part.log.end_offset < int(entry["high_watermark"])
                if n:
                    self.bytes_fetched += n
                    self.throttle.record(tp, n)
                return n > 0
            truncating = diverged or code == ErrorCode.OFFSET_OUT_OF_RANGE
            before = fetch_position(part) if truncating else None
            if code == 0:  # diverged: truncated where the answer says, nothing appended
                apply_fetched(part, entry)
                st.behind = part.log.end_offset < int(entry["high_watermark"])
                if fetch_position(part) != before:
                    return False
            elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                truncate_out_of_range(part, int(entry["log_start_offset"]), self._leader_end(tp))
                if fetch_position(part) != before:
                    return False
        except StorageError as exc:
            _log.error("[%s] %s-%d: local log failed: %s", self.name, tp[0], tp[1], exc)
        except (OSError, ConnectionError) as exc:
            _log.info("[%s] %s-%d: %s", self.name, tp[0], tp[1], exc)
            self._close_conn()
        except Exception as exc:  # a corrupt answer: the partition backs off, the rest go on
            _log.error("[%s] %s-%d: bad fetch answer: %s", self.name, tp[0], tp[1], exc)
        else:
            level = logging.DEBUG if code in _RETRY_LATER else logging.WARNING
            if code == 0:
                _log.warning(
                    "[%s] %s-%d: diverged, truncation left it at %s", self.name, *tp, before
                )
            else:
                _log.log(level, "[%s] %s-%d: leader answered error %d", self.name, *tp, code)
        delay_ms = partition_backoff_ms(code, st.leader_behind, self.settings.backoff_ms)
        if code in _LEADER_BEHIND:
            st.leader_behind += 1
        st.delayed_until = time.monotonic() + delay_ms / 1000
        return False

    def _leader_end(self, tp: TopicPartition) -> int:
        """The leader's log end offset (ListOffsets latest as a replica)."""
        body = {
            "replica_id": self.node_id,
            "topics": [{"name": tp[0], "partitions": [{"partition": tp[1], "timestamp": -1}]}],
        }
        resp = self._connection().request(ApiKey.LIST_OFFSETS, body)
        for t in resp["topics"]:
            for p in t["partitions"]:
                if p["error_code"] == 0:
                    return int(p["offset"])
        return -1


class ReplicaFetcherManager:
    def __init__(
        self,
        node_id: int,
        replica_manager: Any,
        endpoint_for: Callable[[int], Endpoint | None],
        settings: FetcherSettings,
    ) -> None:
        self.node_id = node_id
        self.rm = replica_manager
        self.endpoint_for = endpoint_for
        self.settings = settings
        self._lock = threading.Lock()
        self._threads: dict[tuple[int, int], ReplicaFetcherThread] = {}
        self._where: dict[TopicPartition, tuple[int, int]] = {}
        self._closed = False
        # the broker's catch-up bound for replicas it is adding (the metadata applier sets it)
        self.throttle = ReplicationThrottle()

    def _key(self, tp: TopicPartition, leader_id: int) -> tuple[int, int]:
        return (leader_id, hash(tp) % self.settings.num_fetchers)

    def add(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """Fetch `tp` from `leader_id` under `leader_epoch` (moving it from another leader)."""
        with self._lock:
            if self._closed:
                return
            key = self._key(tp, leader_id)
            old = self._where.get(tp)
            if old is not None and old != key:
                self._remove_locked(tp)
            thread = self._threads.get(key)
            if thread is None:
                thread = ReplicaFetcherThread(
                    f"replica-fetcher-{leader_id}-{key[1]}",
                    self.node_id,
                    leader_id,
                    self.rm,
                    self.endpoint_for,
                    self.settings,
                    self.throttle,
                )
                self._threads[key] = thread
                thread.start()
            self._where[tp] = key
            thread.add(tp, leader_epoch)

    def remove(self, tp: TopicPartition) -> None:
        with self._lock:
            self._remove_locked(tp)

    def _remove_locked(self, tp: TopicPartition) -> None:
        key = self._where.pop(tp, None)
        if key is None:
            return
        thread = self._threads.get(key)
        if thread is None:
            return
        thread.remove(tp)
        if not thread.fetching:
            del self._threads[key]
            thread.stop()

    def fetching(self) -> dict[TopicPartition, int]:
        """Partition -> the leader it is fetched from."""
        with self._lock:
            return {tp: key[0] for tp, key in self._where.items()}

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads.values())
            self._threads.clear()
            self._where.clear()
        for t in threads:
            t.stop()
        for t in threads:
            t.join(5.0)
