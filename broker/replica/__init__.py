"""Replica management: partition state, the replica manager, delayed produce/fetch.

Public API: ReplicaManager, ReplicaSettings, FetchParams, FetchPartitionSpec, Partition,
DelayedProduce, DelayedFetch, ProducePartitionStatus. See docs/replication.md.
"""

from broker.replica.delayed import DelayedFetch, DelayedProduce, ProducePartitionStatus
from broker.replica.manager import ReplicaManager, ReplicaSettings
from broker.replica.partition import Partition
from broker.replica.specs import FetchParams, FetchPartitionSpec

__all__ = [
    "DelayedFetch",
    "DelayedProduce",
    "FetchParams",
    "FetchPartitionSpec",
    "Partition",
    "ProducePartitionStatus",
    "ReplicaManager",
    "ReplicaSettings",
]
