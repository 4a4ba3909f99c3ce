"""GregorStreamReader planning on the driver with an in-memory cluster view (no broker): new
partitions, availableNow target, rate limits, data-loss decisions, pickling."""

from __future__ import annotations

import pickle

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from client.spark.errors import GregorSparkError
from client.spark.offsets import PartitionState
from client.spark.options import parse_source_options
from client.spark.source import GregorStreamReader, source_schema


class ClusterView:
    """What Planner.state() would report; tests mutate `parts` between calls."""

    def __init__(self, parts: dict) -> None:
        self.parts = parts
        self.topic_ids: dict[str, str] = {}

    def forget_recreated(self, spec, state, name, sentinel):  # noqa: ANN001, ANN201
        return spec  # tests/spark/test_spark_batch.py covers it against a broker

    def state(self) -> dict:
        return dict(self.parts)

    def resolve(self, spec, state, default, name):  # noqa: ANN001, ANN201
        kind = spec.kind if spec.kind in ("earliest", "latest") else default
        return {
            tp: st.log_start if kind == "earliest" else st.high_watermark
            for tp, st in state.items()
        }

    def check_missing(self, state, batch):  # noqa: ANN001, ANN201
        pass  # tests/spark/test_planner_missing.py covers the rule

    def close(self) -> None:
        pass


def _reader(view: ClusterView, **opts: str) -> GregorStreamReader:
    o = parse_source_options({"bootstrap.servers": "h:1", "subscribe": "t", **opts}, batch=False)
    r = GregorStreamReader(o, source_schema(False))
    r._planner = view  # type: ignore[assignment]
    return r


def _ranges(parts: list) -> list[tuple]:
    return [(p.topic, p.partition, p.start, p.end) for p in parts]


def test_new_partition_is_read_from_its_beginning() -> None:
    view = ClusterView({("t", 0): PartitionState(0, 10)})
    r = _reader(view, startingOffsets="earliest")
    start = r.initialOffset()
    assert start == {"t": {"0": 0}}
    view.parts[("t", 0)] = PartitionState(0, 12)
    assert r.initialOffset() == start  # asked again: same answer
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 12}}
    view.parts[("t", 1)] = PartitionState(0, 4)  # partition added
    end2 = r.latestOffset(end, ReadAllAvailable())
    assert end2 == {"t": {"0": 12, "1": 4}}
    assert _ranges(r.partitions(end, end2)) == [("t", 1, 0, 4)]


def test_available_now_target_and_rate_limit() -> None:
    view = ClusterView({("t", 0): PartitionState(0, 300), ("t", 1): PartitionState(0, 100)})
    r = _reader(view, startingOffsets="earliest", maxOffsetsPerTrigger="100")
    assert r.getDefaultReadLimit() == ReadMaxRows(100)
    r.prepareForTriggerAvailableNow()
    view.parts[("t", 0)] = PartitionState(0, 1000)  # arrives after the target: not read
    pos = r.initialOffset()
    sizes = []
    while True:
        end = r.latestOffset(pos, ReadMaxRows(100))
        if end == pos:
            break
        sizes.append(sum(p.end - p.start for p in r.partitions(pos, end)))
        pos = end
    assert sizes == [100, 100, 100, 100] and pos == {"t": {"0": 300, "1": 100}}


def test_data_loss_in_planning() -> None:
    view = ClusterView({("t", 0): PartitionState(50, 80)})
    r = _reader(view)
    start = {"t": {"0": 10}}
    end = r.latestOffset(start, ReadAllAvailable())
    with pytest.raises(GregorSparkError, match="data loss: .*retention"):
        r.partitions(start, end)
    lenient = _reader(view, failOnDataLoss="false")
    assert _ranges(lenient.partitions(start, end)) == [("t", 0, 50, 80)]
    view.parts.clear()  # topic deleted
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {}
    with pytest.raises(GregorSparkError, match="data loss: .*deleted"):
        r.partitions(start, end)
    assert lenient.partitions(start, end) == []


def test_recreated_topic_in_planning() -> None:
    """Ids in the offsets: a changed id is data loss naming both; false reads the new topic
    from its log start, not from the old offsets (which lie inside the new topic here)."""
    view = ClusterView({("t", 0): PartitionState(0, 10), ("t", 1): PartitionState(0, 10)})
    view.topic_ids = {"t": "OLD"}
    r = _reader(view, startingOffsets="earliest")
    assert r.initialOffset() == {"t": {"0": 0, "1": 0, "topicId": "OLD"}}
    start = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    assert start == {"t": {"0": 10, "1": 10, "topicId": "OLD"}}
    view.parts = {("t", 0): PartitionState(0, 30), ("t", 1): PartitionState(0, 4)}
    view.topic_ids = {"t": "NEW"}
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 30, "1": 4, "topicId": "NEW"}}
    with pytest.raises(
        GregorSparkError,
        match=r"^data loss: topic t was deleted and recreated \(id OLD in the checkpoint, NEW now\)",
    ):
        r.partitions(start, end)
    lenient = _reader(view, failOnDataLoss="false")
    assert _ranges(lenient.partitions(start, end)) == [("t", 0, 0, 30), ("t", 1, 0, 4)]
    # an offset written before ids were kept: nothing to compare, the next one has the id
    legacy = {"t": {"0": 10, "1": 4}}
    assert r.latestOffset(legacy, ReadAllAvailable()) == end
    assert _ranges(r.partitions(legacy, end)) == [("t", 0, 10, 30)]


def test_reader_and_partitions_pickle_without_clients() -> None:
    r = _reader(ClusterView({("t", 0): PartitionState(0, 5)}), startingOffsets="earliest")
    parts = r.partitions({"t": {"0": 0}}, {"t": {"0": 5}})
    r2 = pickle.loads(pickle.dumps(r))
    assert r2._planner is None
    (p,) = pickle.loads(pickle.dumps(parts))
    assert (p.topic, p.partition, p.start, p.end, p.bootstrap) == ("t", 0, 0, 5, "h:1")
