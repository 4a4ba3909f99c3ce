"""Metadata records: the entries of the replicated metadata log.

Wire/disk layout of one encoded record (msgpack):

    [type: int, version: int, fields: map<str, value>]

`type` is the record's `TYPE` tag below (never renumber or reuse one); `version` is the record's
`VERSION`. Fields are the dataclass fields by name; a decoder ignores unknown fields (a newer writer)
and fills missing ones with their defaults (an older writer). Topic ids are 16 raw bytes (a UUID).
Replica lists travel as msgpack arrays and are tuples in memory.

Pure data: no I/O. Any thread may call these functions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import msgpack

from client.errors import CorruptRecordError

NO_LEADER = -1

# resource_type values for Config records (Kafka's ConfigResource.Type numbers)
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


@dataclass(frozen=True)
class RegisterBroker:
    """A broker registered (or re-registered) with a new epoch; starts fenced unless told."""

    TYPE: ClassVar[int] = 0
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int
    host: str
    port: int
    rack: str | None = None
    incarnation_id: str = ""
    fenced: bool = True
    # Every listener's advertised (name, host, port); empty (an older writer): host/port only.
    endpoints: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True)
class FenceBroker:
    TYPE: ClassVar[int] = 1
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class UnfenceBroker:
    TYPE: ClassVar[int] = 2
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class UnregisterBroker:
    TYPE: ClassVar[int] = 3
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class Topic:
    TYPE: ClassVar[int] = 4
    VERSION: ClassVar[int] = 0
    name: str
    topic_id: bytes


@dataclass(frozen=True)
class Partition:
    """Full state of one partition (creation, and in snapshots)."""

    TYPE: ClassVar[int] = 5
    VERSION: ClassVar[int] = 0
    topic_id: bytes
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # A reassignment in flight (KIP-455): `replicas` is the target followed by the replicas
    # being removed; `adding_replicas` are the target's replicas not in the original set.
    # Both empty: none in flight (an older writer's records never have one).
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class PartitionChange:
    """The fields of a partition that changed; None = unchanged.

    Replay bumps `partition_epoch` by one for every change, and `leader_epoch` by one when
    `leader` is set (Kafka's PartitionChangeRecord semantics). `leader` NO_LEADER (-1) = offline.
    `adding_replicas` / `removing_replicas`: a reassignment's state (see Partition); () clears
    it (the reassignment completed or was cancelled).
    """

    TYPE: ClassVar[int] = 6
    VERSION: ClassVar[int] = 0
    topic_id: bytes
    partition: int
    leader: int | None = None
    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Config:
    """Set (value str) or delete (value None) one config of a resource."""

    TYPE: ClassVar[int] = 7
    VERSION: ClassVar[int] = 0
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True)
class RemoveTopic:
    TYPE: ClassVar[int] = 8
    VERSION: ClassVar[int] = 0
    topic_id: bytes


@dataclass(frozen=True)
class ProducerIds:
    """A block of producer ids handed to a broker; `next_producer_id` is the first id not yet given."""

    TYPE: ClassVar[int] = 9
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True)
class NoOp:
    """Written by a new active controller to commit its term; changes nothing."""

    TYPE: ClassVar[int] = 10
    VERSION: ClassVar[int] = 0


@dataclass(frozen=True)
class BatchBegin:
    """Opens an atomic batch: the next `count` records were written by one controller call and
    apply together or not at all (see batches.py). Changes nothing itself."""

    TYPE: ClassVar[int] = 11
    VERSION: ClassVar[int] = 0
    count: int


@dataclass(frozen=True)
class ClusterId:
    """The cluster's id, fixed once by the controller quorum: the first active controller of a
    log without one writes it (its configured `cluster.id`, the id stored in its data dir, or a
    new random one). Every node compares its own stored/configured id with it and a broker
    stores it on registration (Kafka keeps cluster.id in meta.properties). Written once; a
    second record with another id is a broken invariant."""

    TYPE: ClassVar[int] = 12
    VERSION: ClassVar[int] = 0
    cluster_id: str


@dataclass(frozen=True)
class UserScramCredential:
    """Set a user's SCRAM credential for one mechanism (Kafka's UserScramCredentialRecord):
    the salt, StoredKey and ServerKey of RFC 5802 and the iteration count. Never the password
    nor the salted password: neither can be recovered from these."""

    TYPE: ClassVar[int] = 13
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: int  # 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (Kafka's ScramMechanism)
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True)
class RemoveUserScramCredential:
    TYPE: ClassVar[int] = 14
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: int


@dataclass(frozen=True)
class AccessControlEntry:
    """An ACL (Kafka's AccessControlEntryRecord): ALLOW or DENY `principal` from `host` the
    `operation` on the resources (`resource_type`, `resource_name`, `pattern_type`) names.
    Numbers are Kafka's (client/security/acl.py). `acl_id` (16 random bytes) names it for
    RemoveAccessControlEntry."""

    TYPE: ClassVar[int] = 15
    VERSION: ClassVar[int] = 0
    acl_id: bytes
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class RemoveAccessControlEntry:
    TYPE: ClassVar[int] = 16
    VERSION: ClassVar[int] = 0
    acl_id: bytes


@dataclass(frozen=True)
class ClientQuota:
    """Set (value) or remove (value None) one client quota of one entity (Kafka's
    ClientQuotaRecord). `entity` is a tuple of (entity type, name) pairs sorted by type, the
    types "user" and "client-id", a name None meaning that type's default entity (Kafka's
    `<default>`); `key` is producer_byte_rate, consumer_byte_rate or request_percentage."""

    TYPE: ClassVar[int] = 20
    VERSION: ClassVar[int] = 0
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float | None


MetadataRecord = (
    RegisterBroker
    | FenceBroker
    | UnfenceBroker
    | UnregisterBroker
    | Topic
    | Partition
    | PartitionChange
    | Config
    | RemoveTopic
    | ProducerIds
    | NoOp
    | BatchBegin
    | ClusterId
    | UserScramCredential
    | RemoveUserScramCredential
    | AccessControlEntry
    | RemoveAccessControlEntry
    | ClientQuota
)

RECORD_TYPES: dict[int, type] = {
    cls.TYPE: cls
    for cls in (
        RegisterBroker,
        FenceBroker,
        UnfenceBroker,
        UnregisterBroker,
        Topic,
        Partition,
        PartitionChange,
        Config,
        RemoveTopic,
        ProducerIds,
        NoOp,
        BatchBegin,
        ClusterId,
        UserScramCredential,
        RemoveUserScramCredential,
        AccessControlEntry,
        RemoveAccessControlEntry,
        ClientQuota,
    )
}

_TUPLE_FIELDS = {"replicas", "isr", "adding_replicas", "removing_replicas"}
_PAIR_FIELDS = {"endpoints"}  # lists of [name, host, port]
_ENTITY_FIELDS = {"entity"}  # lists of [entity type, name or nil]


def _entity(cls: type, name: str, v: Any) -> tuple[tuple[str, str | None], ...]:
    if not isinstance(v, list) or not all(
        isinstance(e, list)
        and len(e) == 2
        and isinstance(e[0], str)
        and (e[1] is None or isinstance(e[1], str))
        for e in v
    ):
        raise CorruptRecordError(f"{cls.__name__}.{name}: expected a list of [type, name]")
    return tuple((e[0], e[1]) for e in v)


def _endpoints(cls: type, name: str, v: Any) -> tuple[tuple[str, str, int], ...]:
    if not isinstance(v, list) or not all(
        isinstance(e, list)
        and len(e) == 3
        and isinstance(e[0], str)
        and isinstance(e[1], str)
        and isinstance(e[2], int)
        for e in v
    ):
        raise CorruptRecordError(f"{cls.__name__}.{name}: expected a list of [name, host, port]")
    return tuple((e[0], e[1], e[2]) for e in v)


_FIELDS: dict[type, tuple[dataclasses.Field[Any], ...]] = {
    cls: dataclasses.fields(cls) for cls in RECORD_TYPES.values()
}


def encode_record(rec: Any) -> bytes:
    """Encode one metadata record to bytes."""
    cls = type(rec)
    if RECORD_TYPES.get(getattr(cls, "TYPE", None)) is not cls:  # type: ignore[arg-type]
        raise TypeError(f"not a metadata record: {rec!r}")
    fields = {f.name: getattr(rec, f.name) for f in _FIELDS[cls]}
    packed: bytes = msgpack.packb([cls.TYPE, cls.VERSION, fields], use_bin_type=True)
    return packed


def decode_record(data: bytes) -> Any:
    """Decode bytes from `encode_record`; raises CorruptRecordError on anything malformed."""
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as e:  # msgpack raises several unrelated exception types
        raise CorruptRecordError(f"metadata record is not msgpack: {e}") from e
    if not (isinstance(obj, list) and len(obj) == 3 and isinstance(obj[2], dict)):
        raise CorruptRecordError("metadata record is not [type, version, fields]")
    type_, _version, raw = obj
    cls = RECORD_TYPES.get(type_) if isinstance(type_, int) else None
    if cls is None:
        raise CorruptRecordError(f"unknown metadata record type {type_!r}")
    kwargs = {}
    for f in _FIELDS[cls]:
        if f.name in raw:
            v = raw[f.name]
            if f.name in _TUPLE_FIELDS and v is not None:
                if not isinstance(v, list):
                    raise CorruptRecordError(f"{cls.__name__}.{f.name}: expected a list")
                v = tuple(v)
            if f.name in _PAIR_FIELDS and v is not None:
                v = _endpoints(cls, f.name, v)
            if f.name in _ENTITY_FIELDS:
                v = _entity(cls, f.name, v)
            kwargs[f.name] = v
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise CorruptRecordError(f"{cls.__name__}: {e}") from e
