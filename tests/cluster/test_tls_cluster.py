"""TLS on every link of a real multi-process cluster (issue 25, item 1): three `gregor
controller` voters whose listener is SSL with ssl.client.auth=required, and three `gregor
broker` processes whose only listener is SSL (mTLS too). Raft (controller↔controller),
registration, heartbeats and the metadata log (broker↔controller), replication (follower↔
leader) and the clients all have to speak TLS with a certificate from the cluster's CA, or
nothing works: a topic with replication factor 3 and min.insync.replicas=3 takes acks=all
writes only when both followers fetch. A plaintext probe of any port gets no answer."""

from __future__ import annotations

import socket
import subprocess

import pytest
from broker_cluster import Brokers
from controller_quorum import HOST, ControllerQuorum
from helpers import gregor_command, wait_until
from tls_certs import Pki

from client import Admin, Consumer, Producer, TopicPartition
from client.protocol import ApiKey, encode_request
from client.security.tls import TlsSettings, client_context


def _tls_keys(pki: Pki, name: str) -> dict[str, str]:
    node = pki.issue(name, hosts=(HOST, "localhost"))
    return {
        "ssl.certfile": node.cert,
        "ssl.keyfile": node.key,
        "ssl.cafile": pki.ca,
        "ssl.client.auth": "required",
        "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL",
    }


def _plaintext_probe_gets_nothing(port: int) -> bool:
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "probe", {}))
        try:
            data = s.recv(4096)
        except ConnectionResetError:
            return True
        return data == b"" or data[:1] == b"\x15"  # closed, or a TLS alert record


