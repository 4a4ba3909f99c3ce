"""Value types shared by the async core and the sync facade (all immutable).

ConsumerRecord is defined in client.records.record (the batch reader builds it directly) and
re-exported here.
"""

from __future__ import annotations

from typing import NamedTuple

from client.records.record import ConsumerRecord

__all__ = [
    "BrokerDescription",
    "ClusterDescription",
    "ConfigEntry",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "PartitionDescription",
    "RecordMetadata",
    "TopicDescription",
    "TopicPartition",
]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's group membership, for Producer.send_offsets_to_transaction (Kafka's
    ConsumerGroupMetadata): the group's coordinator checks the member at this epoch.
    `generation_id` is the member epoch (-1 and member_id "" outside a group: unchecked)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed. offset is -1 with acks=0 (no response)."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class BrokerDescription(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False  # only listed by describe_cluster(include_fenced=True)


class PartitionDescription(NamedTuple):
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    log_start_offset: int
    high_watermark: int
    leader_epoch: int = -1


class TopicDescription(NamedTuple):
    name: str
    partitions: list[PartitionDescription]
    # the id the controller gave the topic (Kafka's text form); a topic deleted and recreated
    # under the same name has a new one. None when the broker did not say.
    topic_id: str | None = None


class ClusterDescription(NamedTuple):
    cluster_id: str
    controller_id: int
    brokers: list[BrokerDescription]


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    read_only: bool
    is_default: bool
    is_sensitive: bool
