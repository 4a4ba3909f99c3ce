"""docker-compose.yml's `secure` profile (docs/docker.md, "The secure profile").

- In CI: the compose file with the profile is valid to the installed compose tool, the profile
  holds the one-shot certificate service and six nodes, every node's certificate is one the
  service generates, and every secure node's config file plus its environment loads as Gregor
  config (no unknown or misspelt key can hide in the YAML or the environment).
- Long tier: the profile on a real Docker engine, from the host: the one-shot service writes
  admin.properties (0600) and ca.pem to DOCKER_GREGOR_SECURE_DIR; with them a topic of RF 3 and
  min ISR 2 takes acks=all writes (followers replicate over SASL_SSL) and is read back;
  `gregor cluster status --command-config` works; a wrong password and a plaintext client are
  refused.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from compose_cluster import (
    ROOT,
    ComposeCluster,
    compose_command,
    docker_engine_problem,
    run,
    wait_for,
)

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import GregorError, SaslAuthenticationFailedError

pytestmark = [pytest.mark.containers]
CONTROLLERS = [f"secure-controller-{n}" for n in (1, 2, 3)]
BROKERS = {f"secure-broker-{n}": 29091 + n for n in (1, 2, 3)}  # service -> host port


def _config(compose: list[str], secure_dir: Path) -> dict:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")},
        "DOCKER_GREGOR_SECURE_DIR": str(secure_dir),
    }
    out = run([*compose, "-f", str(ROOT / "docker-compose.yml"), "--profile", "secure", "config"],
              env=env)  # fmt: skip
    return yaml.safe_load(out)


def test_secure_profile_is_valid(tmp_path) -> None:
    """What the installed compose tool makes of the profile (the services' own settings:
    tests/unit/config/test_compose_config.py)."""
    compose = compose_command()
    if compose is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    services = _config(compose, tmp_path / "client")["services"]
    secure = {name for name, svc in services.items() if "secure" in svc.get("profiles", [])}
    assert secure == {"secure-setup", *CONTROLLERS, *BROKERS}
    setup = services["secure-setup"]
    # DOCKER_GREGOR_SECURE_DIR reaches the bind mount and the ssl.cafile of admin.properties
    assert f"--client-cafile={tmp_path / 'client'}/ca.pem" in setup["command"]
    assert any(f"{tmp_path / 'client'}:/client" in str(v) for v in setup["volumes"]) or any(
        isinstance(v, dict) and v.get("target") == "/client" for v in setup["volumes"]
    )
    for name in BROKERS:
        # $$ in the file is one $ for the container's shell
        assert "$(cat /secure/broker.password)" in services[name]["entrypoint"][-1].replace(
            "$$", "$"
        )


# -- the long tier: the profile on a real engine ------------------------------------------------


@pytest.fixture(scope="module")
def secure_compose(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ComposeCluster, Path]]:
    problem = docker_engine_problem()
    if problem:
        pytest.skip(problem)
    compose = compose_command()
    if compose is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    base = subprocess.run(["bash", "scripts/docker/base-image.sh"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    if base.returncode != 0:
        pytest.skip(f"cannot build the local base image: {base.stderr.strip()[-500:]}")
    for port in BROKERS.values():
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                pytest.skip(f"localhost:{port} is taken on this host")
    project = f"gregorsecure{uuid.uuid4().hex[:8]}"
    cluster = ComposeCluster(compose, project, f"gregor:test-{project}")
    secure_dir = tmp_path_factory.mktemp("gregor-secure")
    cluster.env["COMPOSE_PROFILES"] = "secure"
    cluster.env["DOCKER_GREGOR_SECURE_DIR"] = str(secure_dir)
    try:
        run(["bash", "scripts/docker/build.sh"], timeout=900,
            env={**cluster.env, "PYTHON": sys.executable})  # fmt: skip
        cluster.compose("up", "-d", "--no-build", timeout=300)
        wanted = {*CONTROLLERS, *BROKERS}
        wait_for(
            lambda: (
                (h := cluster.health()).keys() >= wanted and all(h[s] == "healthy" for s in wanted)
            ),
            300,
            "every secure node healthy",
        )
        yield cluster, secure_dir
    except BaseException:
        print(f"\n--- compose logs ({project}) ---\n{cluster.logs()}")
        raise
    finally:
        cluster.close()
        left = cluster.leftovers()
        assert not left, f"compose project {project} left {left}"


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1500)
def test_secure_profile_produce_consume(secure_compose) -> None:
    _cluster, secure_dir = secure_compose
    props = secure_dir / "admin.properties"
    assert stat.S_IMODE(props.stat().st_mode) == 0o600
    settings = dict(line.split("=", 1) for line in props.read_text().splitlines()
                    if "=" in line and not line.startswith("#"))  # fmt: skip
    assert settings["security.protocol"] == "SASL_SSL" and settings["sasl.username"] == "admin"
    assert settings["ssl.cafile"] == str(secure_dir / "ca.pem")
    conf = {**settings, "bootstrap.servers": ",".join(f"localhost:{p}" for p in BROKERS.values())}
    t0 = time.monotonic()
    with Admin(conf) as admin:
        wait_for(lambda: len(admin.describe_cluster().brokers) == 3, 60, "3 brokers")
        admin.create_topic("secured", 3, 3, {"min.insync.replicas": "2"})
    with Producer({**conf, "acks": "all"}) as p:
        for f in [p.send("secured", b"v%d" % i, partition=i % 3) for i in range(300)]:
            f.result(60)  # acks=all with min ISR 2: a follower fetched over SASL_SSL
    with Consumer(conf) as c:
        tps = [TopicPartition("secured", n) for n in range(3)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)
        got: list[bytes] = []
        wait_for(lambda: got.extend(r.value for r in c.poll(0.5)) or len(got) >= 300, 60, "300")
    assert sorted(got) == sorted(b"v%d" % i for i in range(300))
    print(f"secure produce/consume: {time.monotonic() - t0:.1f} s")
    r = subprocess.run(
        [sys.executable, "-m", "broker.cli", "cluster", "status", "--bootstrap-server",
         "localhost:29092", "--command-config", str(props)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0 and "unfenced" in r.stdout, r.stderr
    with pytest.raises(SaslAuthenticationFailedError):
        with Admin({**conf, "sasl.password": "wrong", "request.timeout.ms": 10000}) as admin:
            admin.list_topics()
    with pytest.raises(GregorError):  # a plaintext client gets nothing
        with Admin(bootstrap_servers="localhost:29092", request_timeout_ms=5000) as admin:
            admin.list_topics()
