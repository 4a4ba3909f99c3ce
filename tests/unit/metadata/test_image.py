"""MetadataImage / MetadataDelta / snapshots.

The property test draws a random valid record sequence and checks that replaying it one record at
a time gives, at every offset, the same image as loading the snapshot taken at that offset.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import CorruptRecordError
from controller.metadata import (
    NO_LEADER,
    RESOURCE_TOPIC,
    ClusterId,
    Config,
    FenceBroker,
    MetadataDelta,
    MetadataImage,
    MetadataReplayError,
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
    image_to_records,
    load_snapshot,
    replay,
    snapshot_bytes,
)

A = b"\x01" * 16
B = b"\x02" * 16


def _image(records):
    img, _ = replay(MetadataImage.EMPTY, list(enumerate(records)))
    return img


def test_empty_image():
    img = MetadataImage.EMPTY
    assert img.offset == -1 and not img.brokers and not img.topics
    assert img.partition("x", 0) is None
    assert img == MetadataImage()


def test_brokers_fence_unfence_unregister():
    img = _image([RegisterBroker(1, 0, "h", 1, "r"), RegisterBroker(2, 1, "h", 2)])
    assert img.live_brokers() == [] and img.brokers[1].fenced
    img2, d = replay(img, [(2, UnfenceBroker(1, 0))])
    assert img2.live_brokers() == [1] and d.changed_brokers == {1}
    img3, _ = replay(img2, [(3, FenceBroker(1, 0)), (4, UnregisterBroker(2, 1))])
    assert img3.live_brokers() == [] and list(img3.brokers) == [1]
    assert img2.live_brokers() == [1], "older image unchanged"
    with pytest.raises(MetadataReplayError):
        replay(img3, [(5, UnfenceBroker(1, 99))])


def test_topics_partitions_and_delta_changes():
    img = _image(
        [Topic("a", A), Partition(A, 0, (1, 2), (1, 2), 1), Partition(A, 1, (2, 1), (2, 1), 2)]
    )
    assert img.offset == 2
    assert img.topics["a"] is img.topics_by_id[A]
    p0 = img.partition("a", 0)
    assert (p0.replicas, p0.isr, p0.leader, p0.leader_epoch, p0.partition_epoch) == (
        (1, 2),
        (1, 2),
        1,
        0,
        0,
    )
    img2, d = replay(
        img, [(3, PartitionChange(A, 0, isr=(1,))), (4, PartitionChange(A, 1, leader=1, isr=(1,)))]
    )
    p0, p1 = img2.partition("a", 0), img2.partition("a", 1)
    assert (p0.isr, p0.leader_epoch, p0.partition_epoch) == ((1,), 0, 1)
    assert (p1.leader, p1.isr, p1.leader_epoch, p1.partition_epoch) == (1, (1,), 1, 1)
    assert d.leader_changed == {("a", 1)}
    assert set(d.changed_partitions) == {("a", 0), ("a", 1)}
    assert img2.partitions_led_by(1) == [("a", 0), ("a", 1)]
    assert img.partition("a", 0).isr == (1, 2), "older image unchanged"


def test_create_then_delete_topic_and_configs():
    img = _image(
        [
            Topic("a", A),
            Partition(A, 0, (1,), (1,), 1),
            Config(RESOURCE_TOPIC, "a", "retention.ms", "5"),
        ]
    )
    assert dict(img.topic_config("a")) == {"retention.ms": "5"}
    img2, d = replay(img, [(3, RemoveTopic(A)), (4, Topic("a", B))])
    assert d.deleted_topics == {"a": A} and d.created_topics == {"a": B}
    assert img2.topics["a"].topic_id == B and not img2.topics["a"].partitions
    assert not img2.topic_config("a")
    img3, _ = replay(
        img2,
        [(5, Config(RESOURCE_TOPIC, "a", "x", "1")), (6, Config(RESOURCE_TOPIC, "a", "x", None))],
    )
    assert not img3.topic_config("a")


def test_delta_created_and_removed_in_one_delta_reports_nothing():
    _, d = replay(
        MetadataImage.EMPTY,
        [(0, Topic("a", A)), (1, Partition(A, 0, (1,), (1,), 1)), (2, RemoveTopic(A))],
    )
    assert not d.created_topics and not d.deleted_topics and not d.changed_partitions


def test_topic_names_are_unique_across_image_and_delta():
    img = _image([Topic("a", A)])
    d = MetadataDelta(img)
    with pytest.raises(MetadataReplayError):
        d.replay(Topic("a", B), 1)  # name taken in the image
    d = MetadataDelta(img)
    d.replay(RemoveTopic(A), 1)
    d.replay(Topic("a", B), 2)  # free again once removed in this delta
    with pytest.raises(MetadataReplayError):
        d.replay(Topic("a", b"\x03" * 16), 3)  # taken inside this delta
    assert d.apply().topics["a"].topic_id == B


@pytest.mark.parametrize(
    "rec",
    [Partition(A, 0, (1,), (1,), 1), PartitionChange(A, 0), RemoveTopic(A), FenceBroker(1, 0)],
)
def test_replay_rejects_records_for_unknown_things(rec):
    with pytest.raises(MetadataReplayError):
        replay(MetadataImage.EMPTY, [(0, rec)])


def test_offsets_must_increase():
    d = MetadataDelta(MetadataImage.EMPTY)
    d.replay(NoOp(), 5)
    with pytest.raises(MetadataReplayError):
        d.replay(NoOp(), 5)


def test_snapshot_round_trip_and_garbage():
    img = _image(
        [
            RegisterBroker(1, 0, "h", 1, "r", "i", False),
            Topic("a", A),
            Partition(A, 0, (1,), (1,), 1, 3, 4),
            ProducerIds(1, 0, 2000),
            Config(4, "1", "log.retention.ms", "7"),
        ]
    )
    data = snapshot_bytes(img)
    assert load_snapshot(data) == img
    for bad in (b"", b"\x93\x01\x02\x03", data[:-3]):
        with pytest.raises(CorruptRecordError):
            load_snapshot(bad)


def test_cluster_id_record_replays_into_the_image_and_snapshots():
    img = _image([NoOp(), ClusterId("MkU3OEVBNTcwNTJENDM2Qk"), RegisterBroker(1, 0, "h", 1)])
    assert img.cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"
    assert MetadataImage.EMPTY.cluster_id is None
    # kept in snapshots, first (before anything that depends on it)
    assert image_to_records(img)[0] == ClusterId("MkU3OEVBNTcwNTJENDM2Qk")
    loaded = load_snapshot(snapshot_bytes(img))
    assert loaded == img and loaded.cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"
    # part of the state: images that differ only in the id are not equal
    assert not img.same_state(_image([NoOp(), NoOp(), RegisterBroker(1, 0, "h", 1)]))
    # later deltas keep it
    img2, _ = replay(img, [(3, UnfenceBroker(1, 0))])
    assert img2.cluster_id == img.cluster_id


def test_cluster_id_is_written_once():
    img = _image([ClusterId("one")])
    same, _ = replay(img, [(1, ClusterId("one"))])
    assert same.cluster_id == "one"
    with pytest.raises(MetadataReplayError, match="written once"):
        replay(img, [(1, ClusterId("two"))])
    with pytest.raises(MetadataReplayError):
        _image([ClusterId("")])


# -- property: replay one by one == snapshot at any offset --------------------------------------


@st.composite
def record_sequences(draw):
    brokers: dict[int, tuple[int, bool]] = {}  # id -> (epoch, fenced)
    topics: dict[bytes, tuple[str, int]] = {}  # id -> (name, partitions)
    names_used = 0
    recs = []
    for i in range(draw(st.integers(1, 40))):
        kind = draw(
            st.sampled_from(
                [
                    "reg",
                    "fence",
                    "unreg",
                    "topic",
                    "part",
                    "change",
                    "config",
                    "remove",
                    "pid",
                    "cluster",
                    "noop",
                ]
            )
        )
        if kind == "reg":
            bid = draw(st.integers(1, 4))
            recs.append(
                RegisterBroker(
                    bid,
                    i,
                    "h",
                    9000 + bid,
                    draw(st.sampled_from([None, "r1", "r2"])),
                    f"inc{i}",
                    draw(st.booleans()),
                )
            )
            brokers[bid] = (i, recs[-1].fenced)
        elif kind == "fence" and brokers:
            bid = draw(st.sampled_from(sorted(brokers)))
            epoch, fenced = brokers[bid]
            recs.append(UnfenceBroker(bid, epoch) if fenced else FenceBroker(bid, epoch))
            brokers[bid] = (epoch, not fenced)
        elif kind == "unreg" and brokers:
            bid = draw(st.sampled_from(sorted(brokers)))
            recs.append(UnregisterBroker(bid, brokers.pop(bid)[0]))
        elif kind == "topic":
            names_used += 1
            tid = names_used.to_bytes(16, "big")
            live = {n for n, _ in topics.values()}
            free = sorted(f"t{k}" for k in range(1, names_used) if f"t{k}" not in live)
            # sometimes reuse the name of a removed topic (a new id under an old name)
            name = draw(st.sampled_from(free)) if free and draw(st.booleans()) else None
            name = name or f"t{names_used}"
            topics[tid] = (name, 0)
            recs.append(Topic(name, tid))
        elif kind == "part" and topics:
            tid = draw(st.sampled_from(sorted(topics)))
            name, n = topics[tid]
            replicas = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True)))
            recs.append(
                Partition(tid, n, replicas, replicas[:1], replicas[0], draw(st.integers(0, 5)), 0)
            )
            topics[tid] = (name, n + 1)
        elif kind == "change" and any(n for _, n in topics.values()):
            tid = draw(st.sampled_from(sorted(t for t, (_, n) in topics.items() if n)))
            p = draw(st.integers(0, topics[tid][1] - 1))
            recs.append(
                PartitionChange(
                    tid,
                    p,
                    leader=draw(st.sampled_from([None, NO_LEADER, 1, 2])),
                    isr=draw(st.sampled_from([None, (1,), (1, 2)])),
                )
            )
        elif kind == "config":
            recs.append(
                Config(
                    draw(st.sampled_from([2, 4])),
                    draw(st.sampled_from(["t1", "t2", "1"])),
                    draw(st.sampled_from(["a", "b"])),
                    draw(st.sampled_from([None, "1", "2"])),
                )
            )
        elif kind == "remove" and topics:
            tid = draw(st.sampled_from(sorted(topics)))
            del topics[tid]
            recs.append(RemoveTopic(tid))
        elif kind == "pid":
            recs.append(ProducerIds(1, 0, draw(st.integers(0, 10**6))))
        elif kind == "cluster":
            recs.append(ClusterId("the-cluster"))  # (written once; the same id again is a no-op)
        else:
            recs.append(NoOp())
    return recs


@settings(max_examples=150, deadline=None)
@given(record_sequences())
def test_replay_equals_snapshot_at_every_offset(recs):
    image = MetadataImage.EMPTY
    for offset, rec in enumerate(recs):
        rec = decode_record(encode_record(rec))
        d = MetadataDelta(image)
        d.replay(rec, offset)
        image = d.apply()
        snap = load_snapshot(snapshot_bytes(image))
        assert snap == image, f"differs at offset {offset}"
        assert image_to_records(snap) == image_to_records(image)
    # and replaying the whole sequence at once gives the same final image
    whole, _ = replay(MetadataImage.EMPTY, list(enumerate(recs)))
    assert whole == image


@settings(max_examples=150, deadline=None)
@given(record_sequences(), st.data())
def test_replay_in_any_chunks_equals_one_by_one(recs, data):
    one_by_one = MetadataImage.EMPTY
    for offset, rec in enumerate(recs):
        one_by_one, _ = replay(one_by_one, [(offset, rec)])
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(recs) - 1)), max_size=5)))
    image, start = MetadataImage.EMPTY, 0
    for end in [*cuts, len(recs)]:
        image, _ = replay(image, [(o, recs[o]) for o in range(start, end)])
        start = end
    assert image == one_by_one
    assert {t.name: tid for tid, t in image.topics_by_id.items()} == {
        n: t.topic_id for n, t in image.topics.items()
    }
