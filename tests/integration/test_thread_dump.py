"""SIGQUIT (`kill -3`, as a JVM answers it): a running `gregor server` or `gregor controller`
prints every thread's stack on stderr and goes on serving; a SIGTERM still stops it cleanly.
Tests use it to show where a process that does not stop is stuck (GregorProcess.stop)."""

from __future__ import annotations

import signal
import socket

import pytest
from helpers import api_versions_ok, spawn_gregor, wait_until

STACK = "most recent call first"


def test_server_prints_its_threads_on_sigquit_and_keeps_serving(gregor_process) -> None:
    gp = gregor_process()
    api_versions_ok(gp.address)
    gp.proc.send_signal(signal.SIGQUIT)

    def dumped() -> bool:  # (stderr is read while the handler may still be writing)
        err = gp.stderr()
        return (
            err.count(STACK) >= 4  # the main thread and the broker's own threads
            and "serve_forever" in err  # the main thread, waiting for a signal
            and "processor.py" in err  # the network threads
        )

    wait_until(dumped, 15, "the threads' stacks on stderr")
    assert gp.proc.poll() is None
    api_versions_ok(gp.address)  # still serving
    assert gp.stop(signal.SIGTERM, 60) == 0


def test_a_stop_that_does_not_end_fails_with_the_stacks(gregor_process) -> None:
    """GregorProcess.stop on a server that goes on (SIGHUP only reloads certificates): after
    the timeout it fails showing the server's threads' stacks, and the server is gone."""
    gp = gregor_process()
    with pytest.raises(AssertionError, match="still running") as failed:
        gp.stop(signal.SIGHUP, 1.0)
    assert STACK in str(failed.value) and "serve_forever" in str(failed.value)
    assert gp.proc.returncode == -signal.SIGKILL


def test_controller_prints_its_threads_on_sigquit_and_keeps_running(tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "controller.yaml"
    cfg.write_text(
        "process.roles: controller\nnode.id: 1\n"
        f'controller.quorum.voters: "1@127.0.0.1:{port}"\n'
        f"metadata.log.dir: {tmp_path / 'meta'}\n"
    )
    with spawn_gregor(
        ["controller", "--config", str(cfg)], tmp_path / "meta", tmp_path / "c.err"
    ) as gp:
        gp.wait_ready(30)
        gp.proc.send_signal(signal.SIGQUIT)
        wait_until(
            lambda: gp.stderr().count(STACK) >= 2 and "cli.py" in gp.stderr(),
            15,
            "the threads' stacks on stderr, the main thread's in controller/cli.py",
        )
        assert gp.proc.poll() is None
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # still listening
        assert gp.stop(signal.SIGTERM, 60) == 0
