"""`gregor users` and `--command-config` against a real `gregor server` process with a SASL_SSL
listener (issue 25, item 2): the first user is created through the PLAINTEXT inter-broker
listener (docs/security.md, "The first user"), its password read from a file, never the
command line; then that user, configured by a client properties file, authenticates over
SASL_SSL and manages users there; a wrong password is refused with a clear message."""

from __future__ import annotations

import os
import subprocess

from helpers import gregor_command
from tls_certs import Pki


def gregor(
    *args: str, stdin: str | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), *args], input=stdin, capture_output=True, text=True, timeout=60,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}, **(env or {})},
    )  # fmt: skip


def test_users_commands_over_sasl_ssl(gregor_process, tmp_path) -> None:
    pki = Pki(tmp_path / "pki")
    node = pki.issue("broker-1")
    gp = gregor_process(
        "--override", "listeners=INTERNAL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "--override", "listener.security.protocol.map=INTERNAL:PLAINTEXT",
        "--override", "inter.broker.listener.name=INTERNAL",
        "--override", f"ssl.certfile={node.cert}",
        "--override", f"ssl.keyfile={node.key}",
    )  # fmt: skip
    ports = gp.listeners("INTERNAL", "SASL_SSL")
    internal, sasl = ports["INTERNAL"], ports["SASL_SSL"]
    pw = tmp_path / "admin.pw"
    pw.write_text("admin-secret-4242\n")
    r = gregor(
        "users", "create", "admin", "--password-file", str(pw), "--bootstrap-server", internal
    )
    assert r.returncode == 0, r.stderr
    assert "user admin: SCRAM-SHA-512 credential set" in r.stdout
    props = tmp_path / "admin.properties"
    props.write_text(
        "# the admin over SASL_SSL\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.username=admin\n"
        "sasl.password=admin-secret-4242\n"
        f"ssl.cafile={pki.ca}\n"
    )
    over_sasl = ("--bootstrap-server", sasl, "--command-config", str(props))
    r = gregor("users", "create", "alice", "--mechanism", "SCRAM-SHA-256", *over_sasl,
               env={"GREGOR_USER_PASSWORD": "alice-pw-1"})  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = gregor("users", "create", "bob", *over_sasl, stdin="bob-pw-2\n")
    assert r.returncode == 0, r.stderr
    r = gregor("users", "list", *over_sasl)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "admin\tSCRAM-SHA-512:8192",
        "alice\tSCRAM-SHA-256:8192",
        "bob\tSCRAM-SHA-512:8192",
    ]
    r = gregor("users", "delete", "bob", *over_sasl)
    assert r.returncode == 0 and "user bob deleted" in r.stdout, r.stderr
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(props.read_text().replace("admin-secret-4242", "nope"))
    r = gregor("users", "list", "--bootstrap-server", sasl, "--command-config", str(wrong))
    assert r.returncode == 1, r
    assert "authentication as 'admin' with SCRAM-SHA-512" in r.stderr, r.stderr
    assert "invalid credentials" in r.stderr, r.stderr
    r = gregor("users", "create", "carol", "--bootstrap-server", internal, stdin="\n")
    assert r.returncode == 1 and "empty password" in r.stderr, r.stderr
