"""Raw-protocol helpers for the produce/fetch/topics integration tests (H-replica)."""

from __future__ import annotations

from typing import Any

from helpers import RawClient

from client.protocol import ApiKey
from client.records import build_batch, decode_records


def create_topic(c: RawClient, name: str, partitions: int = 1, configs: dict | None = None) -> dict:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": 10_000,
        "validate_only": False,
    }
    resp = c.request(ApiKey.CREATE_TOPICS, 0, body)
    return resp["topics"][0]


def batch(values: list[bytes], key: bytes | None = None) -> bytes:
    return build_batch([(key, v) for v in values])


def produce(
    c: RawClient, topic: str, partition: int, records: bytes, acks: int = -1, corr: int = 1
) -> dict:
    body = {
        "acks": acks,
        "timeout_ms": 10_000,
        "topics": [{"name": topic, "partitions": [{"partition": partition, "records": records}]}],
    }
    resp = c.request(ApiKey.PRODUCE, 0, body, correlation_id=corr)
    return resp["topics"][0]["partitions"][0]


def fetch(
    c: RawClient,
    topic: str,
    partition: int,
    offset: int,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 1 << 20,
) -> dict:
    body = {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "partition_max_bytes": partition_max_bytes,
                    }
                ],
            }
        ],
    }
    resp = c.request(ApiKey.FETCH, 0, body)
    return resp["topics"][0]["partitions"][0]


def values_of(records: bytes) -> list[tuple[int, Any]]:
    return [(r.offset, r.value) for r in decode_records(records)] if records else []


def list_offset(c: RawClient, topic: str, partition: int, ts: int) -> dict:
    body = {
        "replica_id": -1,
        "topics": [{"name": topic, "partitions": [{"partition": partition, "timestamp": ts}]}],
    }
    return c.request(ApiKey.LIST_OFFSETS, 0, body)["topics"][0]["partitions"][0]
