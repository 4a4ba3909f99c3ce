"""The Produce handler answers with `respond_raw` (no schema walk per partition), so its
response must already be exactly what the schema check would return: every field present,
each of its schema type, for every kind of partition status the handler builds."""

from __future__ import annotations

from broker.handlers.produce import _response
from broker.replica.delayed import ProducePartitionStatus
from client.errors import ErrorCode
from client.protocol import API_SPECS, ApiKey


def test_produce_response_needs_no_schema_fill():
    statuses = {
        ("a", 0): ProducePartitionStatus(0, base_offset=7, log_start_offset=0),
        ("a", 1): ProducePartitionStatus(
            int(ErrorCode.NOT_LEADER_OR_FOLLOWER), error_message="not the leader"
        ),
        ("b", 3): ProducePartitionStatus(
            int(ErrorCode.REQUEST_TIMED_OUT), required_offset=-1, leader_epoch=4
        ),
    }
    body = _response([("a", [0, 1]), ("b", [3])], statuses)
    spec = API_SPECS[ApiKey.PRODUCE]
    for version in range(spec.min_version, spec.max_version + 1):
        assert spec.response.check(body, version) == body  # nothing filled, nothing refused
    assert body["topics"][0]["partitions"][0]["base_offset"] == 7
    assert body["topics"][0]["partitions"][1]["error_message"] == "not the leader"
