"""`gregor broker` / `gregor server` and `process.roles` (issue 10, item 8; issue 11).

A broker-only process used to start its own one-voter quorum instead of joining
`controller.quorum.voters`, and so formed a private cluster; it now joins the remote quorum
(tests/cluster/test_broker_membership.py). A controller-only config is refused here: exit 2
with a message naming process.roles and what to run instead.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from helpers import gregor_command


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    return subprocess.run(
        [*gregor_command(), *args], capture_output=True, text=True, timeout=60, env=env
    )


@pytest.mark.parametrize(("roles", "says"), [("controller", "gregor controller --config")])
def test_roles_other_than_combined_are_refused(tmp_path, roles: str, says: str) -> None:
    cfg = tmp_path / "node.yaml"
    cfg.write_text(
        f"process.roles: {roles}\nnode.id: 4\n"
        'controller.quorum.voters: "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"\n'
        f"log.dirs: {tmp_path / 'data'}\nlisteners: PLAINTEXT://127.0.0.1:0\n"
    )
    r = _run("broker", "--config", str(cfg))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"process.roles={roles}" in r.stderr and says in r.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
