"""Asyncio core of the Gregor client (docs/architecture.md §10; aiokafka's shape).

    from client.aio import Producer, Consumer, Admin

Every object is owned by the event loop it is started on. The synchronous facade in
`client.sync` runs these on a background loop thread per client object.
"""

from client.aio.admin import Admin
from client.aio.admin_groups import (
    GroupDescription,
    GroupListing,
    GroupMemberDescription,
    GroupPartitionLag,
)
from client.aio.admin_quorum import QuorumDescription, QuorumReplica
from client.aio.admin_reassign import LogDirDescription, PartitionReassignment
from client.aio.consumer import Consumer
from client.aio.producer import Producer
from client.aio.types import (
    BrokerDescription,
    ClusterDescription,
    ConfigEntry,
    ConsumerGroupMetadata,
    ConsumerRecord,
    PartitionDescription,
    RecordMetadata,
    TopicDescription,
    TopicPartition,
)

__all__ = [
    "Admin",
    "BrokerDescription",
    "ClusterDescription",
    "ConfigEntry",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "GroupDescription",
    "GroupListing",
    "GroupMemberDescription",
    "GroupPartitionLag",
    "LogDirDescription",
    "PartitionDescription",
    "PartitionReassignment",
    "Producer",
    "QuorumDescription",
    "QuorumReplica",
    "RecordMetadata",
    "TopicDescription",
    "TopicPartition",
]
