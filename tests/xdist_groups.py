"""The groups of tests that scripts/test.sh's two pytest-xdist workers receive whole
(tests/conftest.py's scheduler): a module's tests stay on one worker, so its module fixtures
are set up once; the fault scenarios, the container tier and the Spark tests run one at a time
on one worker: each is a whole cluster or a JVM, and two at once starve each other on 2 cores
(a Spark Python worker that cannot connect back within Spark's fixed 10 s fails its query)."""

from __future__ import annotations

SERIAL_GROUP = "whole-clusters"


def xdist_group_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if (
        path.startswith(("tests/containers/", "tests/spark/"))
        or path == "tests/cluster/test_fault_scenarios.py"
    ):
        return SERIAL_GROUP
    return path
