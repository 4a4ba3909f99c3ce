"""broker/kafka/codec.py: dicts with Kafka's field names → kio entities, and back to ms."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.metadata.v12.response import MetadataResponse

from broker.kafka.codec import build, encode_response, millis


def test_build_converts_error_codes_lists_and_nested_entities() -> None:
    body = build(
        ApiVersionsResponse,
        {
            "error_code": 35,
            "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12}],
            "throttle_time": 5,
        },
    )
    assert body.error_code is KioErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(3, 0, 12)]
    assert millis(body.throttle_time) == 5
    frame = encode_response(18, 3, 7, body)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4


def test_build_fills_missing_lists_and_converts_uuids() -> None:
    tid = uuid.uuid4()
    body = build(
        MetadataResponse,
        {
            "throttle_time": 0,
            "cluster_id": "c",
            "controller_id": 1,
            "topics": [
                {"error_code": 0, "name": "t", "topic_id": tid.bytes, "is_internal": False},
                {"error_code": 0, "name": "u", "topic_id": b"", "is_internal": False},
            ],
        },
    )
    assert body.brokers == ()
    assert [t.topic_id for t in body.topics] == [tid, uuid.UUID(int=0)]
    assert body.topics[0].partitions == ()


def test_build_refuses_values_of_the_wrong_shape() -> None:
    with pytest.raises(TypeError, match="not an integer"):
        build(ApiVersionsResponse, {"error_code": object(), "throttle_time": 0})
    with pytest.raises(TypeError, match="not a mapping"):
        build(ApiVersionsResponse, {"error_code": 0, "api_keys": [3], "throttle_time": 0})
    with pytest.raises(TypeError, match="not a list"):
        build(ApiVersionsResponse, {"error_code": 0, "api_keys": 3, "throttle_time": 0})


def test_millis_reads_durations_datetimes_and_ints() -> None:
    assert millis(datetime.timedelta(seconds=2)) == 2000
    when = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    assert millis(when) == int(when.timestamp() * 1000)
    assert millis(42) == 42
    with pytest.raises(TypeError):
        millis(b"x")
