"""Cluster metadata: records (records.py), the immutable image (image.py), replay (delta.py),
snapshots (snapshot.py) and replica placement (placement.py). Pure code, no I/O."""

from controller.metadata.batches import BatchAssembler, replay_committed
from controller.metadata.delta import MetadataDelta, MetadataReplayError, replay
from controller.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from controller.metadata.records import (
    NO_LEADER,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    BatchBegin,
    Config,
    FenceBroker,
    NoOp,
    Partition,
    PartitionChange,
    ProducerIds,
    RegisterBroker,
    RemoveTopic,
    Topic,
    UnfenceBroker,
    UnregisterBroker,
    decode_record,
    encode_record,
)
from controller.metadata.snapshot import (
    image_from_records,
    image_to_records,
    load_snapshot,
    snapshot_bytes,
)

__all__ = [
    "NO_LEADER",
    "RESOURCE_BROKER",
    "RESOURCE_TOPIC",
    "BatchAssembler",
    "BatchBegin",
    "BrokerRegistration",
    "Config",
    "FenceBroker",
    "MetadataDelta",
    "MetadataImage",
    "MetadataReplayError",
    "NoOp",
    "Partition",
    "PartitionChange",
    "PartitionRegistration",
    "ProducerIds",
    "RegisterBroker",
    "RemoveTopic",
    "Topic",
    "TopicImage",
    "UnfenceBroker",
    "UnregisterBroker",
    "decode_record",
    "encode_record",
    "image_from_records",
    "image_to_records",
    "load_snapshot",
    "replay",
    "replay_committed",
    "snapshot_bytes",
]
