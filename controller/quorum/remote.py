"""RemoteController: the network ControllerChannel (controller/channel.py), for brokers in a
multi-process cluster and tools.

Each typed method builds its request body and returns a concurrent.futures.Future of the same
typed result (controller/results.py) the in-process channel gives, and sends the request to the
active controller over the native protocol, following NOT_CONTROLLER to the new leader (the
leader id the answer names, else DescribeQuorum) until `request_timeout_ms`. One attempt waits
at most `attempt_timeout_ms` for its answer: a paused controller accepts connections and never
answers, so the call moves on to the other voters. A call that timed out may still have been
applied (as in Kafka); CreateTopics then answers TOPIC_ALREADY_EXISTS on the retry. At most
`max_pending` calls in flight. (The observer that follows the metadata log is
RemoteMetadataLog, controller/quorum/remote_log.py.)

Threading: thread-safe; it owns its pool of threads and stops them in `close()`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

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
from client.protocol.body import Body
from client.security.tls import ReloadableContext
from controller.quorum.leader_tracker import LeaderTracker, client_context_of, voters_of
from controller.quorum.network import request
from controller.results import (
    AclCreationResult,
    AclDeletionResult,
    AlterConfigsResult,
    AlterPartitionResult,
    BrokerHeartbeatResult,
    BrokerRegistrationResult,
    ClientQuotaAlterResult,
    CreateTopicResult,
    DescribeQuorumResult,
    ElectionResult,
    OngoingTopicReassignment,
    ProducerIdsResult,
    ReassignmentTopicResult,
    ScramCredentialResult,
    TopicResult,
)

if TYPE_CHECKING:
    from controller.channel import ControllerChannel

_log = logging.getLogger(__name__)

ThrottlingQuotaExceededError = error_for_code(ErrorCode.THROTTLING_QUOTA_EXCEEDED)

T = TypeVar("T")


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
        self.tracker = LeaderTracker(voters_of(voters))
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

    # -- sending -----------------------------------------------------------------------------
    def _send(
        self,
        api_key: ApiKey,
        body: Body,
        unwrap: Callable[[Body], T],
        timeout_ms: int | None = None,
    ) -> concurrent.futures.Future[T]:
        """Send `body` to the active controller on the pool; the future resolves with
        `unwrap(answer)`. `timeout_ms`: this call gives up sooner than `request_timeout_ms`
        (None: not)."""
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

    def _release(self, _fut: concurrent.futures.Future[T]) -> None:
        with self._lock:
            self._pending -= 1

    def _run(self, api_key: ApiKey, body: Body, unwrap: Callable[[Body], T], timeout_s: float) -> T:
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
                    ssl_context=client_context_of(self.tls),
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
                    ssl_context=client_context_of(self.tls),
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

    # -- the ControllerChannel (controller/channel.py) ------------------------------------------
    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        rack: str | None = None,
        incarnation_id: str = "",
        endpoints: Sequence[tuple[str, str, int]] = (),
        cluster_id: str | None = None,
    ) -> concurrent.futures.Future[BrokerRegistrationResult]:
        body = {
            "broker_id": broker_id,
            "cluster_id": self.cluster_id if cluster_id is None else cluster_id,
            "host": host,
            "port": port,
            "rack": rack,
            "incarnation_id": incarnation_id,
            "endpoints": [{"name": n, "host": h, "port": p} for n, h, p in endpoints],
        }
        return self._send(ApiKey.BROKER_REGISTRATION, body, _registered)

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool = False,
        want_shutdown: bool = False,
        failed_replicas: Sequence[tuple[str, int]] = (),
        cannot_create_replicas: str | None = None,
        timeout_ms: int | None = None,
    ) -> concurrent.futures.Future[BrokerHeartbeatResult]:
        body = {
            "broker_id": broker_id,
            "broker_epoch": broker_epoch,
            "current_metadata_offset": current_metadata_offset,
            "want_fence": want_fence,
            "want_shutdown": want_shutdown,
            "failed_replicas": [{"topic": t, "partition": p} for t, p in failed_replicas],
            "cannot_create_replicas": cannot_create_replicas,
        }
        return self._send(ApiKey.BROKER_HEARTBEAT, body, _heartbeat, timeout_ms)

    def alter_partition(
        self, broker_id: int, broker_epoch: int, topics: list[Body]
    ) -> concurrent.futures.Future[AlterPartitionResult]:
        body = {"broker_id": broker_id, "broker_epoch": broker_epoch, "topics": topics}
        return self._send(ApiKey.ALTER_PARTITION, body, _as(AlterPartitionResult))

    def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> concurrent.futures.Future[ProducerIdsResult]:
        body = {"broker_id": broker_id, "broker_epoch": broker_epoch}
        return self._send(ApiKey.ALLOCATE_PRODUCER_IDS, body, _as(ProducerIdsResult))

    def create_topics(
        self, requests: list[Body], validate_only: bool = False
    ) -> concurrent.futures.Future[list[CreateTopicResult]]:
        body = {"topics": requests, "timeout_ms": _TIMEOUT_MS, "validate_only": validate_only}
        return self._send(ApiKey.CREATE_TOPICS, body, _field("topics", CreateTopicResult))

    def delete_topics(self, names: list[str]) -> concurrent.futures.Future[list[TopicResult]]:
        body = {"topic_names": names, "timeout_ms": _TIMEOUT_MS}
        return self._send(ApiKey.DELETE_TOPICS, body, _field("responses", TopicResult))

    def create_partitions(
        self, topics: list[Body], validate_only: bool = False
    ) -> concurrent.futures.Future[list[TopicResult]]:
        body = create_partitions_body(topics, validate_only)
        return self._send(ApiKey.CREATE_PARTITIONS, body, _field("results", TopicResult))

    def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None = None
    ) -> concurrent.futures.Future[list[ElectionResult]]:
        body = {"election_type": election_type, "topic_partitions": group_partitions(partitions)}
        return self._send(ApiKey.ELECT_LEADERS, body, _elected)

    def incremental_alter_configs(
        self, resources: list[Body], validate_only: bool = False
    ) -> concurrent.futures.Future[list[AlterConfigsResult]]:
        body = {"resources": resources, "validate_only": validate_only}
        return self._send(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, body, _field("responses", AlterConfigsResult)
        )

    def alter_configs(
        self, resources: list[Body], validate_only: bool = False
    ) -> concurrent.futures.Future[list[AlterConfigsResult]]:
        body = {"resources": resources, "validate_only": validate_only}
        return self._send(ApiKey.ALTER_CONFIGS, body, _field("responses", AlterConfigsResult))

    def alter_user_scram_credentials(
        self, deletions: list[Body], upsertions: list[Body]
    ) -> concurrent.futures.Future[list[ScramCredentialResult]]:
        body = {"deletions": deletions, "upsertions": upsertions}
        return self._send(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body, _field("results", ScramCredentialResult)
        )

    def alter_client_quotas(
        self, entries: list[Body], validate_only: bool = False
    ) -> concurrent.futures.Future[list[ClientQuotaAlterResult]]:
        body = {"entries": entries, "validate_only": validate_only}
        return self._send(
            ApiKey.ALTER_CLIENT_QUOTAS, body, _field("entries", ClientQuotaAlterResult)
        )

    def create_acls(
        self, creations: list[Body]
    ) -> concurrent.futures.Future[list[AclCreationResult]]:
        body = {"creations": creations}
        return self._send(ApiKey.CREATE_ACLS, body, _field("results", AclCreationResult))

    def delete_acls(
        self, filters: list[Body]
    ) -> concurrent.futures.Future[list[AclDeletionResult]]:
        body = {"filters": filters}
        return self._send(ApiKey.DELETE_ACLS, body, _field("filter_results", AclDeletionResult))

    def alter_partition_reassignments(
        self, topics: list[Body]
    ) -> concurrent.futures.Future[list[ReassignmentTopicResult]]:
        return self._send(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            {"topics": topics},
            _field("responses", ReassignmentTopicResult),
        )

    def list_partition_reassignments(
        self, partitions: list[tuple[str, int]] | None = None
    ) -> concurrent.futures.Future[list[OngoingTopicReassignment]]:
        return self._send(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            {"topics": group_topic_partitions(partitions)},
            _field("topics", OngoingTopicReassignment),
        )

    def describe_quorum(
        self, endpoint: str | None = None
    ) -> concurrent.futures.Future[DescribeQuorumResult]:
        """(`endpoint` is for an in-process leader; the remote leader names its own.)"""
        return self._send(ApiKey.DESCRIBE_QUORUM, {}, _as(DescribeQuorumResult))


_TIMEOUT_MS = 30_000  # CreateTopics/DeleteTopics/CreatePartitions' own timeout_ms field


def create_partitions_body(topics: list[Body], validate_only: bool) -> Body:
    """CreatePartitions' request body: each topic's `assignments` ([[broker ids]] per new
    partition, or None: the controller places them; [] stays [], a list of the wrong length)."""
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
    return {"topics": wire, "timeout_ms": _TIMEOUT_MS, "validate_only": validate_only}


def _as(_result: type[T]) -> Callable[[Body], T]:
    """The answer itself is the result: its wire body has the result's keys (decoded by the
    schema of its API, client/protocol/)."""
    return lambda r: cast(T, r)


def _field(key: str, _item: type[T]) -> Callable[[Body], list[T]]:
    """The result is the answer's per-item list `key`."""
    return lambda r: cast("list[T]", r[key])


def _registered(r: Body) -> BrokerRegistrationResult:
    """BrokerRegistration's answer; INCONSISTENT_CLUSTER_ID is raised (the broker cannot go
    on, and the message names both ids), anything else is the caller's to judge."""
    if r["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID:
        raise InconsistentClusterIdError(r.get("error_message") or "cluster id mismatch")
    return {
        "error_code": r["error_code"],
        "broker_epoch": r.get("broker_epoch", -1),
        "cluster_id": r.get("cluster_id"),
    }


def _heartbeat(r: Body) -> BrokerHeartbeatResult:
    return {
        "error_code": r.get("error_code", 0),
        "is_caught_up": r.get("is_caught_up", False),
        "is_fenced": r.get("is_fenced", True),
        "should_shut_down": r.get("should_shut_down", False),
    }


def _elected(r: Body) -> list[ElectionResult]:
    return cast("list[ElectionResult]", flatten_election_results(r["replica_election_results"]))


if TYPE_CHECKING:

    def _conforms(remote: RemoteController) -> ControllerChannel:
        return remote  # mypy: RemoteController implements the ControllerChannel Protocol
