"""Start-up config errors say where the value came from (issue 22, item 5): the YAML file's
path, the GREGOR_* variable, or the command-line flag, not a bare "override"."""

from __future__ import annotations

import os
import subprocess

from helpers import gregor_command


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    return subprocess.run(
        [*gregor_command(), *args], capture_output=True, text=True, timeout=60,
        env={**base, **(env or {})},
    )  # fmt: skip


def test_broker_errors_name_the_flag_the_file_and_the_variable(tmp_path) -> None:
    data = str(tmp_path / "d")
    r = _run("server", "--data-dir", data, "--override", "num.io.threads=zero")
    assert r.returncode == 2 and "from command-line --override" in r.stderr, r.stderr
    cfg = tmp_path / "b.yaml"
    cfg.write_text("log.retention.hours: soon\n")
    r = _run("server", "--data-dir", data, "--config", str(cfg))
    assert r.returncode == 2, r.stderr
    assert f"'log.retention.hours' (log.retention.ms in hours) from config file {cfg}" in r.stderr
    r = _run("server", "--data-dir", data, env={"GREGOR_LOG_ROLL_HOURS": "0"})
    assert r.returncode == 2, r.stderr
    assert "from environment variable GREGOR_LOG_ROLL_HOURS: expected >= 1" in r.stderr, r.stderr
    assert "override" not in r.stderr


def test_controller_errors_name_the_flag(tmp_path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"process.roles: controller\nmetadata.log.dir: {tmp_path / 'm'}\n")
    r = _run("controller", "--config", str(cfg), "--override", "node.id=-4")
    assert r.returncode != 0 and "from command-line --override" in r.stderr, r.stderr
