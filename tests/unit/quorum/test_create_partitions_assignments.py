"""CreatePartitions with manual assignments: the list must have one entry per new partition.
An empty list is a list of the wrong length (INVALID_REPLICA_ASSIGNMENT, as Kafka), not "let
the controller place them" (that is `None`)."""

from __future__ import annotations

import random

import pytest

from client.errors import ErrorCode
from controller.quorum import ControllerSettings, LocalMetadataLog, QuorumController
from controller.quorum.remote import create_partitions_body


@pytest.fixture
def controller(tmp_path):
    log = LocalMetadataLog(str(tmp_path / "meta"))
    c = QuorumController(log, ControllerSettings(), lambda: 0.0, random.Random(7))
    for b in (1, 2):
        epoch = c.cluster.register_broker(b, "127.0.0.1", 9000 + b, None, f"inc-{b}")[
            "broker_epoch"
        ]
        assert not c.cluster.broker_heartbeat(b, epoch, c.last_written_offset)["is_fenced"]
    res = c.replication.create_topics(
        [{"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": []}]
    )
    assert res[0]["error_code"] == 0
    yield c
    log.close()


@pytest.mark.parametrize(
    ("assignments", "code"),
    [
        ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # 0 entries for 2 new partitions
        ([[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # 1 entry for 2
        ([[1], [2], [1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # 3 entries for 2
        ([[1], [2]], ErrorCode.NONE),
        (None, ErrorCode.NONE),  # placed by the controller
    ],
)
def test_assignment_count_must_match_new_partitions(controller, assignments, code) -> None:
    before = controller.image
    res = controller.replication.create_partitions(
        [{"name": "t", "count": 3, "assignments": assignments}]
    )
    assert res[0]["error_code"] == code, res
    parts = controller.image.topics["t"].partitions
    if code:
        assert "2 assignments" in res[0]["error_message"]
        assert controller.image is before and sorted(parts) == [0]
    else:
        assert sorted(parts) == [0, 1, 2]
        if assignments is not None:
            assert [parts[p].replicas for p in (1, 2)] == [(1,), (2,)]


def test_remote_controller_keeps_an_empty_list_distinct_from_none() -> None:
    """The broker-side RemoteController sends [] as [] (the controller then refuses it)."""
    body = create_partitions_body([{"name": "t", "count": 3, "assignments": []}], False)
    assert body["topics"][0]["assignments"] == []
    body = create_partitions_body([{"name": "t", "count": 3, "assignments": None}], False)
    assert body["topics"][0]["assignments"] is None
