"""MetadataImage: an immutable view of the cluster metadata at one log offset.

An image is never changed in place; `MetadataDelta` (delta.py) replays records onto an image and
builds a new one, sharing every untouched part. All maps are read-only (MappingProxyType).
Images compare equal when they hold the same state and offset. Any thread may read an image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from client.security.acl import AclBinding
from controller.metadata.records import NO_LEADER, RESOURCE_TOPIC, UserScramCredential

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    broker_epoch: int
    host: str
    port: int
    rack: str | None
    incarnation_id: str
    fenced: bool
    # Each listener's advertised (name, host, port); empty for a broker registered with its
    # host/port only (one listener). host/port are the inter-broker listener's.
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where a client that connected on `listener` reaches this broker; None when the broker
        has no such listener (Kafka leaves it out of the answer)."""
        if not self.endpoints:
            return (self.host, self.port)
        for name, host, port in self.endpoints:
            if name == listener:
                return (host, port)
        return None


@dataclass(frozen=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # a reassignment in flight (KIP-455): replicas = target + removing_replicas
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def online(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once a reassignment in flight completes (the replicas when none is)."""
        if not self.removing_replicas:
            return self.replicas
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment in flight (what cancelling it restores)."""
        if not self.adding_replicas:
            return self.replicas
        return tuple(r for r in self.replicas if r not in self.adding_replicas)


@dataclass(frozen=True)
class TopicImage:
    name: str
    topic_id: bytes
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=lambda: _EMPTY)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicImage):
            return NotImplemented
        return (
            self.name == other.name
            and self.topic_id == other.topic_id
            and dict(self.partitions) == dict(other.partitions)
        )

    def __hash__(self) -> int:
        return hash(self.topic_id)


@dataclass(frozen=True, eq=False)
class MetadataImage:
    """Cluster metadata after applying every record up to and including `offset` (-1: none)."""

    offset: int = -1
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _EMPTY)
    topics: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)  # by name
    topics_by_id: Mapping[bytes, TopicImage] = field(default_factory=lambda: _EMPTY)
    # (resource_type, resource_name) -> {config name: value}
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0
    cluster_id: str | None = None  # the ClusterId record's; None before it is written
    # user name -> {mechanism number: its UserScramCredential record}
    scram_credentials: Mapping[str, Mapping[int, UserScramCredential]] = field(
        default_factory=lambda: _EMPTY
    )

    # ACL id (16 bytes) -> the binding its AccessControlEntry record holds
    acls: Mapping[bytes, AclBinding] = field(default_factory=lambda: _EMPTY)
    # client quota entity ((type, name or None), ...) -> {quota key: value} (ClientQuota records)
    client_quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]] = field(
        default_factory=lambda: _EMPTY
    )

    EMPTY: ClassVar[MetadataImage]  # the image before any record, set below

    # -- queries -------------------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)

    def live_brokers(self) -> list[int]:
        """Ids of registered, unfenced brokers, ascending."""
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def topic_config(self, topic: str) -> Mapping[str, str]:
        return self.configs.get((RESOURCE_TOPIC, topic), _EMPTY)

    def config_for(self, resource_type: int, resource_name: str) -> Mapping[str, str]:
        return self.configs.get((resource_type, resource_name), _EMPTY)

    def reassigning_partitions(self) -> list[tuple[str, int]]:
        """(topic, partition) of every reassignment in flight, sorted."""
        return sorted(
            (t.name, p)
            for t in self.topics.values()
            for p, reg in t.partitions.items()
            if reg.adding_replicas or reg.removing_replicas
        )

    def partitions_led_by(self, broker_id: int) -> list[tuple[str, int]]:
        return [
            (t.name, p)
            for t in self.topics.values()
            for p, reg in t.partitions.items()
            if reg.leader == broker_id
        ]

    # -- comparison ----------------------------------------------------------------------------
    def _key(self) -> tuple[Any, ...]:
        return (
            self.offset,
            dict(self.brokers),
            dict(self.topics),
            {k: dict(v) for k, v in self.configs.items()},
            self.next_producer_id,
            self.cluster_id,
            {k: dict(v) for k, v in self.scram_credentials.items()},
            dict(self.acls),
            {k: dict(v) for k, v in self.client_quotas.items()},
        )

    def same_state(self, other: MetadataImage) -> bool:
        """Equal apart from the offset."""
        return self._key()[1:] == other._key()[1:]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetadataImage):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.offset, len(self.brokers), len(self.topics)))


MetadataImage.EMPTY = MetadataImage()
