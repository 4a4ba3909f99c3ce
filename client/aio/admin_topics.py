"""Admin's topic calls: create_topic, delete_topic, create_partitions (CreateTopics 19,
DeleteTopics 20, CreatePartitions 37, sent to any broker, which forwards them to the active
controller) and elect_leaders (ElectLeaders 43).

A topic change returns once this client's metadata shows it (`wait_metadata`: the topic there
with a leader for each of its partitions, or gone), so a producer or consumer created next
finds it.

Loop-owned: every function runs on the admin's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping

from client.aio.cluster import ClusterClient
from client.aio.types import TopicPartition
from client.errors import ConfigError, ErrorCode, GregorTimeoutError, error_for_code
from client.protocol import ApiKey
from client.protocol.apis.admin import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    flatten_election_results,
    group_partitions,
)

_ELECTION_TYPES = {"preferred": ELECTION_PREFERRED, "unclean": ELECTION_UNCLEAN}


async def create_topic(
    cluster: ClusterClient,
    name: str,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, str] | None,
    replica_assignment: Iterable[Iterable[int]] | None,
    timeout: int,
    validate_only: bool,
    exist_ok: bool,
) -> None:
    """Admin.create_topic (its docstring says what each argument does)."""
    assignments = []
    if replica_assignment is not None:
        rows = [[int(b) for b in r] for r in replica_assignment]
        if partitions not in (1, -1, len(rows)) or (
            rows and replication_factor not in (1, -1, len(rows[0]))
        ):
            raise ValueError(
                f"replica_assignment gives {len(rows)} partitions of"
                f" {len(rows[0]) if rows else 0} replicas: partitions={partitions},"
                f" replication_factor={replication_factor} disagree (leave them out)"
            )
        if not rows:
            raise ValueError("replica_assignment is empty: give at least one partition")
        partitions = replication_factor = -1
        assignments = [{"partition": i, "broker_ids": r} for i, r in enumerate(rows)]
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": replication_factor,
                "assignments": assignments,
                "configs": [
                    {"name": k, "value": None if v is None else str(v)}
                    for k, v in (config or {}).items()
                ],
            }
        ],
        "timeout_ms": timeout,
        "validate_only": validate_only,
    }
    resp = await cluster.send_any(ApiKey.CREATE_TOPICS, body, timeout_ms=timeout + 5000)
    for t in resp["topics"]:
        if t["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS and exist_ok:
            continue
        if t["error_code"]:
            raise error_for_code(t["error_code"])(t["error_message"] or f"topic {t['name']!r}")
    if not validate_only:
        await wait_metadata(cluster, name, present=True, timeout_ms=timeout)


async def delete_topic(cluster: ClusterClient, name: str, timeout: int) -> None:
    resp = await cluster.send_any(
        ApiKey.DELETE_TOPICS,
        {"topic_names": [name], "timeout_ms": timeout},
        timeout_ms=timeout + 5000,
    )
    for t in resp["responses"]:
        if t["error_code"]:
            raise error_for_code(t["error_code"])(t["error_message"] or f"topic {t['name']!r}")
    await wait_metadata(cluster, name, present=False, timeout_ms=timeout)


async def create_partitions(
    cluster: ClusterClient,
    topic: str,
    total_count: int,
    assignments: Iterable[Iterable[int]] | None,
    timeout: int,
    validate_only: bool,
) -> None:
    """Admin.create_partitions."""
    body = {
        "topics": [
            {
                "name": topic,
                "count": total_count,
                "assignments": None
                if assignments is None
                else [{"broker_ids": [int(b) for b in a]} for a in assignments],
            }
        ],
        "timeout_ms": timeout,
        "validate_only": validate_only,
    }
    resp = await cluster.send_any(ApiKey.CREATE_PARTITIONS, body, timeout_ms=timeout + 5000)
    for r in resp["results"]:
        if r["error_code"]:
            raise error_for_code(r["error_code"])(r["error_message"] or f"topic {r['name']!r}")
    if not validate_only:
        await wait_metadata(cluster, topic, present=True, timeout_ms=timeout, count=total_count)


async def elect_leaders(
    cluster: ClusterClient,
    partitions: Iterable[TopicPartition] | None,
    election_type: str,
    timeout: int,
) -> dict[TopicPartition, Exception | None]:
    """Admin.elect_leaders."""
    if election_type not in _ELECTION_TYPES:
        raise ConfigError(
            f"election_type must be one of {sorted(_ELECTION_TYPES)}, not {election_type!r}"
        )
    wanted = None if partitions is None else [(tp.topic, tp.partition) for tp in partitions]
    body = {
        "election_type": _ELECTION_TYPES[election_type],
        "topic_partitions": group_partitions(wanted),
        "timeout_ms": timeout,
    }
    resp = await cluster.send_any(ApiKey.ELECT_LEADERS, body, timeout_ms=timeout + 5000)
    results = flatten_election_results(resp["replica_election_results"])
    if resp["error_code"] and not results:
        raise error_for_code(resp["error_code"])("ElectLeaders")
    out: dict[TopicPartition, Exception | None] = {}
    for r in results:
        tp = TopicPartition(r["topic"], r["partition"])
        code = r["error_code"]
        out[tp] = error_for_code(code)(r["error_message"] or str(tp)) if code else None
    return out


async def wait_metadata(
    cluster: ClusterClient, name: str, present: bool, timeout_ms: int, count: int = 0
) -> None:
    """Until `cluster`'s metadata shows `name` with a leader for each of at least `count`
    partitions (`present`), or without it; GregorTimeoutError after `timeout_ms`."""
    deadline = time.monotonic() + timeout_ms / 1000
    delay = 0.005
    while True:
        md = await cluster.fetch_topics([name])
        parts = md.topics.get(name)
        ok = (
            (parts is not None and len(parts) >= count and all(p.leader >= 0 for p in parts))
            if present
            else parts is None
        )
        if ok:
            if not present:
                cluster._topics.discard(name)
            return
        if time.monotonic() > deadline:
            state = "appear" if present else "disappear"
            if present and count:
                state = f"show {count} partitions"
            raise GregorTimeoutError(
                f"topic {name!r} did not {state} in metadata within {timeout_ms} ms"
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.1)
