"""TLS on a broker listener (issue 25, item 1), with real TLS sockets: produce and consume over
SSL, mTLS with the principal from the certificate subject, and the refusals (no client
certificate, one from another CA, an expired one, a server certificate for another host, a
plaintext client) each a prompt ConnectionFailedError."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
from contextlib import suppress

import pytest
from helpers import api_versions_ok, spawn_gregor, wait_until
from tls_certs import Pki

from client import Admin, Consumer, Producer, TopicPartition
from client.aio.connection import BrokerConnection
from client.errors import ConnectionFailedError
from client.security.tls import TlsSettings, client_context


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path / "pki")


def _ssl_broker(
    broker_factory, pki: Pki, client_auth: str = "none", hosts=("localhost", "127.0.0.1")
):
    node = pki.issue("broker-1", hosts=hosts)
    return broker_factory(
        listeners="SSL://127.0.0.1:0",
        **{
            "ssl.certfile": node.cert,
            "ssl.keyfile": node.key,
            "ssl.cafile": pki.ca,
            "ssl.client.auth": client_auth,
        },
    )


def _connect(port: int, settings: TlsSettings | None, host: str = "127.0.0.1") -> float:
    """Connect (TLS handshake and ApiVersions); returns the seconds it took."""

    async def go() -> float:
        t0 = time.monotonic()
        conn = BrokerConnection(
            host,
            port,
            ssl=None if settings is None else client_context(settings),
            request_timeout_ms=20_000,
        )
        try:
            await conn.connect()
            return time.monotonic() - t0
        finally:
            conn.close()

    return asyncio.run(go())


def test_produce_and_consume_over_ssl(broker_factory, pki) -> None:
    b = _ssl_broker(broker_factory, pki)
    tls = {"security_protocol": "SSL", "ssl_cafile": pki.ca}
    with Admin(bootstrap_servers=b.bootstrap, **tls) as admin:
        admin.create_topic("t", partitions=2)
    with Producer(bootstrap_servers=b.bootstrap, linger_ms=0, **tls) as p:
        for f in [p.send("t", b"v%d" % i, partition=i % 2) for i in range(20)]:
            f.result(30)
    with Consumer(bootstrap_servers=b.bootstrap, **tls) as c:
        tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        got: list[bytes] = []
        wait_until(
            lambda: got.extend(r.value for r in c.poll(1.0)) or len(got) >= 20, 30, "20 records"
        )
        conns = [c for p in b.server.socket_server.processors for c in p.connections]
        assert conns and all(c.tls for c in conns)
    assert sorted(got) == sorted(b"v%d" % i for i in range(20))


def test_mtls_principal_is_the_certificate_subject(broker_factory, pki) -> None:
    b = _ssl_broker(broker_factory, pki, client_auth="required")
    alice = pki.issue("alice")
    settings = TlsSettings(cafile=pki.ca, certfile=alice.cert, keyfile=alice.key)

    async def go() -> list[str]:
        conn = BrokerConnection("127.0.0.1", b.port, ssl=client_context(settings))
        await conn.connect()
        try:
            return [c.principal for p in b.server.socket_server.processors for c in p.connections]
        finally:
            conn.close()

    assert asyncio.run(go()) == ["User:CN=alice,O=Gregor tests"]


@pytest.mark.parametrize("case", ["no certificate", "another CA", "expired"])
def test_mtls_refuses_a_client_certificate_that_is_not_good(
    broker_factory, pki, tmp_path, case
) -> None:
    b = _ssl_broker(broker_factory, pki, client_auth="required")
    if case == "no certificate":
        settings = TlsSettings(cafile=pki.ca)
    elif case == "another CA":
        mallory = Pki(tmp_path / "other", "Other CA").issue("alice")
        settings = TlsSettings(cafile=pki.ca, certfile=mallory.cert, keyfile=mallory.key)
    else:
        old = pki.issue("alice", expired=True)
        settings = TlsSettings(cafile=pki.ca, certfile=old.cert, keyfile=old.key)
    with pytest.raises(ConnectionFailedError, match=f"cannot connect to 127.0.0.1:{b.port}"):
        _connect(b.port, settings)
    # (a ConnectionFailedError from the handshake, not a GregorTimeoutError after 20 s)
    # and the broker keeps serving good clients
    alice = pki.issue("alice")
    _connect(b.port, TlsSettings(cafile=pki.ca, certfile=alice.cert, keyfile=alice.key))


def test_the_client_checks_the_broker_certificate_and_host_name(
    broker_factory, pki, tmp_path
) -> None:
    b = _ssl_broker(broker_factory, pki, hosts=("broker-1.example",))
    with pytest.raises(ConnectionFailedError, match="certificate is not trusted.*(match|mismatch)"):
        _connect(b.port, TlsSettings(cafile=pki.ca))  # 127.0.0.1 is not broker-1.example
    _connect(b.port, TlsSettings(cafile=pki.ca, check_hostname=False))  # the chain still counts
    other = Pki(tmp_path / "other", "Other CA")
    with pytest.raises(ConnectionFailedError, match="certificate is not trusted"):
        _connect(b.port, TlsSettings(cafile=other.ca, check_hostname=False))


def test_an_expired_broker_certificate_is_refused(broker_factory, tmp_path) -> None:
    pki = Pki(tmp_path / "pki")
    old = pki.issue("broker-1", expired=True)
    b = broker_factory(
        listeners="SSL://127.0.0.1:0", **{"ssl.certfile": old.cert, "ssl.keyfile": old.key}
    )
    with pytest.raises(
        ConnectionFailedError, match="certificate is not trusted: certificate has expired"
    ):
        _connect(b.port, TlsSettings(cafile=pki.ca))


def test_plaintext_on_a_tls_listener_gets_nothing(broker_factory, pki) -> None:
    b = _ssl_broker(broker_factory, pki)
    with pytest.raises(ConnectionFailedError):
        _connect(b.port, None)  # ApiVersions in clear: the broker's TLS handshake fails, closes
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.sendall(b"\x00\x00\x00\x10" + b"x" * 16)
        assert s.recv(4096)[:1] in (b"", b"\x15")  # closed, or a TLS alert: never a frame


def test_sighup_reloads_the_certificate_without_a_restart(gregor_process, tmp_path) -> None:
    """A real `gregor server` on an SSL listener; its certificate and key files are replaced
    by ones from a new CA and the process gets SIGHUP: new connections get the new
    certificate (trusted only through the new CA), with no restart."""
    first = Pki(tmp_path / "first", "First CA")
    node = first.issue("broker-1", filename="node")
    gp = gregor_process(
        "--override", "listeners=SSL://127.0.0.1:0",
        "--override", f"ssl.certfile={node.cert}",
        "--override", f"ssl.keyfile={node.key}",
    )  # fmt: skip
    _connect(gp.port, TlsSettings(cafile=first.ca))
    second = Pki(tmp_path / "second", "Second CA")
    renewed = second.issue("broker-1", filename="node")
    shutil.copyfile(renewed.cert, node.cert)  # the same paths, new files
    shutil.copyfile(renewed.key, node.key)
    with pytest.raises(ConnectionFailedError, match="not trusted"):
        _connect(gp.port, TlsSettings(cafile=second.ca))  # not reloaded yet
    pid = gp.proc.pid
    os.kill(pid, signal.SIGHUP)

    def reloaded() -> bool:
        try:
            _connect(gp.port, TlsSettings(cafile=second.ca))
        except ConnectionFailedError:
            return False
        return True

    wait_until(reloaded, 20, "the new certificate served after SIGHUP")
    assert gp.proc.poll() is None  # same process
    with pytest.raises(ConnectionFailedError, match="not trusted"):
        _connect(gp.port, TlsSettings(cafile=first.ca))
    wait_until(lambda: "TLS certificates reloaded" in gp.stderr(), 20, "the reload logged")


def test_sighups_while_the_server_starts_reload_once_started(tmp_path) -> None:
    """SIGHUPs from the broker's start-up (its first log line, once the CLI has its handlers)
    until after its ready line, as a supervisor may send them: the server starts, reloads its
    certificates once started and serves. SIGHUP's default action (ending the process) used
    to apply until `serve_forever` installed its handler, after the ready line."""
    with spawn_gregor(
        ["server", "--port", "0", "--data-dir", str(tmp_path / "d")], tmp_path / "d", tmp_path / "e"
    ) as gp:
        # every 2 ms from the first log line (the CLI has its handlers by then) to the ready line
        started, deadline = False, time.monotonic() + 60
        while not gp.stdout_lines and time.monotonic() < deadline:
            started = started or "file handle budget" in gp.stderr()
            if started:
                os.kill(gp.proc.pid, signal.SIGHUP)
            with suppress(subprocess.TimeoutExpired):  # (a SIGHUP must not end it: it runs on)
                gp.proc.wait(0.002)
                break  # it exited: wait_ready says how
        gp.wait_ready(30)
        os.kill(gp.proc.pid, signal.SIGHUP)  # and one as soon as it is ready
        wait_until(lambda: "TLS certificates reloaded" in gp.stderr(), 20, "the reload logged")
        assert gp.proc.poll() is None, gp.stderr()
        api_versions_ok(gp.address)
        assert gp.stop(signal.SIGTERM, 60) == 0


def test_a_silent_or_garbage_tls_handshake_is_cut_off(broker_factory, pki) -> None:
    """A client that connects to a TLS listener and never finishes the handshake is closed
    after socket.request.receive.timeout.ms; garbage instead of a ClientHello at once; a
    TLS client is served meanwhile."""
    node = pki.issue("broker-1")
    b = broker_factory(
        listeners="SSL://127.0.0.1:0",
        socket_request_receive_timeout_ms=1000,
        **{"ssl.certfile": node.cert, "ssl.keyfile": node.key},
    )
    silent = socket.create_connection(("127.0.0.1", b.port), timeout=30)
    garbage = socket.create_connection(("127.0.0.1", b.port), timeout=30)
    try:
        garbage.sendall(b"GET / HTTP/1.1\r\n\r\n" * 100)
        _connect(b.port, TlsSettings(cafile=pki.ca))  # the canary
        for s in (garbage, silent):
            try:
                data = s.recv(4096)
            except ConnectionResetError:
                data = b""
            assert data == b"" or data[:1] == b"\x15", data  # closed (or a TLS alert)
        wait_until(lambda: b.server.socket_server.connection_count == 0, 10, "both closed")
    finally:
        silent.close()
        garbage.close()
