"""SASL (issue 25, items 2 and 4) on a real broker with real TLS sockets: SCRAM-SHA-256,
SCRAM-SHA-512 and PLAIN; the refusals (wrong password, unknown user, PLAIN without TLS, a
tampered SCRAM proof), each an answer that does not tell whether the user exists, late by
connection.failed.authentication.delay.ms; what a connection gets before it authenticated
(the handshake APIs only, small frames, a deadline), with an authenticated canary served
throughout; and credentials stored only as salted keys.

The broker has a PLAINTEXT inter-broker listener (INTERNAL): that is where the first user is
created (docs/security.md, "The first user").
"""

from __future__ import annotations

import base64
import logging
import os
import re
import time
from pathlib import Path

import pytest
from helpers import RawClient, wait_until
from tls_certs import Pki

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import (
    ResourceNotFoundError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from client.protocol import ApiKey
from client.security.scram import ScramClient

DELAY_MS = 300


@pytest.fixture
def sasl_broker(broker_factory, tmp_path):
    pki = Pki(tmp_path / "pki")
    node = pki.issue("broker-1")
    b = broker_factory(
        listeners="INTERNAL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        inter_broker_listener_name="INTERNAL",
        **{
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
            "ssl.certfile": node.cert,
            "ssl.keyfile": node.key,
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            "connection.failed.authentication.delay.ms": DELAY_MS,
            "sasl.server.authentication.timeout.ms": 1500,
        },
    )
    ports = {e.name: e.port for e in b.server.listeners.bind}
    with Admin(bootstrap_servers=f"127.0.0.1:{ports['INTERNAL']}") as admin:
        admin.create_user("alice", "alice-secret-8731", mechanism="SCRAM-SHA-256")
        admin.create_user("alice", "alice-secret-8731", mechanism="SCRAM-SHA-512")
    b.ports, b.ca = ports, pki.ca
    return b


def _client(b, protocol: str, mechanism: str, user: str, password: str) -> dict:
    port = b.ports[protocol]
    out = {
        "bootstrap_servers": f"127.0.0.1:{port}",
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_username": user,
        "sasl_password": password,
    }
    if protocol == "SASL_SSL":
        out["ssl_cafile"] = b.ca
    return out


def _principals(b) -> list[str]:
    return sorted(c.principal for p in b.server.socket_server.processors for c in p.connections)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_produce_and_consume_authenticated(sasl_broker, mechanism) -> None:
    cfg = _client(sasl_broker, "SASL_SSL", mechanism, "alice", "alice-secret-8731")
    with Producer(linger_ms=0, **cfg) as p:
        for f in [p.send("t", b"v%d" % i) for i in range(5)]:
            f.result(30)
        assert "User:alice" in _principals(sasl_broker)
    with Consumer(**cfg) as c:
        c.assign([TopicPartition("t", 0)])
        c.seek(TopicPartition("t", 0), 0)
        got: list[bytes] = []
        wait_until(lambda: got.extend(r.value for r in c.poll(1.0)) or len(got) >= 5, 30, "5")
    assert got == [b"v%d" % i for i in range(5)]


def _refusal(b, protocol: str, mechanism: str, user: str, password: str) -> tuple[str, float]:
    t0 = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError) as e:
        with Admin(**_client(b, protocol, mechanism, user, password)) as admin:
            admin.describe_cluster()
    return str(e.value), time.monotonic() - t0


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_wrong_password_and_unknown_user_are_refused_alike(sasl_broker, mechanism, caplog) -> None:
    caplog.set_level(logging.INFO, logger="gregor.authorizer")
    wrong, wrong_s = _refusal(sasl_broker, "SASL_SSL", mechanism, "alice", "guess")
    unknown, unknown_s = _refusal(sasl_broker, "SASL_SSL", mechanism, "mallory", "guess")
    assert "invalid credentials" in wrong, wrong
    assert wrong.replace("'alice'", "USER") == unknown.replace("'mallory'", "USER")
    assert min(wrong_s, unknown_s) >= DELAY_MS / 1000  # answered late, to slow guessing
    logged = [r.getMessage() for r in caplog.records if r.name == "gregor.authorizer"]
    assert any("user 'alice'" in m and "/127.0.0.1" in m for m in logged), logged
    assert any("user 'mallory'" in m and "unknown user" in m for m in logged), logged
    # the good password still works on the same listener
    with Admin(**_client(sasl_broker, "SASL_SSL", mechanism, "alice", "alice-secret-8731")) as a:
        a.describe_cluster()


def test_plain_is_not_offered_without_tls(sasl_broker) -> None:
    cfg = _client(sasl_broker, "SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret-8731")
    with pytest.raises(UnsupportedSaslMechanismError, match="offers only over TLS|only over TLS"):
        with Admin(**cfg) as admin:
            admin.describe_cluster()
    # SCRAM never sends the password: it is offered there
    ok = _client(sasl_broker, "SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-secret-8731")
    with Admin(**ok) as admin:
        admin.describe_cluster()


