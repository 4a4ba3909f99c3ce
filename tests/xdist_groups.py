"""The groups of tests that scripts/test.sh's two pytest-xdist workers receive whole
(tests/conftest.py's scheduler): a module's tests stay on one worker, so its module fixtures
are set up once; the Spark tests share one worker's Spark session; the fault scenarios and the
container tier run one at a time on one worker (each is a whole cluster; never two at once)."""

from __future__ import annotations

SERIAL_GROUP = "whole-clusters"


def xdist_group_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/containers/") or path == "tests/cluster/test_fault_scenarios.py":
        return SERIAL_GROUP
    if path.startswith("tests/spark/"):
        return "spark"
    return path
