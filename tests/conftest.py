"""Shared fixtures for every test tier (owned by H-net).

- `broker_server`: an in-process BrokerServer on 127.0.0.1, ephemeral port, temp data dir.
  Yields a `BrokerHandle` (.host, .port, .bootstrap "127.0.0.1:PORT", .data_dir, .server).
- `broker_factory`: `make(**dotted_overrides, dispatch=None, node_factory=None) -> BrokerHandle`
  for tests that need their own settings; every broker made is shut down after the test.
- `gregor_process`: `start(*extra_args, timeout=15.0) -> GregorProcess`, a real `gregor server
  --port 0 --data-dir TMP` subprocess in its own session; torn down with SIGTERM, then SIGKILL of
  its process group.
- `wait_until(cond, timeout, msg)` lives in tests/helpers.py (`from helpers import wait_until`).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import reaper
from helpers import BrokerHandle, GregorProcess, broker_config, gregor_command
from xdist_groups import xdist_group_of


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerHandle]]:
    from broker.server import BrokerServer, build_node

    made: list[BrokerHandle] = []

    def make(
        dispatch: Any = None,
        node_factory: Any = None,
        data_dir: Path | None = None,
        **overrides: Any,
    ) -> BrokerHandle:
        d = data_dir or tmp_path / f"broker-{len(made)}"
        cfg = broker_config(d, **overrides)
        server = BrokerServer(cfg, node_factory=node_factory or build_node, dispatch=dispatch)
        host, port = server.start()
        handle = BrokerHandle(server=server, host=host, port=port, data_dir=d)
        made.append(handle)
        return handle

    yield make
    for handle in reversed(made):
        handle.server.shutdown(timeout=10.0)


@pytest.fixture
def broker_server(broker_factory: Callable[..., BrokerHandle]) -> BrokerHandle:
    return broker_factory()


@pytest.fixture
def gregor_process(tmp_path: Path) -> Iterator[Callable[..., GregorProcess]]:
    started: list[GregorProcess] = []

    def start(
        *extra_args: str, timeout: float = 15.0, data_dir: Path | None = None
    ) -> GregorProcess:
        d = data_dir or tmp_path / f"gregor-{len(started)}"
        stderr_path = tmp_path / f"gregor-{len(started)}.stderr"
        args = [*gregor_command(), "server", "--port", "0", "--data-dir", str(d), *extra_args]
        env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
        stderr = open(stderr_path, "wb")  # noqa: SIM115 - closed by GregorProcess
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        gp = GregorProcess(proc, d, stderr_path, stderr)
        started.append(gp)
        gp.wait_ready(timeout)
        return gp

    yield start
    for gp in started:
        if gp.proc.poll() is None:
            _killpg(gp.proc.pid, signal.SIGTERM)
            try:
                gp.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                _killpg(gp.proc.pid, signal.SIGKILL)
                gp.proc.wait(10.0)
        gp.close()


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the session leader's pid is its process group id
    except ProcessLookupError:
        pass


def pytest_sessionstart(session: pytest.Session) -> None:
    # Every process this run starts inherits a token; a detached watchdog ends them all once
    # this process is gone, even if it was SIGKILLed before any teardown ran (tests/reaper.py).
    reaper.start()


# The long tier: tests marked `long` (whole-system runs that repeat what a shorter test already
# covers, or build extra images) run only with GREGOR_LONG_TESTS=1, i.e. from
# scripts/test-long.sh; the default run (scripts/test.sh, CI) skips them, naming the script.
LONG_TESTS = os.environ.get("GREGOR_LONG_TESTS", "") not in ("", "0")


# Parallel runs (scripts/test.sh: pytest-xdist, `-n 2 --dist loadgroup`): the scheduler below
# hands out whole groups (tests/xdist_groups.py): a module's tests stay on one worker (its
# module fixtures are set up once); the fault scenarios, the container tier and the Spark tests
# run one at a time on one worker.
# (A scheduler, not xdist_group marks: pytest 9.2 computes node ids so that xdist 3.8 cannot
# append a mark's group to them, and the marks are silently ignored.)
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None  # xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if LONG_TESTS:
        return
    skip = pytest.mark.skip(reason="long tier: run it with scripts/test-long.sh")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)


# The fault harness's summary table (CHECKER.md figures): each scenario test records its report
# as a user property, which reaches this process also from an xdist worker.
FAULT_REPORTS: list[dict] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        FAULT_REPORTS.extend(v for k, v in report.user_properties if k == "fault_report")


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if not FAULT_REPORTS:
        return
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "cluster"))
    from fault_scenarios import summary_table

    terminalreporter.write_sep("=", "fault scenarios")
    terminalreporter.write_line(summary_table(FAULT_REPORTS))