def _raw_first_steps(b, user: str) -> tuple[RawClient, ScramClient, bytes]:
    raw = RawClient(("127.0.0.1", b.ports["SASL_PLAINTEXT"]))
    assert raw.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
    scram = ScramClient("SCRAM-SHA-256", user, "alice-secret-8731")
    first = raw.request(ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": scram.first()}, 2)
    assert first["error_code"] == 0, first
    return raw, scram, bytes(first["auth_bytes"])


def test_a_tampered_scram_proof_is_refused(sasl_broker) -> None:
    raw, scram, server_first = _raw_first_steps(sasl_broker, "alice")
    final = scram.final(server_first)
    head, _, proof = final.rpartition(b",p=")
    tampered = bytearray(base64.b64decode(proof))
    tampered[-1] ^= 0x80
    resp = raw.request(
        ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": head + b",p=" + base64.b64encode(tampered)}, 3
    )
    assert resp["error_code"] == 58 and "invalid credentials" in resp["error_message"], resp
    assert raw.closed_by_peer()
    raw.close()
    # the untampered proof of the same exchange shape passes (the check is not always-fail)
    raw, scram, server_first = _raw_first_steps(sasl_broker, "alice")
    ok = raw.request(ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": scram.final(server_first)}, 3)
    assert ok["error_code"] == 0, ok
    scram.verify(bytes(ok["auth_bytes"]))
    assert raw.request(ApiKey.METADATA, 0, {"topics": []}, 4)["brokers"]  # now served
    raw.close()


def test_before_authentication_a_connection_gets_only_the_handshake(sasl_broker) -> None:
    b = sasl_broker
    canary = Admin(**_client(b, "SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "alice-secret-8731"))
    try:
        canary.describe_cluster()
        port = b.ports["SASL_PLAINTEXT"]
        with RawClient(("127.0.0.1", port)) as raw:  # any other API: closed, no answer
            raw.send(ApiKey.METADATA, 0, 1, {"topics": None})
            assert raw.closed_by_peer()
        with RawClient(("127.0.0.1", port)) as raw:  # ApiVersions is served
            assert raw.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
        with RawClient(("127.0.0.1", port)) as raw:  # a frame above 512 KiB: closed
            raw.send_raw((600 * 1024).to_bytes(4, "big") + b"\0" * 1024)
            assert raw.closed_by_peer()
        with RawClient(("127.0.0.1", port)) as raw:  # garbage: closed
            raw.send_raw(b"\0\0\0\x08garbage!")
            assert raw.closed_by_peer()
        with RawClient(("127.0.0.1", port)) as raw:  # too slow: closed at the deadline
            assert (
                raw.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-256"})["error_code"]
                == 0
            )
            assert raw.closed_by_peer(timeout=20)
        # SaslAuthenticate without a handshake: refused and closed
        with RawClient(("127.0.0.1", port)) as raw:
            resp = raw.request(ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": b"n,,n=a,r=b"})
            assert resp["error_code"] == 34, resp  # ILLEGAL_SASL_STATE
            assert raw.closed_by_peer()
        canary.describe_cluster()  # served throughout
    finally:
        canary.close()


def test_a_big_request_after_authentication_is_fine(sasl_broker) -> None:
    cfg = _client(sasl_broker, "SASL_SSL", "SCRAM-SHA-256", "alice", "alice-secret-8731")
    with Producer(
        linger_ms=0, max_request_size=2 * 1024 * 1024, batch_size=1024 * 1024, **cfg
    ) as p:
        p.send("big", os.urandom(700 * 1024)).result(30)  # above the pre-auth 512 KiB


def test_user_management_and_what_is_stored(sasl_broker) -> None:
    b = sasl_broker
    with Admin(bootstrap_servers=f"127.0.0.1:{b.ports['INTERNAL']}") as admin:
        users = admin.list_users()
        assert {c.mechanism for c in users["alice"]} == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        admin.create_user("bob", "bob-secret-5519")
        with pytest.raises(ResourceNotFoundError):
            admin.describe_user_scram_credentials(["nobody"])
        admin.delete_user("bob")
        assert "bob" not in admin.list_users()
        with pytest.raises(ResourceNotFoundError):
            admin.delete_user("bob")
    with pytest.raises(SaslAuthenticationFailedError):
        with Admin(**_client(b, "SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret-5519")) as a:
            a.describe_cluster()
    # the controller refuses a weak credential whatever the client does
    with RawClient(("127.0.0.1", b.ports["INTERNAL"])) as raw:
        resp = raw.request(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            {"upsertions": [{"name": "eve", "mechanism": 1, "iterations": 10, "salt": b"s",
                             "salted_password": b"p" * 32}]},
        )  # fmt: skip
        assert resp["results"] == [
            {
                "user": "eve",
                "error_code": 93,
                "error_message": "iterations 10: expected 4096 to 16384",
            }
        ]
    # no password (nor any encoding of it) anywhere in the data dir: the metadata log holds
    # salt, StoredKey and ServerKey only
    secrets = [s.encode() for s in ("alice-secret-8731", "bob-secret-5519")]
    secrets += [base64.b64encode(s) for s in secrets]
    files = [p for p in Path(b.data_dir).rglob("*") if p.is_file()]
    assert any("metadata" in str(p) for p in files), files
    for path in files:
        data = path.read_bytes()
        for s in secrets:
            assert s not in data, (path, s)
    creds = b.server.node.services.metadata.scram_credentials["alice"]
    assert {m: (len(c.salt), len(c.stored_key), len(c.server_key)) for m, c in creds.items()} == {
        1: (32, 32, 32),
        2: (32, 64, 64),
    }


def test_the_first_user_from_sasl_scram_bootstrap_file(broker_factory, tmp_path) -> None:
    """The active controller writes sasl.scram.bootstrap.file's credentials into a metadata
    log that has none, so the first admin can log in over SASL at once; once the log has
    credentials the file is not applied again (a restart with another file changes nothing)."""
    first = tmp_path / "first-users.txt"
    first.write_text('# the first admin\nSCRAM-SHA-512=[name=admin,password="ad,min-pw"]\n')
    data = tmp_path / "node"
    keys = {
        "listeners": "INTERNAL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
    }
    b = broker_factory(data_dir=data, **keys, **{"sasl.scram.bootstrap.file": str(first)})
    port = b.server.listeners.bind[1].port
    cfg = {"security_protocol": "SASL_PLAINTEXT", "sasl_username": "admin"}
    with Admin(bootstrap_servers=f"127.0.0.1:{port}", sasl_password="ad,min-pw", **cfg) as a:
        assert list(a.list_users()) == ["admin"]
    b.server.shutdown()
    second = tmp_path / "second-users.txt"
    second.write_text(
        "SCRAM-SHA-512=[name=admin,password=other]\nSCRAM-SHA-512=[name=x,password=y]\n"
    )
    b = broker_factory(data_dir=data, **keys, **{"sasl.scram.bootstrap.file": str(second)})
    port = b.server.listeners.bind[1].port
    with Admin(bootstrap_servers=f"127.0.0.1:{port}", sasl_password="ad,min-pw", **cfg) as a:
        assert list(a.list_users()) == ["admin"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("SCRAM-SHA-1=[name=a,password=b]\n", "line 1: expected SCRAM-SHA-256=[name=USER"),
        ("\nSCRAM-SHA-256=[name=a]\n", "line 2: name= and password= are required"),
        ("SCRAM-SHA-256=[name=a,password=b,iterations=5]\n", "expected 4096 to 16384"),
    ],
)
def test_a_bad_bootstrap_file_stops_start_up(tmp_path, text, says) -> None:
    from client.errors import ConfigError
    from controller.quorum.scram_control import parse_bootstrap_file

    path = tmp_path / "users.txt"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(says)):
        parse_bootstrap_file(str(path))
    with pytest.raises(ConfigError, match="no such file|No such file"):
        parse_bootstrap_file(str(tmp_path / "missing.txt"))


def test_the_follower_connection_authenticates_or_says_why(sasl_broker) -> None:
    """The replica fetcher's blocking connection (broker/replica/fetcher.py) on a SASL
    listener: the broker's own credentials get it in, a wrong password gets a ConnectionError
    naming the user and the keys to fix (the fetcher backs off and retries)."""
    from broker.replica.leader_connection import LeaderConnection
    from client.security.scram import SaslCredentials

    endpoint = ("127.0.0.1", sasl_broker.ports["SASL_PLAINTEXT"])
    good = SaslCredentials("SCRAM-SHA-512", "alice", "alice-secret-8731")
    conn = LeaderConnection(endpoint, 10, 1 << 20, "replica-9", None, good)
    try:
        assert conn.request(ApiKey.METADATA, {"topics": []})["brokers"]
    finally:
        conn.close()
    bad = SaslCredentials("SCRAM-SHA-512", "alice", "nope")
    with pytest.raises(
        ConnectionError, match="authentication as 'alice' at .* failed.*sasl.inter.broker"
    ):
        LeaderConnection(endpoint, 10, 1 << 20, "replica-9", None, bad)


def test_failed_logins_are_counted_in_the_metrics(broker_factory) -> None:
    """With metrics.listener on, a refused SaslAuthenticate shows in gregor_request_errors
    (SASL_AUTHENTICATION_FAILED) like any error answer."""
    import urllib.request

    b = broker_factory(
        listeners="INTERNAL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        inter_broker_listener_name="INTERNAL",
        **{
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
            "metrics.listener": "http://127.0.0.1:0",
            "connection.failed.authentication.delay.ms": 0,
        },
    )
    port = b.server.listeners.bind[1].port
    with pytest.raises(SaslAuthenticationFailedError):
        with Admin(
            bootstrap_servers=f"127.0.0.1:{port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_username="nobody",
            sasl_password="x",
        ) as admin:
            admin.describe_cluster()
    host, mport = b.server.metrics_address

    def counted() -> bool:
        text = urllib.request.urlopen(f"http://{host}:{mport}/metrics", timeout=10).read().decode()
        return any(
            line.startswith("gregor_request_errors_total{")
            and 'error="SASL_AUTHENTICATION_FAILED"' in line
            and line.rstrip().endswith(" 1.0")
            for line in text.splitlines()
        )

    wait_until(counted, 10, "the failed login counted")
