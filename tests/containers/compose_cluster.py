"""The compose cluster of docker-compose.yml, driven from the host for the container tier.

`ComposeCluster(project, image)` runs `docker compose` (the v2 plugin) or `docker-compose` (v1,
Debian's package) on the repo's docker-compose.yml under its own project name, so its containers,
network and volumes are its own; `close()` removes all three (and the image the tier built), pass
or fail. v1 has no `up --wait`: `up()` waits for every container's health check itself either way.

Host-side helpers only: which broker leads a partition, a service's container, cutting a
container off the compose network and putting it back (with its service-name alias, which
`docker network connect` would otherwise drop).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
BROKERS = {"broker-1": 4, "broker-2": 5, "broker-3": 6}  # service -> node.id (docker-compose.yml)
CONTROLLERS = ("controller-1", "controller-2", "controller-3")
EXTERNAL = {4: "localhost:19092", 5: "localhost:19093", 6: "localhost:19094"}
T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout: float, msg: str, interval: float = 0.5) -> T:
    """Poll `cond` every `interval` s until truthy (returned) or `timeout` (AssertionError).
    Exceptions from `cond` count as not yet (the cluster is changing under it)."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = cond()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {msg} ({last!r})")
        time.sleep(interval)


def run(args: list[str], timeout: float = 120, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def docker_engine_problem() -> str | None:
    """None when a Docker engine answers, else why not."""
    if shutil.which("docker") is None:
        return "no docker command"
    try:
        proc = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except subprocess.TimeoutExpired:
        return "docker info did not answer within 20 s"
    if proc.returncode != 0 or not proc.stdout.strip():
        return f"no Docker engine answers: {proc.stderr.strip()[-300:]}"
    return None


def compose_command() -> list[str] | None:
    """`docker compose` (v2) when present, else `docker-compose` (v1), else None."""
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cmd[0]) is None:
            continue
        proc = subprocess.run([*cmd, "version"], capture_output=True, text=True, timeout=30)
        if proc.returncode == 0:
            return cmd
    return None


class ComposeCluster:
    def __init__(self, compose: list[str], project: str, image: str) -> None:
        self.compose_cmd = compose
        self.project = project
        self.image = image
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")},
            "COMPOSE_PROJECT_NAME": project,
            "COMPOSE_PROFILES": "cluster",
            "DOCKER_GREGOR_IMAGE": image,
        }
        self.extra_images: list[str] = []  # more images a test built, removed by close()

    def compose(self, *args: str, timeout: float = 180) -> str:
        return run(
            [*self.compose_cmd, "-f", str(ROOT / "docker-compose.yml"), *args], timeout, self.env
        )

    # -- containers ----------------------------------------------------------------------------
    def containers(self) -> dict[str, str]:
        """service -> container id, for every container of the project (running or not)."""
        out = run(
            [
                "docker", "ps", "-a", "--filter", f"label=com.docker.compose.project={self.project}",
                "--format", '{{.ID}} {{.Label "com.docker.compose.service"}}',
            ]
        )  # fmt: skip
        return {svc: cid for cid, svc in (line.split() for line in out.splitlines() if line)}

    def container(self, service: str) -> str:
        return self.containers()[service]

    def inspect(self, service: str) -> dict[str, Any]:
        return json.loads(run(["docker", "inspect", self.container(service)]))[0]

    def health(self) -> dict[str, str]:
        """service -> health status ('healthy', 'starting', 'unhealthy', or the state)."""
        out = {}
        for svc, cid in self.containers().items():
            state = json.loads(run(["docker", "inspect", "--format", "{{json .State}}", cid]))
            out[svc] = state.get("Health", {}).get("Status") or state["Status"]
        return out

    def up(self, timeout: float = 180) -> float:
        """`up -d`, then wait until all six containers are healthy (what `up --wait` does);
        returns the seconds it took."""
        t0 = time.monotonic()
        wait = ["--wait"] if self.compose_cmd == ["docker", "compose"] else []  # (v2 only)
        self.compose("up", "-d", "--no-build", *wait, timeout=timeout)
        wanted = set(BROKERS) | set(CONTROLLERS)
        wait_for(
            lambda: (
                (h := self.health()).keys() >= wanted and all(h[s] == "healthy" for s in wanted)
            ),
            timeout,
            "every container healthy",
            interval=0.5,
        )
        return time.monotonic() - t0

    def network(self) -> str:
        (name,) = self.inspect("broker-1")["NetworkSettings"]["Networks"]
        return name

    def disconnect(self, service: str) -> None:
        run(["docker", "network", "disconnect", self.network(), self.container(service)])

    def connect(self, service: str, network: str) -> None:
        run(["docker", "network", "connect", "--alias", service, network, self.container(service)])

    def logs(self) -> str:
        try:
            return self.compose("logs", "--no-color", "--tail", "60", timeout=60)
        except Exception as exc:  # noqa: BLE001 - diagnostics only
            return f"(no logs: {exc})"

    def close(self) -> None:
        """Remove the project's containers, network and volumes, then the image. Never raises."""
        try:
            self.compose("down", "-v", "--remove-orphans", "--timeout", "10", timeout=180)
        except Exception:  # noqa: BLE001 - fall through to removing by label
            pass
        label = f"label=com.docker.compose.project={self.project}"
        for kind, listing in (
            ("container", ["docker", "ps", "-aq", "--filter", label]),
            ("network", ["docker", "network", "ls", "-q", "--filter", label]),
            ("volume", ["docker", "volume", "ls", "-q", "--filter", label]),
        ):
            try:
                ids = run(listing).split()
                if ids:
                    run(
                        ["docker", kind, "rm", "-f", *ids]
                        if kind == "container"
                        else ["docker", kind, "rm", *ids]
                    )
            except Exception:  # noqa: BLE001 - best effort, reported by the leak check
                pass
        for image in (self.image, *self.extra_images):
            subprocess.run(["docker", "rmi", "-f", image], capture_output=True, timeout=120)

    def leftovers(self) -> list[str]:
        label = f"label=com.docker.compose.project={self.project}"
        out = []
        for listing in (
            ["docker", "ps", "-aq", "--filter", label],
            ["docker", "network", "ls", "-q", "--filter", label],
            ["docker", "volume", "ls", "-q", "--filter", label],
        ):
            out += run(listing).split()
        return out