@pytest.mark.timeout(180)
def test_every_link_speaks_tls(tmp_path) -> None:
    pki = Pki(tmp_path / "pki")
    q = ControllerQuorum(tmp_path / "quorum", 3, **_tls_keys(pki, "controller"))
    admin_cert = pki.issue("admin")
    client_tls = TlsSettings(cafile=pki.ca, certfile=admin_cert.cert, keyfile=admin_cert.key)
    q.tls = client_context(client_tls)
    brokers: Brokers | None = None
    try:
        q.start_all()
        q.wait_leader(30, "a controller leader elected over TLS")
        d = tmp_path / "brokers"
        d.mkdir()
        brokers = Brokers(d, q.voters, [4, 5, 6], {"broker.session.timeout.ms": 3000})
        for n, path in brokers.configs.items():  # an SSL listener instead of PLAINTEXT
            text = path.read_text().replace("listeners: PLAINTEXT://", "listeners: SSL://")
            extra = "".join(f"{k}: {v}\n" for k, v in _tls_keys(pki, f"broker-{n}").items())
            path.write_text(text + extra)
        brokers.start_all((4, 5, 6))
        tls = {
            "security_protocol": "SSL",
            "ssl_cafile": pki.ca,
            "ssl_certfile": admin_cert.cert,
            "ssl_keyfile": admin_cert.key,
        }
        bootstrap = brokers.bootstrap_all()
        with Admin(bootstrap_servers=bootstrap, **tls) as admin:
            wait_until(lambda: len(admin.describe_cluster().brokers) == 3, 30, "3 brokers")
            admin.create_topic(
                "t", partitions=3, replication_factor=3, config={"min.insync.replicas": "3"}
            )
        with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, **tls) as p:
            for f in [p.send("t", b"v%d" % i, partition=i % 3) for i in range(30)]:
                f.result(60)  # only when both followers of each partition fetched over TLS
        with Consumer(bootstrap_servers=bootstrap, **tls) as c:
            tps = [TopicPartition("t", i) for i in range(3)]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, 0)
            got: list[bytes] = []
            wait_until(
                lambda: got.extend(r.value for r in c.poll(1.0)) or len(got) >= 30, 30, "30 records"
            )
        assert sorted(got) == sorted(b"v%d" % i for i in range(30))
        for port in [*q.ports.values(), *brokers.ports.values()]:
            assert _plaintext_probe_gets_nothing(port), port
        props = tmp_path / "admin.properties"
        props.write_text(
            f"security.protocol=SSL\nssl.cafile={pki.ca}\n"
            f"ssl.certfile={admin_cert.cert}\nssl.keyfile={admin_cert.key}\n"
        )
        r = subprocess.run(
            [*gregor_command(), "quorum", "describe", "--bootstrap-controller",
             f"{HOST}:{q.ports[1]}", "--command-config", str(props)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode == 0 and "LeaderId:" in r.stdout, (r.stdout, r.stderr)
    finally:
        if brokers is not None:
            brokers.close()
        q.close()


@pytest.mark.timeout(120)
def test_a_controller_reloads_its_certificate_on_sighup(tmp_path) -> None:
    """`gregor controller` with an SSL listener: after its certificate files are replaced by
    ones from a new CA and it gets SIGHUP, new connections get the new certificate."""
    import shutil
    import signal

    from controller.quorum.network import request

    first = Pki(tmp_path / "first", "First CA")
    keys = _tls_keys(first, "controller")
    keys["ssl.client.auth"] = "none"
    q = ControllerQuorum(tmp_path / "quorum", 1, **keys)
    try:
        q.start_all()
        port = q.ports[1]

        def ask(ca: str) -> dict | None:
            try:
                return request(HOST, port, ApiKey.DESCRIBE_QUORUM, {}, timeout=5,
                               ssl_context=client_context(TlsSettings(cafile=ca)))  # fmt: skip
            except OSError:
                return None

        assert wait_until(lambda: ask(first.ca), 20, "DescribeQuorum over TLS") is not None
        second = Pki(tmp_path / "second", "Second CA")
        renewed = second.issue("controller", hosts=(HOST, "localhost"))
        shutil.copyfile(renewed.cert, keys["ssl.certfile"])
        shutil.copyfile(renewed.key, keys["ssl.keyfile"])
        assert ask(second.ca) is None  # not reloaded yet
        q.send_signal(1, signal.SIGHUP)
        wait_until(lambda: ask(second.ca), 20, "the new certificate after SIGHUP")
        assert ask(first.ca) is None
        assert q.procs[1].proc.poll() is None  # the same process
    finally:
        q.close()


@pytest.mark.timeout(180)
def test_replication_over_sasl_ssl(tmp_path) -> None:
    """Brokers whose only listener is SASL_SSL: followers authenticate to leaders as the
    broker user (sasl.inter.broker.username, created by the controllers from
    sasl.scram.bootstrap.file), with mTLS to the controllers. acks=all with
    min.insync.replicas=3 succeeds only when both followers of each partition fetched over
    SASL_SSL."""
    pki = Pki(tmp_path / "pki")
    users = tmp_path / "users.txt"
    users.write_text(
        "SCRAM-SHA-512=[name=broker,password=broker-pw]\n"
        "SCRAM-SHA-512=[name=admin,password=admin-pw]\n"
    )
    q = ControllerQuorum(
        tmp_path / "quorum", 3, **_tls_keys(pki, "controller"),
        **{"sasl.scram.bootstrap.file": str(users)},
    )  # fmt: skip
    admin_cert = pki.issue("admin")
    q.tls = client_context(
        TlsSettings(cafile=pki.ca, certfile=admin_cert.cert, keyfile=admin_cert.key)
    )
    brokers: Brokers | None = None
    try:
        q.start_all()
        q.wait_leader(30, "a controller leader")
        d = tmp_path / "brokers"
        d.mkdir()
        brokers = Brokers(d, q.voters, [4, 5, 6], {"broker.session.timeout.ms": 3000})
        for n, path in brokers.configs.items():
            text = path.read_text().replace("listeners: PLAINTEXT://", "listeners: SASL_SSL://")
            keys = _tls_keys(pki, f"broker-{n}")
            keys["listener.security.protocol.map"] = "CONTROLLER:SSL"
            keys["ssl.client.auth"] = "none"  # (SASL authenticates the clients here)
            keys["sasl.inter.broker.username"] = "broker"
            keys["sasl.inter.broker.password"] = "broker-pw"
            path.write_text(text + "".join(f"{k}: {v}\n" for k, v in keys.items()))
        brokers.start_all((4, 5, 6))
        tls = {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": pki.ca,
            "sasl_username": "admin",
            "sasl_password": "admin-pw",
        }
        bootstrap = brokers.bootstrap_all()
        with Admin(bootstrap_servers=bootstrap, **tls) as admin:
            wait_until(lambda: len(admin.describe_cluster().brokers) == 3, 30, "3 brokers")
            admin.create_topic(
                "t", partitions=3, replication_factor=3, config={"min.insync.replicas": "3"}
            )
        with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, **tls) as p:
            for f in [p.send("t", b"v%d" % i, partition=i % 3) for i in range(30)]:
                f.result(60)  # only when both followers of each partition fetched
        with Consumer(bootstrap_servers=bootstrap, **tls) as c:
            tps = [TopicPartition("t", i) for i in range(3)]
            c.assign(tps)
            for tp in tps:
                c.seek(tp, 0)
            got: list[bytes] = []
            wait_until(
                lambda: got.extend(r.value for r in c.poll(1.0)) or len(got) >= 30, 30, "30 records"
            )
        assert sorted(got) == sorted(b"v%d" % i for i in range(30))
    finally:
        if brokers is not None:
            brokers.close()
        q.close()
