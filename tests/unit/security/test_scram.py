"""SCRAM and PLAIN (client/security/scram.py): RFC 7677's test vector, both mechanisms end to
end, and every refusal the same to the client: wrong password, unknown user, a tampered
proof, a replayed nonce, a PLAIN password."""

from __future__ import annotations

import base64

import pytest

from client.security.scram import (
    AuthenticationFailed,
    ScramClient,
    ScramServer,
    check_plain,
    credential_from_salted,
    new_credential,
    plain_message,
    salted_password,
)


def test_rfc7677_test_vector() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = credential_from_salted(
        "SCRAM-SHA-256", salt, salted_password("SCRAM-SHA-256", "pencil", salt, 4096), 4096
    )
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    server = ScramServer(
        "SCRAM-SHA-256", {"user": cred}.get, nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.first(client.first())
    assert server_first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    client_final = client.final(server_first)
    assert client_final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    server_final = server.final(client_final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client.verify(server_final)
    assert server.username == "user"


def _exchange(mechanism: str, creds: dict, user: str, password: str) -> bytes:
    client = ScramClient(mechanism, user, password)
    server = ScramServer(mechanism, creds.get)
    final = server.final(client.final(server.first(client.first())))
    client.verify(final)
    return final


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_both_mechanisms_and_the_refusals(mechanism: str) -> None:
    creds = {"alice": new_credential(mechanism, "s3cret", iterations=4096)}
    _exchange(mechanism, creds, "alice", "s3cret")
    with pytest.raises(AuthenticationFailed, match="invalid proof"):
        _exchange(mechanism, creds, "alice", "wrong")
    with pytest.raises(AuthenticationFailed, match="unknown user"):
        _exchange(mechanism, creds, "bob", "s3cret")


def test_an_unknown_user_gets_a_server_first_like_a_known_one() -> None:
    creds = {"alice": new_credential("SCRAM-SHA-256", "pw", iterations=8192)}
    known = ScramServer("SCRAM-SHA-256", creds.get).first(b"n,,n=alice,r=abc").split(b",")
    unknown = ScramServer("SCRAM-SHA-256", creds.get).first(b"n,,n=mallory,r=abc").split(b",")
    again = ScramServer("SCRAM-SHA-256", creds.get).first(b"n,,n=mallory,r=abc").split(b",")
    assert [len(p) for p in known[1:]] == [len(p) for p in unknown[1:]]  # salt, iterations
    assert unknown[1:] == again[1:]  # the same fake salt every time: no tell-tale change


def test_a_tampered_proof_fails() -> None:
    creds = {"alice": new_credential("SCRAM-SHA-256", "pw", iterations=4096)}
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server = ScramServer("SCRAM-SHA-256", creds.get)
    final = client.final(server.first(client.first()))
    head, _, proof = final.rpartition(b",p=")
    raw = bytearray(base64.b64decode(proof))
    raw[0] ^= 1
    with pytest.raises(AuthenticationFailed, match="invalid proof"):
        server.final(head + b",p=" + base64.b64encode(bytes(raw)))
    for bad in (head + b",p=" + base64.b64encode(bytes(raw[:-1])), head, b"c=biws,r=x,p=AAAA"):
        with pytest.raises(AuthenticationFailed):
            ScramServer("SCRAM-SHA-256", creds.get).final(bad)  # out of order, too
        server2 = ScramServer("SCRAM-SHA-256", creds.get)
        server2.first(client.first())
        with pytest.raises(AuthenticationFailed):
            server2.final(bad)  # another server nonce: a replayed final fails too


def test_garbage_is_refused() -> None:
    server = ScramServer("SCRAM-SHA-256", {}.get)
    for bad in (b"", b"\xff\xfe", b"y,,n=a,r=b", b"n,,r=b", b"n,,n=a", b"n,,n=a,r=b,ext=1"):
        with pytest.raises(AuthenticationFailed):
            ScramServer("SCRAM-SHA-256", {}.get).first(bad)
    with pytest.raises(AuthenticationFailed):
        server.final(b"c=biws,r=x,p=AAAA")


def test_plain_checks_against_the_scram_keys() -> None:
    cred = new_credential("SCRAM-SHA-512", "pw", iterations=4096)
    lookup = {"alice": [cred]}.get
    assert check_plain(plain_message("alice", "pw"), lambda u: lookup(u) or []) == "alice"
    for msg in (plain_message("alice", "nope"), plain_message("bob", "pw"), b"junk", b"\0\0"):
        with pytest.raises(AuthenticationFailed):
            check_plain(msg, lambda u: lookup(u) or [])


def test_iterations_are_bounded() -> None:
    with pytest.raises(ValueError, match="expected 4096 to 16384"):
        new_credential("SCRAM-SHA-256", "pw", iterations=10)
    with pytest.raises(ValueError, match="unknown SCRAM mechanism"):
        new_credential("SCRAM-MD5", "pw")
