"""docker-compose.yml's services start with valid configurations, without a Docker engine: each
service's config file plus its GREGOR_* environment loads, and each broker advertises on its
EXTERNAL listener the host port its container port is published on."""

from __future__ import annotations

from pathlib import Path

import yaml

from broker.listeners import Listeners
from client.config import load_config

REPO = Path(__file__).resolve().parents[3]


def _services() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]


def _config(svc: dict, role: str):
    cmd = svc["command"]
    path = REPO / cmd[cmd.index("--config") + 1]
    env = {k: str(v) for k, v in (svc.get("environment") or {}).items()}
    assert all(k.startswith("GREGOR_") for k in env)
    return load_config(role, path, env)


def test_cluster_services_load_and_advertise_their_published_ports() -> None:
    services = {n: s for n, s in _services().items() if s.get("profiles") == ["cluster"]}
    brokers = {n: s for n, s in services.items() if s.get("command", [""])[0] == "broker"}
    controllers = {n: s for n, s in services.items() if s.get("command", [""])[0] == "controller"}
    assert sorted(controllers) == ["controller-1", "controller-2", "controller-3"]
    assert sorted(brokers) == ["broker-1", "broker-2", "broker-3"]
    ids = set()
    for name, svc in controllers.items():
        cfg = _config(svc, "controller")
        assert f"{cfg.node_id}@{name}:9093" in cfg.controller_quorum_voters
        assert svc["profiles"] == ["cluster"] and svc["volumes"] == [f"{name}:/var/lib/gregor"]
        ids.add(cfg.node_id)
    for name, svc in brokers.items():
        cfg = _config(svc, "broker")
        ls = Listeners.from_config(cfg)
        (published,) = svc["ports"]  # 127.0.0.1:HOST:CONTAINER
        _, host_port, container_port = published.split(":")
        external = ls.advertised_for("EXTERNAL")
        bound = {e.name: e.port for e in ls.bind}
        assert external is not None and (external.host, external.port) == (
            "localhost",
            int(host_port),
        )
        assert bound["EXTERNAL"] == int(container_port)
        assert ls.inter_broker == "INTERNAL"
        assert ls.inter_broker_endpoint.address == f"{name}:{bound['INTERNAL']}"
        assert svc["volumes"] == [f"{name}:/var/lib/gregor"] and svc["restart"] == "unless-stopped"
        assert "healthcheck" in svc and set(svc["depends_on"]) == set(controllers)
        ids.add(cfg.node_id)
    assert len(ids) == 6


def test_single_profile_service() -> None:
    svc = _services()["single"]
    assert svc["profiles"] == ["single"]
    cfg = _config(svc, "broker")
    assert Listeners.from_config(cfg).inter_broker_endpoint.address == "localhost:9092"
    assert svc["ports"] == ["127.0.0.1:9092:9092"]


def test_cluster_is_the_default_profile() -> None:
    assert "COMPOSE_PROFILES=cluster" in (REPO / ".env").read_text().splitlines()


def test_secure_profile_services() -> None:
    """The `secure` profile: every node's certificate is one secure-setup generates, for the
    name the node is reached by; brokers advertise their published SASL_SSL port, replicate
    over SASL_SSL as gregor-broker (password read from the secrets volume); controllers want
    client certificates; every config file plus environment loads."""
    services = {n: s for n, s in _services().items() if s.get("profiles") == ["secure"]}
    setup = services.pop("secure-setup")
    assert setup["entrypoint"] == ["python", "-m", "broker.security.secure_setup"]
    generated = {a.split("=")[0]: a.split("=")[1].split(",") for a in setup["command"]
                 if "=" in a and not a.startswith("--")}  # fmt: skip
    assert sorted(services) == sorted(generated)
    for name, svc in services.items():
        env = {k: str(v) for k, v in svc["environment"].items()}
        assert env["GREGOR_SSL_CERTFILE"] == f"/secure/{name}.pem" and name in generated[name]
        assert "secure:/secure:ro" in svc["volumes"]
        if "broker" in name:
            script = svc["entrypoint"][-1]
            assert "$$(cat /secure/broker.password)" in script and "exec gregor broker" in script
            path = REPO / script.split("--config ")[1].split()[0]
            env["GREGOR_SASL_INTER_BROKER_PASSWORD"] = "from-the-volume"
            cfg = load_config("broker", path, env)
            ls = Listeners.from_config(cfg)
            (published,) = svc["ports"]
            _, host_port, container_port = published.split(":")
            external = ls.advertised_for("EXTERNAL")
            assert external is not None and (external.host, external.port) == (
                "localhost",
                int(host_port),
            )
            assert {"localhost", "127.0.0.1"} <= set(generated[name])
            assert {e.name: e.port for e in ls.bind}["EXTERNAL"] == int(container_port)
            assert set(cfg.listener_security_protocol_map) >= {
                "INTERNAL:SASL_SSL", "EXTERNAL:SASL_SSL", "CONTROLLER:SSL"}  # fmt: skip
            assert ls.inter_broker_endpoint.address == f"{name}:9092"
            assert cfg.sasl_inter_broker_username == "gregor-broker"
        else:
            cfg = _config(svc, "controller")
            assert f"{cfg.node_id}@{name}:9093" in cfg.controller_quorum_voters
            assert cfg.ssl_client_auth == "required"
            assert cfg.sasl_scram_bootstrap_file == "/secure/scram-bootstrap.txt"
        assert cfg.ssl_cafile == "/secure/ca.pem"
