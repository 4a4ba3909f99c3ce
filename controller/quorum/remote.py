"""Talking to a remote controller quorum (brokers in a multi-process cluster, tools).

`RemoteController(voters)` has the ControllerThread interface — `submit(method, ...)` and the
shortcuts return concurrent.futures.Future with the same result shapes as QuorumController's
methods — but sends each call to the active controller over the native protocol, following
NOT_CONTROLLER to the new leader (the leader id the answer names, else DescribeQuorum) until
`request_timeout_ms`. One attempt waits at most `attempt_timeout_ms` for its answer: a paused
controller accepts connections and never answers, so the call moves on to the other voters.
A call that timed out may still have been applied (as in Kafka); CreateTopics then answers
TOPIC_ALREADY_EXISTS on the retry. At most `max_pending` calls in flight.

`RemoteMetadataLog(voters, replica_id=-1)` is a read-only MetadataLog (an observer; a broker
passes its node id, and the leader's DescribeQuorum then lists it with its fetch position and
last contact): a background thread
long-polls MetadataFetch (1001) from the leader (the controller parks the fetch up to
`fetch_max_wait_ms` until new records commit; `poll_interval_ms` is the back-off after an
empty answer or an error; a fetch unanswered `fetch_timeout_ms` after its long poll moves on to
another voter), keeps the committed
records in memory, and calls listeners like any MetadataLog (an empty batch = reset to the
snapshot it fetched because its position was compacted away). `append` raises NOT_CONTROLLER.

Threading: both are thread-safe; each owns its threads and stops them in `close()`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import ssl
import threading
import time
from collections.abc import Sequence
from typing import Any

from client.errors import (
    ErrorCode,
    GregorTimeoutError,
    InconsistentClusterIdError,
    NotControllerError,
    error_for_code,
)
from client.protocol.api_keys import ApiKey
from client.protocol.apis.admin import flatten_election_results, group_partitions
from client.protocol.apis.reassignments import group_topic_partitions
from client.security.tls import ReloadableContext
from controller.quorum.log import CommittedRecords, Listener, MetadataLog
from controller.quorum.network import parse_voters, request

_log = logging.getLogger(__name__)

ThrottlingQuotaExceededError = error_for_code(ErrorCode.THROTTLING_QUOTA_EXCEEDED)


def _voters(voters: str | dict[int, tuple[str, int]]) -> dict[int, tuple[str, int]]:
    return parse_voters(voters) if isinstance(voters, str) else dict(voters)


def _context(tls: ReloadableContext | None) -> ssl.SSLContext | None:
    return None if tls is None else tls.context


class _LeaderTracker:
    """Which voter to ask: the last known leader, else each voter in turn."""

    def __init__(self, voters: dict[int, tuple[str, int]]) -> None:
        self.voters = voters
        self.leader: int | None = None
        self._next = 0
        self._lock = threading.Lock()

    def target(self) -> tuple[int, tuple[str, int]]:
        with self._lock:
            if self.leader in self.voters:
                return self.leader, self.voters[self.leader]  # type: ignore[index]
            ids = sorted(self.voters)
            nid = ids[self._next % len(ids)]
            self._next += 1
            return nid, self.voters[nid]

    def known(self) -> dict[int, tuple[str, int]]:
        """A copy of the controllers known (configured, and learned since)."""
        with self._lock:
            return dict(self.voters)

    def set_leader(self, leader: int | None, endpoint: str | None = None) -> None:
        """`endpoint` ("host:port", from the answer naming the leader) teaches the address of
        a controller added to the quorum since this client started."""
        with self._lock:
            if leader is not None and leader not in self.voters and endpoint:
                host, sep, port = endpoint.rpartition(":")
                if sep and host and port.isdigit() and len(self.voters) < 64:
                    self.voters[leader] = (host.strip("[]"), int(port))
            self.leader = leader if leader in self.voters else None

    def failed(self, nid: int) -> None:
        with self._lock:
            if self.leader == nid:
                self.leader = None


class RemoteController:
    def __init__(
        self,
        voters: str | dict[int, tuple[str, int]],
        request_timeout_ms: int = 30_000,
        max_pending: int = 1000,
        threads: int = 2,
        client_id: str = "gregor-broker",
        retry_backoff_ms: int = 50,
        attempt_timeout_ms: int = 5000,
        cluster_id: str | None = None,
        tls: ReloadableContext | None = None,
    ) -> None:
        """`cluster_id`: the id a broker claims in BrokerRegistration when the call names none
        (its stored or configured one; None: it has none yet). The owner may set the attribute
        later (from any thread) once it has learnt the quorum's."""
        self.cluster_id = cluster_id
        self.tls = tls  # the controllers' listener is SSL
        self.tracker = _LeaderTracker(_voters(voters))
        self.request_timeout_s = request_timeout_ms / 1000.0
        self.attempt_timeout_s = attempt_timeout_ms / 1000.0
        self.retry_backoff_s = retry_backoff_ms / 1000.0
        self.max_pending = max_pending
        self.client_id = client_id
        self._pool = concurrent.futures.ThreadPoolExecutor(
            threads, thread_name_prefix="remote-controller"
        )
        self._pending = 0
        self._lock = threading.Lock()
        self._closed = False

    # -- calls ---------------------------------------------------------------------------------
    def submit(self, method: str, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        return self._submit(method, args, kwargs, None)

    def _submit(
        self, method: str, args: Any, kwargs: Any, timeout_ms: int | None
    ) -> concurrent.futures.Future:
        """`timeout_ms`: this call gives up sooner than `request_timeout_ms` (None: not)."""
        build = _CALLS.get(method)
        if build is None:
            raise AttributeError(f"RemoteController has no method {method!r}")
        api_key, body, unwrap = build(*args, **kwargs)
        with self._lock:
            if self._closed:
                raise NotControllerError("remote controller client closed")
            if self._pending >= self.max_pending:
                raise ThrottlingQuotaExceededError(f"{self._pending} controller calls pending")
            self._pending += 1
        timeout_s = self.request_timeout_s
        if timeout_ms is not None:
            timeout_s = min(timeout_s, max(0.001, timeout_ms / 1000.0))
        fut = self._pool.submit(self._run, api_key, body, unwrap, timeout_s)
        fut.add_done_callback(self._release)
        return fut

    def call(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        return self.submit(method, *args, **kwargs).result(timeout)

    def _release(self, _fut: concurrent.futures.Future) -> None:
        with self._lock:
            self._pending -= 1

    def _run(self, api_key: int, body: dict, unwrap: Any, timeout_s: float) -> Any:
        deadline = time.monotonic() + timeout_s
        last: str | None = None  # what the last failed attempt got
        tried: dict[int, str] = {}  # voter id -> "ID@HOST:PORT", in the order tried
        hinted = False  # the previous attempt followed a NOT_CONTROLLER leader hint
        while time.monotonic() < deadline:
            if self._closed:  # close() ends calls in flight after their current attempt
                raise NotControllerError("remote controller client closed")
            nid, (host, port) = self.tracker.target()
            tried.setdefault(nid, f"{nid}@{host}:{port}")
            try:
                resp = request(
                    host,
                    port,
                    api_key,
                    body,
                    timeout=max(0.1, min(self.attempt_timeout_s, deadline - time.monotonic())),
                    client_id=self.client_id,
                    ssl_context=_context(self.tls),
                )
            except OSError as e:
                last = f"controller {nid}: {e or type(e).__name__}"
                self.tracker.failed(nid)
                self._sleep_until(deadline)
                continue
            if resp.get("error_code") == ErrorCode.NOT_CONTROLLER:
                last = f"controller {nid}: NOT_CONTROLLER"
                self.tracker.failed(nid)
                hint = resp.get("leader_id", -1)
                if not hinted and hint is not None and hint >= 0 and hint != nid:
                    hinted = True  # the controller named the leader: go there at once (once)
                    self.tracker.set_leader(hint, resp.get("leader_endpoint"))
                else:
                    hinted = False
                    self._find_leader()
                    self._sleep_until(deadline)
                continue
            self.tracker.set_leader(nid)
            return unwrap(resp)
        raise GregorTimeoutError(
            f"no active controller answered within {timeout_s:.1f}s (tried"
            f" {', '.join(tried.values()) or 'none'}; last error: {last or 'none'})"
        )

    def _sleep_until(self, deadline: float) -> None:
        """The retry back-off, never past the call's deadline."""
        time.sleep(max(0.0, min(self.retry_backoff_s, deadline - time.monotonic())))

    def _find_leader(self) -> None:
        for _nid, (host, port) in sorted(self.tracker.known().items()):
            try:
                d = request(
                    host,
                    port,
                    ApiKey.DESCRIBE_QUORUM,
                    {},
                    timeout=1.0,
                    client_id=self.client_id,
                    ssl_context=_context(self.tls),
                )
            except OSError:
                continue
            if d.get("leader_id", -1) >= 0:
                self.tracker.set_leader(d["leader_id"], d.get("leader_endpoint"))
                return

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- shortcuts (same arguments as QuorumController's methods) -------------------------------
    def create_topics(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("create_topics", *a, **k)

    def delete_topics(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("delete_topics", *a, **k)

    def create_partitions(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("create_partitions", *a, **k)

    def register_broker(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        if len(a) < 7:  # (cluster_id is the seventh argument)
            k.setdefault("cluster_id", self.cluster_id)
        return self.submit("register_broker", *a, **k)

    def broker_heartbeat(
        self, *a: Any, timeout_ms: int | None = None, **k: Any
    ) -> concurrent.futures.Future:
        return self._submit("broker_heartbeat", a, k, timeout_ms)

    def alter_partition(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("alter_partition", *a, **k)

    def allocate_producer_ids(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("allocate_producer_ids", *a, **k)

    def elect_leaders(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("elect_leaders", *a, **k)

    def incremental_alter_configs(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("incremental_alter_configs", *a, **k)

    def alter_user_scram_credentials(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("alter_user_scram_credentials", *a, **k)

    def alter_client_quotas(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("alter_client_quotas", *a, **k)

    def alter_partition_reassignments(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("alter_partition_reassignments", *a, **k)

    def list_partition_reassignments(self, *a: Any, **k: Any) -> concurrent.futures.Future:
        return self.submit("list_partition_reassignments", *a, **k)

    def describe_quorum(self, endpoint: str | None = None) -> concurrent.futures.Future:
        return self.submit("describe_quorum")


def _same(resp: dict) -> dict:
    return resp


def _register(
    broker_id: int,
    host: str,
    port: int,
    rack: str | None = None,
    incarnation_id: str = "",
    endpoints: Sequence[tuple[str, str, int]] = (),
    cluster_id: str | None = None,
) -> tuple:
    return (
        ApiKey.BROKER_REGISTRATION,
        {
            "broker_id": broker_id,
            "cluster_id": cluster_id,
            "host": host,
            "port": port,
            "rack": rack,
            "incarnation_id": incarnation_id,
            "endpoints": [{"name": n, "host": h, "port": p} for n, h, p in endpoints],
        },
        _registered,
    )


def _registered(r: dict) -> dict:
    """BrokerRegistration's answer; INCONSISTENT_CLUSTER_ID is raised (the broker cannot go
    on, and the message names both ids), anything else is the caller's to judge."""
    if r["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID:
        raise InconsistentClusterIdError(r.get("error_message") or "cluster id mismatch")
    return {
        "error_code": r["error_code"],
        "broker_epoch": r.get("broker_epoch", -1),
        "cluster_id": r.get("cluster_id"),
    }


def _heartbeat(
    broker_id: int,
    broker_epoch: int,
    current_metadata_offset: int,
    want_fence: bool = False,
    want_shutdown: bool = False,
    failed_replicas: Sequence[tuple[str, int]] = (),
    cannot_create_replicas: str | None = None,
) -> tuple:
    return (
        ApiKey.BROKER_HEARTBEAT,
        {
            "broker_id": broker_id,
            "broker_epoch": broker_epoch,
            "current_metadata_offset": current_metadata_offset,
            "want_fence": want_fence,
            "want_shutdown": want_shutdown,
            "failed_replicas": [{"topic": t, "partition": p} for t, p in failed_replicas],
            "cannot_create_replicas": cannot_create_replicas,
        },
        lambda r: {
            k: r.get(k, d)
            for k, d in (
                ("error_code", 0),
                ("is_caught_up", False),
                ("is_fenced", True),
                ("should_shut_down", False),
            )
        },
    )


def _alter(broker_id: int, broker_epoch: int, topics: list[dict]) -> tuple:
    return (
        ApiKey.ALTER_PARTITION,
        {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": topics},
        _same,
    )


def _create_topics(
    requests: list[dict], validate_only: bool = False, timeout_ms: int = 30_000
) -> tuple:
    return (
        ApiKey.CREATE_TOPICS,
        {"topics": requests, "timeout_ms": timeout_ms, "validate_only": validate_only},
        lambda r: r["topics"],
    )


def _delete_topics(names: list[str], timeout_ms: int = 30_000) -> tuple:
    return (
        ApiKey.DELETE_TOPICS,
        {"topic_names": names, "timeout_ms": timeout_ms},
        lambda r: r["responses"],
    )


def _create_partitions(
    topics: list[dict], validate_only: bool = False, timeout_ms: int = 30_000
) -> tuple:
    wire = [
        {
            "name": t["name"],
            "count": t["count"],
            "assignments": None
            if t.get("assignments") is None
            else [{"broker_ids": list(a)} for a in t["assignments"]],
        }
        for t in topics
    ]
    return (
        ApiKey.CREATE_PARTITIONS,
        {"topics": wire, "timeout_ms": timeout_ms, "validate_only": validate_only},
        lambda r: r["results"],
    )


def _allocate(broker_id: int, broker_epoch: int) -> tuple:
    return (
        ApiKey.ALLOCATE_PRODUCER_IDS,
        {"broker_id": broker_id, "broker_epoch": broker_epoch},
        _same,
    )


def _elect(election_type: int, partitions: list[tuple[str, int]] | None = None) -> tuple:
    return (
        ApiKey.ELECT_LEADERS,
        {"election_type": election_type, "topic_partitions": group_partitions(partitions)},
        lambda r: flatten_election_results(r["replica_election_results"]),
    )


def _alter_configs(resources: list[dict], validate_only: bool = False) -> tuple:
    return (
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        {"resources": resources, "validate_only": validate_only},
        lambda r: r["responses"],
    )


def _alter_scram(deletions: list[dict], upsertions: list[dict]) -> tuple:
    return (
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        {"deletions": deletions, "upsertions": upsertions},
        lambda r: r["results"],
    )


def _alter_quotas(entries: list[dict], validate_only: bool = False) -> tuple:
    return (
        ApiKey.ALTER_CLIENT_QUOTAS,
        {"entries": entries, "validate_only": validate_only},
        lambda r: r["entries"],
    )


def _alter_reassignments(topics: list[dict]) -> tuple:
    return (ApiKey.ALTER_PARTITION_REASSIGNMENTS, {"topics": topics}, lambda r: r["responses"])


def _list_reassignments(partitions: list[tuple[str, int]] | None = None) -> tuple:
    return (
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        {"topics": group_topic_partitions(partitions)},
        lambda r: r["topics"],
    )


_CALLS: dict[str, Any] = {
    "register_broker": _register,
    "broker_heartbeat": _heartbeat,
    "alter_partition": _alter,
    "create_topics": _create_topics,
    "delete_topics": _delete_topics,
    "create_partitions": _create_partitions,
    "incremental_alter_configs": _alter_configs,
    "alter_user_scram_credentials": _alter_scram,
    "alter_client_quotas": _alter_quotas,
    "elect_leaders": _elect,
    "alter_partition_reassignments": _alter_reassignments,
    "list_partition_reassignments": _list_reassignments,
    "allocate_producer_ids": _allocate,
    "describe_quorum": lambda: (ApiKey.DESCRIBE_QUORUM, {}, _same),
}


class RemoteMetadataLog(MetadataLog):
    def __init__(
        self,
        voters: str | dict[int, tuple[str, int]],
        poll_interval_ms: int = 50,
        max_records: int = 10_000,
        max_records_in_memory: int = 1_000_000,
        client_id: str = "gregor-observer",
        fetch_max_wait_ms: int = 500,
        replica_id: int = -1,
        fetch_timeout_ms: int = 2000,
        tls: ReloadableContext | None = None,
    ) -> None:
        self.tls = tls  # the controllers' listener is SSL
        self.replica_id = replica_id  # a broker's node id: DescribeQuorum lists it as observer
        # beyond the long poll: a paused leader accepts the connection and never answers
        self.fetch_timeout_s = (fetch_timeout_ms + fetch_max_wait_ms) / 1000.0
        self.tracker = _LeaderTracker(_voters(voters))
        self.poll_interval_s = poll_interval_ms / 1000.0
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_records = max_records
        self.max_records_in_memory = max_records_in_memory
        self.client_id = client_id
        self._records = CommittedRecords(max_records_in_memory)
        self._lock = self._records.lock
        self._committed = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metadata-fetcher", daemon=True)
        self.fetches = 0

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    # -- fetcher thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                got = self._fetch_once()
            except Exception:
                _log.exception("metadata fetch failed")
                got = 0
            if not got:
                self._stop.wait(self.poll_interval_s)

    def _fetch_once(self) -> int:
        nid, (host, port) = self.tracker.target()
        with self._lock:
            position = max(self._records.last_offset(), self._committed) + 1
        try:
            resp = request(
                host,
                port,
                ApiKey.METADATA_FETCH,
                {
                    "from_offset": position,
                    "max_records": self.max_records,
                    "max_wait_ms": self.fetch_max_wait_ms,
                    "replica_id": self.replica_id,
                },
                timeout=self.fetch_timeout_s,
                client_id=self.client_id,
                ssl_context=_context(self.tls),
            )
        except OSError:
            self.tracker.failed(nid)
            return 0
        self.fetches += 1
        leader = resp.get("leader_id", -1)
        if leader != nid:
            self.tracker.set_leader(leader if leader >= 0 else None, resp.get("leader_endpoint"))
            if leader >= 0:
                return 1  # ask the leader straight away
        code = resp.get("error_code", 0)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE and resp.get("snapshot") is not None:
            with self._lock:
                off = resp["snapshot_offset"]
                self._records.install_snapshot(off, resp["snapshot"])
                self._committed = max(self._committed, off)
                self._records.reset()
            return 1
        if code != 0:
            _log.warning("MetadataFetch from controller %d: error %d", nid, code)
            return 0
        records = [(r["offset"], r["record"]) for r in resp["records"]]
        with self._lock:
            if records:
                self._records.check_room(len(records))
                self._committed = records[-1][0]
            if len(records) < self.max_records:
                self._committed = max(self._committed, resp["high_watermark"] - 1)
            if records:  # listeners see the new committed offset
                self._records.commit(records)
        return len(records)

    # -- MetadataLog ---------------------------------------------------------------------------
    def is_leader(self) -> bool:
        return False

    def append(self, records: list[bytes]) -> int:
        raise NotControllerError("a metadata observer cannot append")

    def committed_offset(self) -> int:
        with self._lock:
            return self._committed

    def end_offset(self) -> int:
        return self.committed_offset()

    def read(self, from_offset: int, max_records: int = 10_000) -> list[tuple[int, bytes]]:
        return self._records.read(from_offset, max_records)

    def add_listener(self, listener: Listener) -> None:
        self._records.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._records.remove_listener(listener)

    def log_start_offset(self) -> int:
        with self._lock:
            return self._records.start

    def latest_snapshot(self) -> tuple[int, bytes] | None:
        with self._lock:
            return self._records.snapshot

    def write_snapshot(self, offset: int, data: bytes) -> None:
        with self._lock:
            if self._records.is_newer_snapshot(offset):
                self._records.install_snapshot(offset, data)
