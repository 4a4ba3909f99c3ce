"""scripts/test.sh runs pytest on two xdist workers with tests/conftest.py's scheduler: a
module's tests stay on one worker, and the fault scenarios, the container tier and Spark share
one group (never two at once). Checked on a real two-worker run, since xdist's
own group marks were once silently ignored (pytest 9.2's node ids)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from xdist_groups import SERIAL_GROUP, xdist_group_of

ROOT = Path(__file__).resolve().parents[2]


def test_groups_by_module_and_whole_clusters() -> None:
    assert xdist_group_of("tests/unit/a/test_x.py::test_y[1]") == "tests/unit/a/test_x.py"
    assert (
        xdist_group_of("tests/spark/test_spark_batch.py::t")
        == xdist_group_of("tests/containers/test_compose_cluster.py::t")
        == xdist_group_of("tests/cluster/test_fault_scenarios.py::test_fault_scenario[S2]")
        == SERIAL_GROUP
    )
    assert xdist_group_of("tests/cluster/test_failover.py::t") != SERIAL_GROUP


def test_a_two_worker_run_keeps_each_module_on_one_worker() -> None:
    modules = ["tests/unit/test_any_ratchet.py", "tests/unit/test_test_layout.py"]
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", *modules],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    workers: dict[str, set[str]] = {}
    for m in re.finditer(r"\[(gw\d+)\] \[ *\d+%\] PASSED (tests/[\w/]+\.py)::", r.stdout):
        workers.setdefault(m[2], set()).add(m[1])
    assert set(workers) == set(modules), r.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), workers
