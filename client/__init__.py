"""Gregor client library (docs/architecture.md §10).

    from client import Producer, Consumer, Admin, TopicPartition   # blocking facade
    from client.aio import Producer, Consumer, Admin                # asyncio core

Also owns what every process shares: protocol, records, config definitions and errors.
The client classes are imported lazily, so `import client.errors` (as brokers do) does not
load the client library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (for the type checker only: at run time __getattr__ below loads them)
    from client import errors
    from client.aio import (
        ClusterDescription,
        ConsumerGroupMetadata,
        ConsumerRecord,
        PartitionDescription,
        QuorumDescription,
        QuorumReplica,
        RecordMetadata,
        TopicDescription,
        TopicPartition,
    )
    from client.sync import Admin, Consumer, Producer

__all__ = [
    "Admin",
    "ClusterDescription",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "PartitionDescription",
    "Producer",
    "QuorumDescription",
    "QuorumReplica",
    "RecordMetadata",
    "TopicDescription",
    "TopicPartition",
    "errors",
]

_SYNC = {"Producer", "Consumer", "Admin"}
_TYPES = {
    "TopicPartition",
    "RecordMetadata",
    "ConsumerRecord",
    "ConsumerGroupMetadata",
    "TopicDescription",
    "PartitionDescription",
    "ClusterDescription",
    "QuorumDescription",
    "QuorumReplica",
}


def __getattr__(name: str) -> Any:
    if name in _SYNC:
        from client import sync

        return getattr(sync, name)
    if name in _TYPES:
        import client.aio

        return getattr(client.aio, name)
    if name == "errors":
        import client.errors

        return client.errors
    raise AttributeError(f"module 'client' has no attribute {name!r}")
