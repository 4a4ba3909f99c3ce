"""ScramControlManager (AlterUserScramCredentials) on a real LocalMetadataLog: salted passwords
in, StoredKey/ServerKey records out; per-user refusals that change nothing for that user; the
image and a snapshot of it keep the credentials; sasl.scram.bootstrap.file applies once."""

from __future__ import annotations

import random

import pytest

from client.security.scram import ScramClient, ScramCredential, ScramServer, salted_password
from controller.metadata import image_from_records, image_to_records
from controller.quorum import ControllerSettings, LocalMetadataLog, QuorumController
from controller.quorum.scram_control import parse_bootstrap_file


@pytest.fixture
def controller(tmp_path):
    log = LocalMetadataLog(str(tmp_path / "meta"))
    c = QuorumController(log, ControllerSettings(), lambda: 0.0, random.Random(1))
    yield c
    log.close()


def upsert(name: str, mechanism: int, password: str, iterations: int = 4096) -> dict:
    mech = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}[mechanism]
    salt = b"salt-of-" + name.encode()
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted_password(mech, password, salt, iterations),
    }


def test_upserts_store_keys_that_authenticate(controller) -> None:
    r = controller.scram.alter_user_scram_credentials(
        [], [upsert("alice", 1, "pw"), upsert("alice", 2, "pw")]
    )
    assert r == [{"user": "alice", "error_code": 0, "error_message": None}]
    creds = controller.image.scram_credentials["alice"]
    assert set(creds) == {1, 2}
    rec = creds[1]
    stored = ScramCredential(
        "SCRAM-SHA-256", rec.salt, rec.stored_key, rec.server_key, rec.iterations
    )
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server = ScramServer("SCRAM-SHA-256", {"alice": stored}.get)
    client.verify(server.final(client.final(server.first(client.first()))))
    assert b"pw" not in repr(rec).encode()  # (no field holds the password)


def test_refusals_are_per_user(controller) -> None:
    controller.scram.alter_user_scram_credentials([], [upsert("bob", 1, "pw")])
    r = controller.scram.alter_user_scram_credentials(
        [{"name": "carol", "mechanism": 1}, {"name": "bob", "mechanism": 2}],
        [
            upsert("dave", 1, "pw", iterations=100),
            {**upsert("erin", 1, "pw"), "mechanism": 3},
            upsert("frank", 1, "pw"),
            upsert("frank", 1, "pw2"),
            upsert("", 1, "pw"),
            {**upsert("gina", 1, "pw"), "salt": b""},
            upsert("hal", 2, "pw"),
        ],
    )
    codes = {x["user"]: x["error_code"] for x in r}
    assert codes == {
        "carol": 91,  # RESOURCE_NOT_FOUND
        "bob": 91,
        "dave": 93,  # UNACCEPTABLE_CREDENTIAL
        "erin": 33,  # UNSUPPORTED_SASL_MECHANISM
        "frank": 92,  # DUPLICATE_RESOURCE
        "": 93,
        "gina": 93,
        "hal": 0,
    }
    assert set(controller.image.scram_credentials) == {"bob", "hal"}
    r = controller.scram.alter_user_scram_credentials([{"name": "bob", "mechanism": 1}], [])
    assert r[0]["error_code"] == 0 and "bob" not in controller.image.scram_credentials


def test_credentials_survive_a_snapshot(controller) -> None:
    controller.scram.alter_user_scram_credentials([], [upsert("alice", 2, "pw")])
    image = controller.image
    again = image_from_records(image_to_records(image), image.offset)
    assert (
        again == image
        and again.scram_credentials["alice"][2] == image.scram_credentials["alice"][2]
    )


def test_bootstrap_file_applies_to_an_empty_log_only(tmp_path) -> None:
    path = tmp_path / "users.txt"
    path.write_text("SCRAM-SHA-256=[name=admin,password=pw,iterations=4096]\n")

    log = LocalMetadataLog(str(tmp_path / "meta"))
    try:
        c = QuorumController(log, ControllerSettings(), lambda: 0.0, random.Random(1))
        c.scram = type(c.scram)(c.core, parse_bootstrap_file(str(path)))
        c.scram.write_bootstrap()
        first = c.image.scram_credentials["admin"][1]
        c.scram.write_bootstrap()  # already has credentials: nothing more
        c.scram.alter_user_scram_credentials(
            [{"name": "admin", "mechanism": 1}], [upsert("x", 1, "y")]
        )
        c.scram.write_bootstrap()  # the log has credentials (x): admin is not brought back
        assert set(c.image.scram_credentials) == {"x"}
        assert first.iterations == 4096 and len(first.stored_key) == 32
    finally:
        log.close()
