"""ClientQuotaControlManager (AlterClientQuotas) on a real LocalMetadataLog: ClientQuota
records set and remove keys per entity; a bad entry is refused whole and changes nothing;
validate_only writes nothing; the image and a snapshot of it keep the quotas."""

from __future__ import annotations

import random

import pytest

from controller.metadata import decode_record, encode_record, image_from_records, image_to_records
from controller.metadata.records import ClientQuota
from controller.quorum import ControllerSettings, LocalMetadataLog, QuorumController


@pytest.fixture
def controller(tmp_path):
    log = LocalMetadataLog(str(tmp_path / "meta"))
    c = QuorumController(log, ControllerSettings(), lambda: 0.0, random.Random(1))
    yield c
    log.close()


def entry(entity: dict, **ops) -> dict:
    return {
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
        "ops": [
            {"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
            for k, v in ops.items()
        ],
    }


def test_set_change_and_remove(controller) -> None:
    r = controller.quotas.alter_client_quotas(
        [
            entry({"user": "alice"}, producer_byte_rate=1024, request_percentage=50.5),
            entry({"user": None, "client-id": "etl"}, consumer_byte_rate=2048),
        ]
    )
    assert [e["error_code"] for e in r] == [0, 0]
    assert r[1]["entity"] == [
        {"entity_type": "user", "entity_name": None},
        {"entity_type": "client-id", "entity_name": "etl"},
    ]
    q = controller.image.client_quotas
    assert dict(q[(("user", "alice"),)]) == {
        "producer_byte_rate": 1024.0,
        "request_percentage": 50.5,
    }
    assert dict(q[(("client-id", "etl"), ("user", None))]) == {"consumer_byte_rate": 2048.0}
    controller.quotas.alter_client_quotas(
        [entry({"user": "alice"}, producer_byte_rate=None, request_percentage=75)]
    )
    assert dict(controller.image.client_quotas[(("user", "alice"),)]) == {
        "request_percentage": 75.0
    }
    controller.quotas.alter_client_quotas([entry({"user": "alice"}, request_percentage=None)])
    assert (("user", "alice"),) not in controller.image.client_quotas


@pytest.mark.parametrize(
    "bad, words",
    [
        (entry({"ip": "1.2.3.4"}, producer_byte_rate=1), "unknown quota entity type"),
        (entry({}, producer_byte_rate=1), "names a user"),
        (entry({"user": "a"}, bogus_rate=1), "unknown quota key"),
        (entry({"user": "a"}, producer_byte_rate=0), "positive"),
        (entry({"user": "a"}, producer_byte_rate=1.5), "whole number"),
        (entry({"user": ""}, producer_byte_rate=1), "empty user name"),
    ],
)
def test_a_bad_entry_is_refused_whole(controller, bad, words) -> None:
    good = entry({"client-id": "c"}, producer_byte_rate=10)
    bad = dict(bad, ops=bad["ops"] + [{"key": "consumer_byte_rate", "value": 5.0, "remove": False}])
    r = controller.quotas.alter_client_quotas([bad, good])
    assert r[0]["error_code"] == 42 and words in r[0]["error_message"]
    assert r[1]["error_code"] == 0
    assert list(controller.image.client_quotas) == [(("client-id", "c"),)]


def test_type_named_twice_is_refused(controller) -> None:
    e = entry({"user": "a"}, producer_byte_rate=1)
    e["entity"].append({"entity_type": "user", "entity_name": "b"})
    assert controller.quotas.alter_client_quotas([e])[0]["error_code"] == 42
    assert not controller.image.client_quotas


def test_validate_only_writes_nothing(controller) -> None:
    before = controller.last_written_offset
    r = controller.quotas.alter_client_quotas([entry({"user": "a"}, producer_byte_rate=1)], True)
    assert r[0]["error_code"] == 0
    assert controller.last_written_offset == before and not controller.image.client_quotas


def test_snapshot_and_record_codec_keep_quotas(controller) -> None:
    controller.quotas.alter_client_quotas(
        [
            entry({"user": None}, producer_byte_rate=100),
            entry({"user": "bob", "client-id": None}, request_percentage=12.5),
        ]
    )
    img = controller.image
    again = image_from_records(image_to_records(img), img.offset)
    assert again == img and dict(again.client_quotas) == dict(img.client_quotas)
    rec = ClientQuota((("client-id", None), ("user", "bob")), "request_percentage", None)
    assert decode_record(encode_record(rec)) == rec
