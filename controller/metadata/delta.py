"""MetadataDelta: replay records onto an image, producing a new image and what changed.

    delta = MetadataDelta(image)
    for offset, rec in committed: delta.replay(rec, offset)
    new_image = delta.apply()
    delta.created_topics, delta.deleted_topics, delta.changed_partitions, delta.leader_changed ...

Replay is deterministic: the same records onto the same image always give the same image. A
record that contradicts the image (a partition of an unknown topic, an unknown broker) is a
broken invariant of the log and raises MetadataReplayError. Not thread-safe: one owner thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import Any

from client.security.acl import AclBinding
from controller.metadata.acls import binding_from_record
from controller.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from controller.metadata.records import (
    RESOURCE_TOPIC,
    AccessControlEntry,
    BatchBegin,
    ClientQuota,
    ClusterId,
    Config,
    FenceBroker,
    NoOp,
    Partition,
    PartitionChange,
    ProducerIds,
    RegisterBroker,
    RemoveAccessControlEntry,
    RemoveTopic,
    RemoveUserScramCredential,
    Topic,
    UnfenceBroker,
    UnregisterBroker,
    UserScramCredential,
)


class MetadataReplayError(ValueError):
    """A record cannot apply to the image (the metadata log broke an invariant)."""


class MetadataDelta:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.offset = image.offset
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._topics: dict[bytes, TopicImage] | None = None  # by id
        self._parts: dict[bytes, dict[int, PartitionRegistration]] = {}  # touched topics
        self._configs: dict[tuple[int, str], dict[str, str]] | None = None
        self._next_producer_id = image.next_producer_id
        self._cluster_id = image.cluster_id
        self._scram: dict[str, dict[int, UserScramCredential]] | None = None
        self._acls: dict[bytes, AclBinding] | None = None
        self._quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] | None = None
        # -- what changed (public, read after replaying) --
        self.created_topics: dict[str, bytes] = {}  # name -> topic id
        self.deleted_topics: dict[str, bytes] = {}  # name -> topic id
        # (topic name, partition) -> new registration
        self.changed_partitions: dict[tuple[str, int], PartitionRegistration] = {}
        self.leader_changed: set[tuple[str, int]] = set()  # new partitions included
        self.changed_brokers: set[int] = set()
        self.changed_configs: set[tuple[int, str]] = set()
        self.changed_users: set[str] = set()  # SCRAM credentials set or removed
        self.acls_changed = False
        self.quotas_changed = False  # a ClientQuota record was replayed
        self.records_replayed = 0

    # -- replay --------------------------------------------------------------------------------
    def replay(self, rec: Any, offset: int) -> None:
        if offset <= self.offset:
            raise MetadataReplayError(f"offset {offset} not after {self.offset}")
        handler = _HANDLERS.get(type(rec))
        if handler is None:
            raise MetadataReplayError(f"not a metadata record: {rec!r}")
        handler(self, rec)
        self.offset = offset
        self.records_replayed += 1

    def replay_all(self, records: Iterable[tuple[int, Any]]) -> None:
        for offset, rec in records:
            self.replay(rec, offset)

    # -- result --------------------------------------------------------------------------------
    def apply(self) -> MetadataImage:
        """The image after every replayed record. May be called more than once."""
        img = self.image
        brokers = img.brokers if self._brokers is None else MappingProxyType(dict(self._brokers))
        if self._topics is None and not self._parts:
            topics, by_id = img.topics, img.topics_by_id
        else:
            # Copy the maps whole (C speed) and patch only what this delta touched: every
            # created or changed topic has a `_parts` entry, every removed name is in
            # deleted_topics (a name removed and re-created is patched back in below).
            src = self._topics if self._topics is not None else img.topics_by_id
            new_by_id: dict[bytes, TopicImage] = dict(src)
            by_name: dict[str, TopicImage] = dict(img.topics)
            for name in self.deleted_topics:
                by_name.pop(name, None)
            for tid, parts in self._parts.items():
                t = TopicImage(new_by_id[tid].name, tid, MappingProxyType(dict(parts)))
                new_by_id[tid] = by_name[t.name] = t
            by_id = MappingProxyType(new_by_id)
            topics = MappingProxyType(by_name)
        if self._configs is None:
            configs = img.configs
        else:
            configs = MappingProxyType(
                {k: MappingProxyType(dict(v)) for k, v in self._configs.items() if v}
            )
        return MetadataImage(
            offset=self.offset,
            brokers=brokers,
            topics=topics,
            topics_by_id=by_id,
            configs=configs,
            next_producer_id=self._next_producer_id,
            cluster_id=self._cluster_id,
            scram_credentials=img.scram_credentials
            if self._scram is None
            else MappingProxyType(
                {k: MappingProxyType(dict(v)) for k, v in self._scram.items() if v}
            ),
            acls=img.acls if self._acls is None else MappingProxyType(dict(self._acls)),
            client_quotas=img.client_quotas
            if self._quotas is None
            else MappingProxyType(
                {k: MappingProxyType(dict(v)) for k, v in self._quotas.items() if v}
            ),
        )

    # -- working copies ------------------------------------------------------------------------
    def _w_brokers(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.image.brokers)
        return self._brokers

    def _w_topics(self) -> dict[bytes, TopicImage]:
        if self._topics is None:
            self._topics = dict(self.image.topics_by_id)
        return self._topics

    def _w_parts(self, topic_id: bytes) -> dict[int, PartitionRegistration]:
        parts = self._parts.get(topic_id)
        if parts is None:
            t = self._w_topics().get(topic_id)
            if t is None:
                raise MetadataReplayError(f"unknown topic id {topic_id.hex()}")
            parts = self._parts[topic_id] = dict(t.partitions)
        return parts

    def _w_configs(self) -> dict[tuple[int, str], dict[str, str]]:
        if self._configs is None:
            self._configs = {k: dict(v) for k, v in self.image.configs.items()}
        return self._configs

    def _broker(self, broker_id: int) -> BrokerRegistration:
        b = self._w_brokers().get(broker_id)
        if b is None:
            raise MetadataReplayError(f"unknown broker {broker_id}")
        return b

    def _topic_name(self, topic_id: bytes) -> str:
        t = self._w_topics().get(topic_id)
        if t is None:
            raise MetadataReplayError(f"unknown topic id {topic_id.hex()}")
        return t.name

    # -- record handlers -----------------------------------------------------------------------
    def _register_broker(self, r: RegisterBroker) -> None:
        self._w_brokers()[r.broker_id] = BrokerRegistration(
            r.broker_id,
            r.broker_epoch,
            r.host,
            r.port,
            r.rack,
            r.incarnation_id,
            r.fenced,
            tuple(r.endpoints),
        )
        self.changed_brokers.add(r.broker_id)

    def _set_fenced(self, broker_id: int, epoch: int, fenced: bool) -> None:
        b = self._broker(broker_id)
        if b.broker_epoch != epoch:
            raise MetadataReplayError(
                f"broker {broker_id}: epoch {epoch} does not match {b.broker_epoch}"
            )
        self._w_brokers()[broker_id] = dataclasses.replace(b, fenced=fenced)
        self.changed_brokers.add(broker_id)

    def _fence(self, r: FenceBroker) -> None:
        self._set_fenced(r.broker_id, r.broker_epoch, True)

    def _unfence(self, r: UnfenceBroker) -> None:
        self._set_fenced(r.broker_id, r.broker_epoch, False)

    def _unregister(self, r: UnregisterBroker) -> None:
        self._broker(r.broker_id)
        del self._w_brokers()[r.broker_id]
        self.changed_brokers.add(r.broker_id)

    def _name_taken(self, name: str) -> bool:
        if name in self.created_topics:
            return True
        return name in self.image.topics and name not in self.deleted_topics

    def _topic(self, r: Topic) -> None:
        topics = self._w_topics()
        if r.topic_id in topics or self._name_taken(r.name):
            raise MetadataReplayError(f"topic {r.name} / {r.topic_id.hex()} exists")
        topics[r.topic_id] = TopicImage(r.name, r.topic_id)
        self._parts[r.topic_id] = {}
        self.created_topics[r.name] = r.topic_id

    def _partition(self, r: Partition) -> None:
        parts = self._w_parts(r.topic_id)
        reg = PartitionRegistration(
            tuple(r.replicas),
            tuple(r.isr),
            r.leader,
            r.leader_epoch,
            r.partition_epoch,
            tuple(r.adding_replicas),
            tuple(r.removing_replicas),
        )
        parts[r.partition] = reg
        key = (self._topic_name(r.topic_id), r.partition)
        self.changed_partitions[key] = reg
        self.leader_changed.add(key)

    def _partition_change(self, r: PartitionChange) -> None:
        parts = self._w_parts(r.topic_id)
        old = parts.get(r.partition)
        if old is None:
            raise MetadataReplayError(f"unknown partition {r.topic_id.hex()}-{r.partition}")
        reg = PartitionRegistration(
            replicas=old.replicas if r.replicas is None else tuple(r.replicas),
            isr=old.isr if r.isr is None else tuple(r.isr),
            leader=old.leader if r.leader is None else r.leader,
            leader_epoch=old.leader_epoch + (0 if r.leader is None else 1),
            partition_epoch=old.partition_epoch + 1,
            adding_replicas=old.adding_replicas
            if r.adding_replicas is None
            else tuple(r.adding_replicas),
            removing_replicas=old.removing_replicas
            if r.removing_replicas is None
            else tuple(r.removing_replicas),
        )
        parts[r.partition] = reg
        key = (self._topic_name(r.topic_id), r.partition)
        self.changed_partitions[key] = reg
        if r.leader is not None:
            self.leader_changed.add(key)

    def _config(self, r: Config) -> None:
        configs = self._w_configs()
        key = (r.resource_type, r.resource_name)
        if r.value is None:
            cur = configs.get(key)
            if cur is not None:
                cur.pop(r.name, None)
        else:
            configs.setdefault(key, {})[r.name] = r.value
        self.changed_configs.add(key)

    def _remove_topic(self, r: RemoveTopic) -> None:
        topics = self._w_topics()
        t = topics.pop(r.topic_id, None)
        if t is None:
            raise MetadataReplayError(f"unknown topic id {r.topic_id.hex()}")
        self._parts.pop(r.topic_id, None)
        if self.created_topics.pop(t.name, None) is None:
            self.deleted_topics[t.name] = r.topic_id
        for key in [k for k in self.changed_partitions if k[0] == t.name]:
            del self.changed_partitions[key]
            self.leader_changed.discard(key)
        ckey = (RESOURCE_TOPIC, t.name)
        if ckey in self._w_configs():
            del self._w_configs()[ckey]
            self.changed_configs.add(ckey)

    def _producer_ids(self, r: ProducerIds) -> None:
        self._next_producer_id = r.next_producer_id

    def _cluster_id_record(self, r: ClusterId) -> None:
        if not isinstance(r.cluster_id, str) or not r.cluster_id:
            raise MetadataReplayError(f"cluster id {r.cluster_id!r} is not a non-empty string")
        if self._cluster_id is not None and self._cluster_id != r.cluster_id:
            raise MetadataReplayError(
                f"cluster id {r.cluster_id!r} after {self._cluster_id!r}: it is written once"
            )
        self._cluster_id = r.cluster_id

    def _w_scram(self) -> dict[str, dict[int, UserScramCredential]]:
        if self._scram is None:
            self._scram = {k: dict(v) for k, v in self.image.scram_credentials.items()}
        return self._scram

    def _user_scram(self, r: UserScramCredential) -> None:
        self._w_scram().setdefault(r.name, {})[r.mechanism] = r
        self.changed_users.add(r.name)

    def _remove_user_scram(self, r: RemoveUserScramCredential) -> None:
        creds = self._w_scram().get(r.name)
        if creds is None or creds.pop(r.mechanism, None) is None:
            raise MetadataReplayError(f"user {r.name!r} has no credential {r.mechanism}")
        self.changed_users.add(r.name)

    def _w_acls(self) -> dict[bytes, AclBinding]:
        if self._acls is None:
            self._acls = dict(self.image.acls)
        return self._acls

    def _acl(self, r: AccessControlEntry) -> None:
        try:
            binding = binding_from_record(r)
        except ValueError as exc:
            raise MetadataReplayError(str(exc)) from None
        acls = self._w_acls()
        if r.acl_id in acls:
            raise MetadataReplayError(f"ACL id {r.acl_id.hex()} written twice")
        acls[r.acl_id] = binding
        self.acls_changed = True

    def _remove_acl(self, r: RemoveAccessControlEntry) -> None:
        if self._w_acls().pop(r.acl_id, None) is None:
            raise MetadataReplayError(f"no ACL with id {r.acl_id!r} to remove")
        self.acls_changed = True

    def _client_quota(self, r: ClientQuota) -> None:
        if self._quotas is None:
            self._quotas = {k: dict(v) for k, v in self.image.client_quotas.items()}
        if r.value is None:
            self._quotas.get(r.entity, {}).pop(r.key, None)
        else:
            self._quotas.setdefault(r.entity, {})[r.key] = float(r.value)
        self.quotas_changed = True

    def _noop(self, r: NoOp) -> None:
        pass


_HANDLERS: dict[type, Callable[[MetadataDelta, Any], None]] = {
    RegisterBroker: MetadataDelta._register_broker,
    FenceBroker: MetadataDelta._fence,
    UnfenceBroker: MetadataDelta._unfence,
    UnregisterBroker: MetadataDelta._unregister,
    Topic: MetadataDelta._topic,
    Partition: MetadataDelta._partition,
    PartitionChange: MetadataDelta._partition_change,
    Config: MetadataDelta._config,
    RemoveTopic: MetadataDelta._remove_topic,
    ProducerIds: MetadataDelta._producer_ids,
    NoOp: MetadataDelta._noop,
    BatchBegin: MetadataDelta._noop,
    ClusterId: MetadataDelta._cluster_id_record,
    UserScramCredential: MetadataDelta._user_scram,
    RemoveUserScramCredential: MetadataDelta._remove_user_scram,
    AccessControlEntry: MetadataDelta._acl,
    RemoveAccessControlEntry: MetadataDelta._remove_acl,
    ClientQuota: MetadataDelta._client_quota,
}


def replay(
    image: MetadataImage, records: Iterable[tuple[int, Any]]
) -> tuple[MetadataImage, MetadataDelta]:
    """Replay (offset, record) pairs onto `image`; returns (new image, delta)."""
    delta = MetadataDelta(image)
    delta.replay_all(records)
    return delta.apply(), delta
