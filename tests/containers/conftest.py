"""Fixtures of the container tier (docs/architecture.md §13, docs/docker.md): the compose cluster
of docker-compose.yml on the machine's real Docker engine.

- `compose_cluster` (module scope): builds the image with scripts/docker/build.sh (the local base
  image, reused when it exists, then wheels built on the host: no registry, no network inside a
  container), brings 3 controllers + 3 brokers up under a project name of its own and waits until
  all are healthy. Afterwards it removes the project's containers, network, volumes and image,
  pass or fail, and checks that nothing is left. Skips, with the reason, when no Docker engine
  answers, no compose tool is installed or the base image cannot be built (debootstrap needs the
  Debian mirror); a failing build of Gregor's own image is an error, not a skip.
- `timings`: a dict the tests add their figures to; written as containers-timings.json in the
  tier's tmp dir and printed at the end of the module (run with -s to see it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from compose_cluster import ROOT, ComposeCluster, compose_command, docker_engine_problem, run


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


@pytest.fixture(scope="module")
def timings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    figures: dict[str, Any] = {}
    yield figures
    path = tmp_path_factory.mktemp("containers") / "containers-timings.json"
    path.write_text(json.dumps(figures, indent=2))
    print(f"\ncontainer tier figures ({path}):\n{json.dumps(figures, indent=2)}")


@pytest.fixture(scope="module")
def compose_cluster(timings: dict[str, Any]) -> Iterator[ComposeCluster]:
    problem = docker_engine_problem()
    if problem:
        pytest.skip(problem)
    compose = compose_command()
    if compose is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    t0 = time.monotonic()
    base = subprocess.run(
        ["bash", "scripts/docker/base-image.sh"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if base.returncode != 0:
        pytest.skip(f"cannot build the local base image: {base.stderr.strip()[-500:]}")
    timings["base_image_s"] = round(time.monotonic() - t0, 1)
    timings["base_image_built"] = "built" in base.stderr
    project = f"gregortest{uuid.uuid4().hex[:8]}"
    cluster = ComposeCluster(compose, project, f"gregor:test-{project}")
    try:
        t1 = time.monotonic()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")},
            "DOCKER_GREGOR_IMAGE": cluster.image,
            "PYTHON": sys.executable,
        }
        run(["bash", "scripts/docker/build.sh"], timeout=600, env=env)
        timings["image_build_s"] = round(time.monotonic() - t1, 1)
        size = int(run(["docker", "image", "inspect", "-f", "{{.Size}}", cluster.image]))
        timings["image_mb"] = round(size / 1e6)
        timings["up_wait_s"] = round(cluster.up(), 1)
        yield cluster
    finally:
        cluster.close()
        left = cluster.leftovers()
        assert not left, f"compose project {project} left {left}"


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed and "compose_cluster" in request.fixturenames:
        cluster = request.getfixturevalue("compose_cluster")
        print(f"\n--- compose logs ({cluster.project}) ---\n{cluster.logs()}")
        # A failed test may have left a node killed or cut off: the next test starts from a
        # whole cluster, so one failure is reported once, not again by every test after it.
        try:
            cluster.up()
        except Exception as exc:  # noqa: BLE001 - the next test then fails on its own
            print(f"could not bring the cluster whole again: {exc}")
