"""`gregor acls add|list|remove` against a real `gregor server` process with the authorizer on
and a SASL_PLAINTEXT listener: the super user `admin` (sasl.scram.bootstrap.file), configured by
a --command-config properties file, adds, lists and removes ACLs; `alice` without ALTER on the
cluster is refused with a message naming her, the operation and the resource; bad options get
a clear message."""

from __future__ import annotations

import json
import os
import subprocess

from helpers import gregor_command


def gregor(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), *args], input=stdin, capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")},
    )  # fmt: skip


def test_acls_commands(gregor_process, tmp_path) -> None:
    users = tmp_path / "users.txt"
    users.write_text("SCRAM-SHA-512=[name=admin,password=admin-pw-5]\n"
                     "SCRAM-SHA-512=[name=alice,password=alice-pw-5]\n")  # fmt: skip
    gp = gregor_process(
        "--override", "listeners=INTERNAL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "listener.security.protocol.map=INTERNAL:PLAINTEXT",
        "--override", "inter.broker.listener.name=INTERNAL",
        "--override", f"sasl.scram.bootstrap.file={users}",
        "--override", "authorizer.class.name=StandardAuthorizer",
        "--override", "super.users=User:admin",
    )  # fmt: skip

    sasl = gp.listeners("SASL_PLAINTEXT")["SASL_PLAINTEXT"]

    def props(user: str, password: str) -> str:
        path = tmp_path / f"{user}.properties"
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            f"sasl.username={user}\nsasl.password={password}\n"
        )
        return str(path)

    admin = ("--bootstrap-server", sasl, "--command-config", props("admin", "admin-pw-5"))
    alice = ("--bootstrap-server", sasl, "--command-config", props("alice", "alice-pw-5"))
    r = gregor("acls", "add", "--allow-principal", "User:alice", "--operation", "READ",
               "--operation", "describe", "--topic", "orders", "--group", "billing", *admin)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("added ") == 4, r.stdout
    r = gregor("acls", "add", "--deny-principal", "User:*", "--operation", "WRITE", "--topic",
               "logs-", "--resource-pattern-type", "prefixed", *admin)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = gregor("acls", "list", "--json", *admin)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert len(rows) == 5
    assert {
        (x["resource_type"], x["resource_name"], x["operation"])
        for x in rows
        if x["principal"] == "User:alice"
    } == {
        ("TOPIC", "orders", "READ"),
        ("TOPIC", "orders", "DESCRIBE"),
        ("GROUP", "billing", "READ"),
        ("GROUP", "billing", "DESCRIBE"),
    }
    r = gregor("acls", "list", "--topic", "logs-x", "--resource-pattern-type", "match", *admin)
    assert r.returncode == 0 and r.stdout.split() == [
        "TOPIC:PREFIXED:logs-",
        "User:*",
        "*",
        "WRITE",
        "DENY",
    ], r.stdout
    # alice may not manage ACLs
    r = gregor("acls", "add", "--allow-principal", "User:alice", "--operation", "ALL",
               "--cluster", *alice)  # fmt: skip
    assert r.returncode == 1, r
    assert "User:alice" in r.stderr and "ALTER" in r.stderr and "CLUSTER" in r.stderr, r.stderr
    r = gregor("acls", "remove", "--allow-principal", "User:alice", "--topic", "orders", *admin)
    assert r.returncode == 0 and r.stdout.count("removed ") == 2, r.stdout
    r = gregor("acls", "list", "--principal", "User:alice", *admin)
    assert [line.split("\t")[0] for line in r.stdout.splitlines()] == ["GROUP:LITERAL:billing"] * 2
    r = gregor("acls", "add", "--allow-principal", "User:alice", "--operation", "FLY",
               "--topic", "t", *admin)  # fmt: skip
    assert r.returncode == 1 and "operation 'FLY'" in r.stderr, r.stderr
    r = gregor("acls", "add", "--allow-principal", "User:alice", "--operation", "WRITE",
               "--group", "g", *admin)  # fmt: skip
    assert r.returncode == 1 and "WRITE does not apply to GROUP" in r.stderr, r.stderr
