"""AclControlManager (CreateAcls, DeleteAcls) on a real LocalMetadataLog: valid creations are
written as AccessControlEntry records (once: a duplicate writes nothing), invalid ones are
refused with INVALID_REQUEST and write nothing, deletes remove what each filter matches; the
image and a snapshot of it keep the ACLs."""

from __future__ import annotations

import random

import pytest

from client.errors import ErrorCode
from client.security.acl import AclBindingFilter, AclOperation, PatternType, ResourceType
from client.security.acl_wire import filter_to_wire
from controller.metadata import image_from_records, image_to_records
from controller.quorum import ControllerSettings, LocalMetadataLog, QuorumController


@pytest.fixture
def controller(tmp_path):
    log = LocalMetadataLog(str(tmp_path / "meta"))
    c = QuorumController(log, ControllerSettings(), lambda: 0.0, random.Random(1))
    yield c
    log.close()


def creation(name="orders", op=3, perm=3, principal="User:alice", rtype=2, pattern=3) -> dict:
    return {
        "resource_type": rtype,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": "*",
        "operation": op,
        "permission_type": perm,
    }


def test_create_then_duplicate_then_invalid(controller):
    r = controller.acls.create_acls([creation(), creation("logs-", op=4, pattern=4)])
    assert [x["error_code"] for x in r] == [0, 0]
    assert len(controller.image.acls) == 2
    r = controller.acls.create_acls(
        [creation(), creation(op=99), creation(principal="alice"), creation(rtype=3, op=4)]
    )
    assert [x["error_code"] for x in r] == [0] + [int(ErrorCode.INVALID_REQUEST)] * 3
    assert "principal" in r[2]["error_message"]
    assert len(controller.image.acls) == 2  # nothing written for the duplicate nor the refused


def test_delete_by_filter_and_snapshot(controller):
    controller.acls.create_acls(
        [creation(), creation("orders", op=4), creation("logs-", op=4, pattern=4)]
    )
    snap = image_from_records(image_to_records(controller.image), controller.image.offset)
    assert dict(snap.acls) == dict(controller.image.acls)
    flt = AclBindingFilter(
        ResourceType.TOPIC, "orders", PatternType.LITERAL, operation=AclOperation.WRITE
    )
    res = controller.acls.delete_acls([filter_to_wire(flt), filter_to_wire(flt)])
    assert [len(x["matching_acls"]) for x in res] == [1, 0]
    assert res[0]["matching_acls"][0]["operation"] == int(AclOperation.WRITE)
    match = AclBindingFilter(ResourceType.TOPIC, "logs-x", PatternType.MATCH)
    res = controller.acls.delete_acls([filter_to_wire(match)])
    assert [m["resource_name"] for m in res[0]["matching_acls"]] == ["logs-"]
    remaining = list(controller.image.acls.values())
    assert [(b.resource_name, b.operation) for b in remaining] == [("orders", AclOperation.READ)]
    bad = filter_to_wire(AclBindingFilter(ResourceType.UNKNOWN))
    assert controller.acls.delete_acls([bad])[0]["error_code"] == int(ErrorCode.INVALID_REQUEST)
