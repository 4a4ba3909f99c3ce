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
    services = _services()
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
