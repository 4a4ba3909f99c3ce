"""Snapshots: a MetadataImage as a list of records, and as bytes.

Byte layout of a snapshot (msgpack):

    ["gregor-metadata-snapshot", version: int (=0), offset: int64, records: array<bin>]

where each element of `records` is one `encode_record` output. Loading replays the records onto
the empty image and stamps the result with `offset`. Pure: any thread may call.
"""

from __future__ import annotations

from typing import Any

import msgpack

from client.errors import CorruptRecordError
from controller.metadata.acls import record_from_binding
from controller.metadata.delta import MetadataDelta
from controller.metadata.image import MetadataImage
from controller.metadata.records import (
    ClientQuota,
    ClusterId,
    Config,
    Partition,
    ProducerIds,
    RegisterBroker,
    Topic,
    decode_record,
    encode_record,
)

MAGIC = "gregor-metadata-snapshot"
VERSION = 0


def image_to_records(image: MetadataImage) -> list[Any]:
    """Records that rebuild `image` from the empty image (deterministic order)."""
    out: list[Any] = []
    if image.cluster_id is not None:
        out.append(ClusterId(image.cluster_id))
    for bid in sorted(image.brokers):
        b = image.brokers[bid]
        out.append(
            RegisterBroker(
                b.broker_id,
                b.broker_epoch,
                b.host,
                b.port,
                b.rack,
                b.incarnation_id,
                b.fenced,
                b.endpoints,
            )
        )
    for name in sorted(image.topics):
        t = image.topics[name]
        out.append(Topic(t.name, t.topic_id))
        for p in sorted(t.partitions):
            r = t.partitions[p]
            out.append(
                Partition(
                    t.topic_id,
                    p,
                    r.replicas,
                    r.isr,
                    r.leader,
                    r.leader_epoch,
                    r.partition_epoch,
                    r.adding_replicas,
                    r.removing_replicas,
                )
            )
    for rtype, rname in sorted(image.configs):
        for k, v in sorted(image.configs[(rtype, rname)].items()):
            out.append(Config(rtype, rname, k, v))
    if image.next_producer_id:
        out.append(ProducerIds(-1, -1, image.next_producer_id))
    for user in sorted(image.scram_credentials):
        creds = image.scram_credentials[user]
        out.extend(creds[m] for m in sorted(creds))
    for acl_id in sorted(image.acls):
        out.append(record_from_binding(acl_id, image.acls[acl_id]))
    for entity in sorted(image.client_quotas, key=repr):
        for key, value in sorted(image.client_quotas[entity].items()):
            out.append(ClientQuota(entity, key, value))
    return out


def image_from_records(records: list[Any], offset: int) -> MetadataImage:
    """Inverse of image_to_records: the image those records build, stamped with `offset`."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    # Replay with synthetic offsets 0.., then stamp the snapshot's own offset.
    for i, rec in enumerate(records):
        delta.replay(rec, i)
    delta.offset = offset
    return delta.apply()


def snapshot_bytes(image: MetadataImage) -> bytes:
    recs = [encode_record(r) for r in image_to_records(image)]
    packed: bytes = msgpack.packb([MAGIC, VERSION, image.offset, recs], use_bin_type=True)
    return packed


def load_snapshot(data: bytes) -> MetadataImage:
    """Image from `snapshot_bytes` output; CorruptRecordError on malformed input."""
    try:
        obj = msgpack.unpackb(data, raw=False)
    except Exception as e:
        raise CorruptRecordError(f"metadata snapshot is not msgpack: {e}") from e
    if not (isinstance(obj, list) and len(obj) == 4 and obj[0] == MAGIC):
        raise CorruptRecordError("not a gregor metadata snapshot")
    _, version, offset, recs = obj
    if version != VERSION or not isinstance(offset, int) or not isinstance(recs, list):
        raise CorruptRecordError(f"unsupported metadata snapshot version {version!r}")
    return image_from_records([decode_record(r) for r in recs], offset)
