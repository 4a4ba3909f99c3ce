"""`scripts/run.sh --with spark`: the one documented command that installs Spark support.

run.sh is copied next to a stand-in `_venv.sh` (records the extras it is asked to install) and
a stand-in `gregor` (prints its arguments), so the test sees exactly what run.sh asks for
without downloading pyspark."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_sh(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "bin").mkdir()
    shutil.copy(ROOT / "scripts" / "run.sh", tmp_path / "scripts" / "run.sh")
    (tmp_path / "scripts" / "_venv.sh").write_text(
        'echo "$1" > extras.txt\nexport PATH="$PWD/bin:$PATH"\n'
    )
    gregor = tmp_path / "bin" / "gregor"
    gregor.write_text('#!/bin/sh\necho "gregor $*"\n')
    gregor.chmod(0o755)
    return tmp_path / "scripts" / "run.sh"


def _run(run_sh: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(run_sh), *args], capture_output=True, text=True, timeout=60)


def test_with_spark_installs_the_extra_then_runs_the_arguments(run_sh: Path) -> None:
    extras = run_sh.parent.parent / "extras.txt"
    r = _run(run_sh, "--with", "spark", "--version")
    assert r.returncode == 0 and r.stdout == "gregor --version\n", r.stderr
    assert extras.read_text().strip() == "compression,spark"
    r = _run(run_sh, "--with", "spark")  # nothing else: the server, as plain run.sh
    assert r.stdout == "gregor server\n" and extras.read_text().strip() == "compression,spark"
    r = _run(run_sh, "topics", "list")  # without --with: no spark
    assert r.stdout == "gregor topics list\n" and extras.read_text().strip() == "compression"


def test_with_takes_only_known_extras(run_sh: Path) -> None:
    r = _run(run_sh, "--with", "sparky")
    assert r.returncode == 2 and "--with takes 'spark' (got 'sparky')" in r.stderr
    assert not (run_sh.parent.parent / "extras.txt").exists()  # refused before installing
