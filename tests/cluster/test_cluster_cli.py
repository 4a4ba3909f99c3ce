"""`gregor cluster up` and `gregor cluster status` (issue 11): one command starts 3 controllers
and 3 brokers on loopback, prints the bootstrap servers and the nodes; `status` shows brokers,
quorum and offline partitions; Ctrl-C stops every node and exits 0.

Issue 22 item 3: a node restarted with `restart-node` stays managed (its log file, its pid
file, `up` neither calls it dead nor leaves it running after Ctrl-C); auto-created topics are
replicated 3 times; `up` on an existing dir resumes it with its data and refuses while it
runs; `down` stops it; a broker whose controllers are gone stops and says why."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess

import pytest
from helpers import gregor_command, poll_n, read_to_end, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import SaslAuthenticationFailedError, TopicAuthorizationFailedError
from client.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


def _free_base() -> int:
    """A port P with P..P+2 and P+101..P+103 free on loopback now (printed for replay)."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20_000, 60_000)
        socks = []
        try:
            for port in (*range(base, base + 3), *range(base + 101, base + 104)):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            print(f"cluster up base port {base}")
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free port range")


def _status(bootstrap: str) -> dict:
    r = subprocess.run(
        [*gregor_command(), "cluster", "status", "--bootstrap-server", bootstrap, "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _gregor(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), *args], capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _start_up(tmp_path, data_dir, *flags: str, out_name: str = "up.out"):
    out = open(tmp_path / out_name, "w+")  # noqa: SIM115 - the caller closes it
    up = subprocess.Popen(
        [*gregor_command(), "cluster", "up", "--data-dir", str(data_dir), *flags],
        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    return up, out


def _wait_up_ready(up, path) -> str:
    text = wait_until(
        lambda: (lambda t: t if "Ctrl-C stops" in t or up.poll() is not None else None)(
            path.read_text()
        ),
        90,
        "cluster up ready",
    )
    assert up.poll() is None, text
    return text


def _pid_files(data_dir) -> dict[str, int]:
    return {p.stem: int(p.read_text()) for p in data_dir.glob("*.pid")}


def _cleanup(up, pids, out) -> None:
    if up.poll() is None:
        os.killpg(up.pid, signal.SIGKILL)
        up.wait(10)
    for pid in pids:  # the nodes run in their own sessions: never leave one behind
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
    out.close()


@pytest.mark.slow
def test_cluster_up_status_restart_node_and_ctrl_c(tmp_path) -> None:
    base = _free_base()
    data_dir = tmp_path / "c"
    up, out = _start_up(tmp_path, data_dir, "--base-port", str(base))
    pids: list[int] = []
    try:
        text = _wait_up_ready(up, tmp_path / "up.out")
        bootstrap = re.search(r"bootstrap servers: (\S+)", text)[1]
        assert bootstrap.split(",") == [f"127.0.0.1:{base + i}" for i in range(3)]
        pids += [int(m) for m in re.findall(r"^\S+\s+\d+\s+\S+\s+(\d+)\s", text, re.M)]
        assert len(pids) == 6
        assert sorted(_pid_files(data_dir).values()) == sorted(pids)
        assert "gregor cluster restart-node NAME --data-dir" in text  # says how to restart one
        st = wait_until(
            lambda: (lambda s: s if len(s["brokers"]) == 3 else None)(_status(bootstrap)),
            30,
            "3 brokers in status",
        )
        assert [b["fenced"] for b in st["brokers"]] == [False] * 3
        assert sorted(v["id"] for v in st["quorum"]["voters"]) == [1, 2, 3]
        with Producer(bootstrap_servers=bootstrap) as p:
            for i in range(30):
                p.send("up", b"%d" % i, partition=0).result(30)  # auto-created
        with Admin(bootstrap_servers=bootstrap) as admin:  # RF 3, as multi-broker quickstarts
            assert [len(p.replicas) for p in admin.describe_topic("up").partitions] == [3]
            configs = admin.describe_configs(topics=["up"], keys=["min.insync.replicas"])
            assert configs[("topic", "up")]["min.insync.replicas"].value == "2"
        with Consumer(bootstrap_servers=bootstrap) as c:
            c.assign([TopicPartition("up", 0)])
            assert len(poll_n(c, 30, timeout=30)) == 30
        assert _status(bootstrap)["offline"] == []

        # restart one broker through the CLI: it stays managed
        old = _pid_files(data_dir)["broker-1"]
        log_size = (data_dir / "broker-1.log").stat().st_size
        r = _gregor("cluster", "restart-node", "broker-1", "--data-dir", str(data_dir))
        assert r.returncode == 0, r.stdout + r.stderr
        new = _pid_files(data_dir)["broker-1"]
        pids.append(new)
        assert new != old and not _alive(old) and _alive(new)
        tail = (data_dir / "broker-1.log").read_bytes()[log_size:].decode()
        assert "gregor broker listening on" in tail  # it logs to its file, not to a terminal
        wait_until(lambda: "broker-1 is running again" in (tmp_path / "up.out").read_text(),
                   30, "up sees broker-1 again")  # fmt: skip
        assert "exited" not in (tmp_path / "up.out").read_text()  # not reported as dead
        with Consumer(bootstrap_servers=f"127.0.0.1:{base}") as c:
            c.assign([TopicPartition("up", 0)])
            assert len(poll_n(c, 30, timeout=30)) == 30

        os.killpg(up.pid, signal.SIGINT)
        assert up.wait(90) == 0
        for pid in pids:  # every node stopped with it, the restarted one too
            wait_until(lambda pid=pid: not _alive(pid), 10, f"node {pid} gone")
        assert _pid_files(data_dir) == {}
    finally:
        _cleanup(up, pids, out)


@pytest.mark.slow
def test_cluster_resume_refuse_down_and_a_broker_without_controllers(tmp_path) -> None:
    base = _free_base()
    data_dir = tmp_path / "c"
    flags = ("--controllers", "1", "--brokers", "1", "--base-port", str(base))
    up, out = _start_up(tmp_path, data_dir, *flags)
    pids: list[int] = []
    try:
        _wait_up_ready(up, tmp_path / "up.out")
        pids += _pid_files(data_dir).values()
        bootstrap = f"127.0.0.1:{base}"
        cluster_id = _status(bootstrap)["cluster_id"]
        with Producer(bootstrap_servers=bootstrap) as p:
            for i in range(10):
                p.send("keep", b"%d" % i, partition=0).result(30)
        # a second `up` on the running dir is refused, naming its nodes
        r = _gregor("cluster", "up", "--data-dir", str(data_dir), timeout=60)
        assert r.returncode == 1 and "running already" in r.stderr and "broker-1 (pid" in r.stderr
        # `down` from elsewhere stops every node; `up` sees them stopped and exits 0
        r = _gregor("cluster", "down", "--data-dir", str(data_dir))
        assert r.returncode == 0, r.stderr
        assert up.wait(60) == 0
        assert all(not _alive(pid) for pid in pids)
        out.close()

        # resumed: same ports (no flags), same cluster id, the data still there
        up, out = _start_up(tmp_path, data_dir, out_name="up2.out")
        text = _wait_up_ready(up, tmp_path / "up2.out")
        pids += _pid_files(data_dir).values()
        assert "resuming the cluster" in text and cluster_id in text
        assert f"bootstrap servers: {bootstrap}" in text
        assert _status(bootstrap)["cluster_id"] == cluster_id
        assert len(read_to_end(bootstrap, "keep")) == 10
        r = _gregor("cluster", "up", "--data-dir", str(data_dir), "--brokers", "3", timeout=60)
        assert r.returncode == 2 and "--brokers 3" in r.stderr  # a contradicting flag

        # a broker whose controllers are gone still stops, and says why
        r = _gregor("cluster", "stop-node", "controller-1", "--data-dir", str(data_dir))
        assert r.returncode == 0, r.stderr
        log_size = (data_dir / "broker-1.log").stat().st_size
        r = _gregor("cluster", "stop-node", "broker-1", "--data-dir", str(data_dir))
        assert r.returncode == 0 and "stopped broker-1" in r.stdout, r.stdout + r.stderr
        tail = (data_dir / "broker-1.log").read_bytes()[log_size:].decode()
        assert "controlled shutdown gave up" in tail, tail
        assert f"tried 1@127.0.0.1:{base + 101}" in tail and "Connection refused" in tail, tail
        assert "Traceback" not in tail, tail
        assert up.wait(60) == 0  # every node stopped on purpose
        assert "every node is stopped" in (tmp_path / "up2.out").read_text()
        assert all(not _alive(pid) for pid in pids)
    finally:
        _cleanup(up, pids, out)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _tls_probe(port: int, **certs: str) -> str:
    """'ok' when a TLS handshake with the cluster's CA and `certs` (certfile, keyfile) works
    and the server keeps the connection through an ApiVersions round trip, else the error."""
    import ssl

    from client.protocol import ApiKey, encode_request

    ctx = ssl.create_default_context(cafile=certs.pop("cafile"))
    if certs:
        ctx.load_cert_chain(certs["certfile"], certs["keyfile"])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "probe", {}))
                return "ok" if s.recv(4) else "closed"
    except (OSError, ssl.SSLError) as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.slow
def _send_as(bootstrap: str, settings: dict) -> str | None:
    """One record to "sec" as `settings`' user: "written", "refused" (no ACL), or None while
    the user's credential has not reached the broker yet."""
    try:
        with Producer(bootstrap_servers=bootstrap, linger_ms=0, **settings) as p:
            p.send("sec", b"x", partition=0).result(30)
    except TopicAuthorizationFailedError:
        return "refused"
    except SaslAuthenticationFailedError:
        return None
    return "written"


def test_cluster_up_secure(tmp_path) -> None:
    """`up --secure`: brokers serve SASL_SSL only, controllers SSL with client certificates
    required; replication works over SASL_SSL (acks=all on RF 3, min ISR 2); the admin's
    properties file (0600) works for `status` and the CLI, by flag or $GREGOR_COMMAND_CONFIG;
    $GREGOR_SASL_PASSWORD wins over the file's; no credentials, no status."""
    base = _free_base()
    data_dir = tmp_path / "c"
    up, out = _start_up(tmp_path, data_dir, "--base-port", str(base), "--secure")
    pids: list[int] = []
    try:
        text = _wait_up_ready(up, tmp_path / "up.out")
        pids += [int(m) for m in re.findall(r"^\S+\s+\d+\s+\S+\s+(\d+)\s", text, re.M)]
        admin_file = data_dir / "secure" / "admin.properties"
        assert f"--command-config {admin_file}" in text and "sasl_username='admin'" in text
        assert admin_file.stat().st_mode & 0o777 == 0o600
        assert (data_dir / "secure" / "ca-key.pem").stat().st_mode & 0o777 == 0o600
        props = dict(
            line.split("=", 1) for line in admin_file.read_text().splitlines() if "=" in line
        )
        assert props["security.protocol"] == "SASL_SSL" and props["sasl.username"] == "admin"
        assert len(props["sasl.password"]) >= 32 and props["sasl.password"] not in text
        bootstrap = f"127.0.0.1:{base}"
        status = ("cluster", "status", "--bootstrap-server", bootstrap, "--json")
        r = _gregor(*status, "--command-config", str(admin_file))
        assert r.returncode == 0, r.stderr
        st = wait_until(
            lambda: (lambda s: s if len(s["brokers"]) == 3 else None)(
                json.loads(_gregor(*status, "--command-config", str(admin_file)).stdout)
            ),
            30,
            "3 brokers in status",
        )
        assert sorted(v["id"] for v in st["quorum"]["voters"]) == [1, 2, 3]
        settings = {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "admin",
            "sasl_password": props["sasl.password"],
            "ssl_cafile": props["ssl.cafile"],
        }
        with Producer(bootstrap_servers=bootstrap, acks="all", **settings) as p:
            for i in range(10):  # auto-created, RF 3, min ISR 2: followers fetch over SASL_SSL
                p.send("sec", b"%d" % i, partition=0).result(30)
        # ACLs are on: a user the admin creates may do nothing until an ACL allows it
        bob = {**settings, "sasl_username": "bob", "sasl_password": "bob-password"}
        with Admin(bootstrap_servers=bootstrap, **settings) as admin:
            admin.create_user("bob", "bob-password")
            outcome = wait_until(lambda: _send_as(bootstrap, bob), 60, "bob's login to work")
            assert outcome == "refused", outcome
            write = AclBinding(ResourceType.TOPIC, "sec", PatternType.LITERAL, "User:bob",
                               "*", AclOperation.WRITE, AclPermissionType.ALLOW)  # fmt: skip
            assert admin.create_acls([write]) == {write: None}
            wait_until(
                lambda: _send_as(bootstrap, bob) == "written", 30, "bob's write once allowed"
            )
        env = {**os.environ, "GREGOR_COMMAND_CONFIG": str(admin_file)}
        r = subprocess.run(
            [*gregor_command(), "consume", "sec", "--bootstrap-server", bootstrap,
             "--from-beginning", "--max-messages", "10"],
            capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert r.returncode == 0 and r.stdout.split() == [str(i) for i in range(10)], r.stderr
        r = subprocess.run(
            [*gregor_command(), "cluster", "status", "--bootstrap-server", bootstrap],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
            env={**env, "GREGOR_SASL_PASSWORD": "wrong-password"},
        )  # fmt: skip
        assert r.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in r.stderr, r.stderr
        r = _gregor("cluster", "status", "--bootstrap-server", bootstrap)  # no credentials
        assert r.returncode == 1 and r.stdout == "", r.stdout
        # the links: TLS everywhere; a controller wants a node certificate
        sec = data_dir / "secure"
        ca = str(sec / "ca.pem")
        assert _tls_probe(base, cafile=ca) == "ok"  # (SASL comes after ApiVersions)
        assert _tls_probe(base + 101, cafile=ca) != "ok"
        node = {"certfile": str(sec / "broker-1.pem"), "keyfile": str(sec / "broker-1-key.pem")}
        assert _tls_probe(base + 101, cafile=ca, **node) == "ok"
        for port in (base, base + 101):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(b"\x00\x00\x00\x05hello")
                s.settimeout(10)
                try:
                    assert s.recv(4096)[:1] in (b"", b"\x15")  # closed, or a TLS alert
                except ConnectionResetError:
                    pass
        os.killpg(up.pid, signal.SIGINT)
        assert up.wait(90) == 0
    finally:
        _cleanup(up, pids, out)
