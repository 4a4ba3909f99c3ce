"""Topic ids in the source's offset JSON (pure): the round trip, offsets written before ids were
kept, recreated-topic detection and its data-loss reason, and "topicId" in startingOffsets."""

from __future__ import annotations

import json
import logging

import pytest

from client.errors import ConfigError
from client.spark.offsets import (
    READ_NEW_TOPIC,
    DataLossError,
    from_json,
    ids_from_json,
    recreated,
    recreated_reason,
    report_data_loss,
    to_json,
)
from client.spark.options import parse_source_options


def test_offsets_carry_topic_ids_and_round_trip() -> None:
    offs = {("a", 0): 3, ("a", 1): 9, ("b", 0): 7}
    j = to_json(offs, {"a": "AAAAAAAAAAAAAAAAAAAAAQ", "c": "unused"})
    assert j == {"a": {"0": 3, "1": 9, "topicId": "AAAAAAAAAAAAAAAAAAAAAQ"}, "b": {"0": 7}}
    back = json.loads(json.dumps(j))  # as Spark's checkpoint hands it back
    assert from_json(back) == offs
    assert ids_from_json(back) == {"a": "AAAAAAAAAAAAAAAAAAAAAQ"}


def test_an_offset_written_before_ids_still_loads_and_compares_nothing() -> None:
    old = json.loads('{"t": {"0": 12, "1": 40}}')
    assert from_json(old) == {("t", 0): 12, ("t", 1): 40}
    assert ids_from_json(old) == {}
    assert recreated(ids_from_json(old), {"t": "NEWID"}) == {}
    # the next offset written is the upgraded shape
    assert to_json(from_json(old), {"t": "NEWID"}) == {"t": {"0": 12, "1": 40, "topicId": "NEWID"}}


def test_recreated_topics_are_named_with_both_ids() -> None:
    gone = recreated({"a": "OLD", "b": "B1", "x": "X"}, {"a": "NEW", "b": "B1", "c": "C"})
    assert gone == {"a": ("OLD", "NEW")}
    reason = recreated_reason("a", "OLD", "NEW")
    assert reason == "topic a was deleted and recreated (id OLD in the checkpoint, NEW now)"
    with pytest.raises(DataLossError) as ei:
        report_data_loss(reason, True, READ_NEW_TOPIC)
    msg = str(ei.value)
    assert msg.startswith("data loss: topic a was deleted and recreated (id OLD in the checkpoint")
    assert "failOnDataLoss=false to read the new topic from its earliest offset" in msg


def test_recreated_topic_logged_when_not_failing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="client.spark.offsets"):
        report_data_loss(recreated_reason("a", "OLD", "NEW"), False, READ_NEW_TOPIC)
    assert "read the new topic from its earliest offset" in caplog.text
    assert "id OLD in the checkpoint, NEW now" in caplog.text


def _opts(**kw: str) -> dict[str, str]:
    base = {"bootstrap.servers": "h:1", "subscribe": "t"}
    base.update(kw)
    return {k.lower(): v for k, v in base.items()}


def test_starting_offsets_json_accepts_topic_ids() -> None:
    o = parse_source_options(
        _opts(startingOffsets='{"t": {"0": 5, "topicId": "ID1"}, "u": {"1": 2}}'), batch=True
    )
    assert o.starting.kind == "offsets"
    assert o.starting.as_dict() == {("t", 0): 5, ("u", 1): 2}
    assert o.starting.ids() == {"t": "ID1"}
    with pytest.raises(ConfigError, match="'topicId' must be a non-empty string"):
        parse_source_options(_opts(startingOffsets='{"t": {"0": 5, "topicId": 7}}'), batch=True)
    with pytest.raises(ConfigError, match="must map to an object of partition"):
        parse_source_options(_opts(startingOffsets='{"t": {"topicId": "ID1"}}'), batch=True)
    # a timestamp JSON has no ids: the key is refused as a partition
    with pytest.raises(ConfigError, match="bad entry 't'/'topicId'"):
        parse_source_options(
            _opts(startingOffsetsByTimestamp='{"t": {"0": 5, "topicId": "ID1"}}'), batch=True
        )
