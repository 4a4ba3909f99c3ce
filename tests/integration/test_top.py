"""`gregor top` against a real broker's metrics listener: `--once --json` prints one sample
whose figures match /metrics and see a produce load and a group's lag; the live view draws on
a real pseudo-terminal and ends on Ctrl-C; without a terminal it refuses with a clear message."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from helpers import gregor_command, wait_until

from client import Admin, Consumer, Producer

ROOT = Path(__file__).resolve().parents[2]


def top(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), "top", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def test_once_json_sees_the_broker_a_load_and_a_groups_lag(broker_factory):
    handle = broker_factory(**{"metrics.listener": "http://127.0.0.1:0"})
    host, port = handle.server.metrics_address
    endpoint = f"{host}:{port}"
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic("busy", 2, 1)
        admin.create_topic("quiet", 1, 1)
    with Producer(bootstrap_servers=handle.bootstrap, linger_ms=0) as prod:
        for i in range(6):
            prod.send("busy", b"x%d" % i, partition=i % 2).result(30)
    consumer = Consumer(
        "busy",
        bootstrap_servers=handle.bootstrap,
        group_id="g-top",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=2,
    )
    try:
        wait_until(lambda: consumer.poll(200), 30, "records for g-top")
        consumer.commit()
    finally:
        consumer.close()
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        lag = admin.describe_group("g-top").total_lag
    assert lag > 0

    stop = threading.Event()

    def load() -> None:
        with Producer(bootstrap_servers=handle.bootstrap, linger_ms=0) as prod:
            while not stop.is_set():
                prod.send("quiet", b"q" * 200, partition=0).result(30)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        r = top("--metrics", endpoint, "--once", "--json", "--interval", "1")
    finally:
        stop.set()
        loader.join(30)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    [b] = s["brokers"]
    assert b["up"] and b["node_id"] == handle.server.settings.node_id
    assert b["partitions"] >= 3 and b["leaders"] >= 3  # busy-0, busy-1, quiet-0 (+ offsets)
    assert b["bytes_in_per_s"] > 0 and b["requests_per_s"] > 0
    assert b["request_p99_ms"] > 0
    assert s["topics"][0]["topic"] == "quiet"  # the one produced to during the interval
    assert s["topics"][0]["bytes_in_per_s"] > 0
    [g] = [g for g in s["groups"] if g["group"] == "g-top"]
    assert g["lag"] == lag and g["lag_by_topic"] == {"busy": lag}
    assert g["members"] == 0 and g["state"] == "empty"
    # the combined server is the active controller: its reassignments are the cluster's
    assert s["partitions"] == {
        "under_replicated": 0,
        "under_min_isr": 0,
        "offline": 0,
        "reassigning": 0,
    }
    assert b["follower_lag_records"] == 0 and b["follower_lag_s"] == 0  # (one replica)
    assert s["controllers"] == []  # the combined server reports as a broker


# A terminal's foreground job starts with Ctrl-C (SIGINT) at its default action. A test process
# may have it ignored (a test run started as a background job of a non-interactive shell has
# SIGINT and SIGQUIT ignored, and an ignored signal stays ignored across fork and exec, so
# Python would not even install its KeyboardInterrupt handler in the child): put it back before
# exec'ing the command, as the terminal's shell would.
_CTRL_C_AT_DEFAULT = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL);"
    " os.execv(sys.argv[1], sys.argv[1:])",
]


def test_live_view_draws_on_a_terminal_and_ends_on_ctrl_c(broker_factory):
    handle = broker_factory(**{"metrics.listener": "http://127.0.0.1:0"})
    host, port = handle.server.metrics_address
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic("shown-topic", 1, 1)
    with Producer(bootstrap_servers=handle.bootstrap, linger_ms=0) as prod:
        prod.send("shown-topic", b"v", partition=0).result(30)
    master, slave = pty.openpty()
    command = [*gregor_command(), "top", "--metrics", f"{host}:{port}", "--interval", "0.3"]
    proc = subprocess.Popen(
        [*_CTRL_C_AT_DEFAULT, *command],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "160", "LINES": "50", "TERM": "xterm"},
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"shown-topic" not in seen or seen.count(b"busiest topics") < 2:
            assert time.monotonic() < deadline, seen[-2000:]
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        assert b"brokers" in seen and b"groups" in seen
        os.killpg(proc.pid, signal.SIGINT)
        # Keep reading the terminal until it exits: a view that stops on Ctrl-C still writes
        # (the screen it restores), and a terminal nobody reads blocks that write for good.
        deadline = time.monotonic() + 30
        while proc.poll() is None:
            assert time.monotonic() < deadline, "gregor top did not end on Ctrl-C"
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    os.read(master, 65536)
                except OSError:
                    pass
        assert proc.wait(5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)


def test_refusals():
    r = top("--metrics", "127.0.0.1:1")
    assert r.returncode == 1 and "needs a terminal" in r.stderr
    r = top("--metrics", "127.0.0.1:1", "--json")
    assert r.returncode == 1 and "--json prints one sample: use it with --once" in r.stderr
    r = top("--metrics", "nohost", "--once")
    assert r.returncode == 1 and "--metrics: not HOST:PORT" in r.stderr
    # nothing answers: the sample says so, and the exit status too
    r = top("--metrics", "127.0.0.1:1", "--once", "--json", "--interval", "0.1")
    assert r.returncode == 1
    assert json.loads(r.stdout)["brokers"][0]["up"] is False
