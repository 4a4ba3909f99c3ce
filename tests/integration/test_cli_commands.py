"""The client commands as subprocesses against a real `gregor server` process, including the
quick start: start the server, create a topic, produce stdin lines, consume them back."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers import gregor_command


def gregor(
    *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def server(gregor_process):
    gp = gregor_process()
    probe = gregor("topics", "list", "--bootstrap-server", gp.bootstrap)
    if probe.returncode != 0:
        pytest.skip(f"broker does not serve topic APIs yet: {probe.stderr.strip()}")
    return gp


@pytest.mark.slow
def test_quick_start(server) -> None:
    bs = ["--bootstrap-server", server.bootstrap]
    r = gregor("topics", "create", "quickstart", "--partitions", "1", *bs)
    assert r.returncode == 0, r.stderr
    lines = [f"event {i}" for i in range(20)]
    r = gregor("produce", "quickstart", *bs, stdin="\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr
    r = gregor("consume", "quickstart", "--from-beginning", "--max-messages", "20", *bs)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == lines


def test_wait_ready_script_waits_for_the_port(server) -> None:
    """The quick start's `scripts/wait-ready.sh` (after `scripts/run.sh &`): 0 once the server
    answers; 1 with a message naming the address when nothing answers in time."""
    import socket
    from pathlib import Path

    script = str(Path(__file__).resolve().parents[2] / "scripts" / "wait-ready.sh")
    r = subprocess.run([script, server.bootstrap, "30"], capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert r.returncode == 0 and "gregor is up" in r.stderr, r.stderr
    with socket.socket() as s:  # a port nobody listens on (bound, never listening)
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
        r = subprocess.run([script, closed, "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and closed in r.stderr, r.stderr


@pytest.mark.slow
def test_topics_commands_and_keys(server) -> None:
    bs = ["--bootstrap-server", server.bootstrap]
    assert gregor("topics", "create", "k", "--partitions", "2", *bs).returncode == 0
    dup = gregor("topics", "create", "k", *bs)
    assert dup.returncode == 1 and "TOPIC_ALREADY_EXISTS" in dup.stderr
    assert gregor("topics", "create", "k", "--if-not-exists", *bs).returncode == 0
    assert "k" in gregor("topics", "list", *bs).stdout.split()
    desc = json.loads(gregor("topics", "describe", "k", "--json", *bs).stdout)
    assert [p["partition"] for p in desc[0]["partitions"]] == [0, 1]
    r = gregor("produce", "k", "--key-separator", ":", *bs, stdin="a:1\nb:2\nc:3\n")
    assert r.returncode == 0, r.stderr
    out = []
    for p in (0, 1):
        r = gregor("consume", "k", "--partition", str(p), "--offset", "0", "--print-key",
                   "--timeout-ms", "1500", *bs)  # fmt: skip
        assert r.returncode == 0, r.stderr
        out += r.stdout.splitlines()
    assert sorted(out) == ["a\t1", "b\t2", "c\t3"]
    assert gregor("topics", "delete", "k", *bs).returncode == 0
    assert "k" not in gregor("topics", "list", *bs).stdout.split()


@pytest.mark.slow
def test_perf_commands_print_json(server) -> None:
    bs = ["--bootstrap-server", server.bootstrap]
    assert gregor("topics", "create", "perf", *bs).returncode == 0
    r = gregor(
        "perf", "produce", "--topic", "perf", "--num-records", "5000", "--record-size", "50", *bs
    )
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["records"] == 5000 and res["errors"] == 0 and res["latency"]["p99_ms"] > 0
    assert res["mode"] == "send"  # the per-record path users write is the default
    assert res["latency_samples"] == 5000  # (below the sample cap: every record timed)
    assert r.stderr == ""  # no progress line without a TTY
    r = gregor("perf", "produce", "--topic", "perf", "--num-records", "5000", "--mode", "bulk", *bs)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["mode"] == "bulk" and res["records"] == 5000 and res["errors"] == 0
    assert res["latency_samples"] == 5000  # (send_many: each call's records weigh its latency)
    r = gregor("perf", "consume", "--topic", "perf", "--num-records", "5000", *bs)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["records"] >= 5000


def test_cli_reports_unreachable_broker() -> None:
    r = gregor("topics", "list", "--bootstrap-server", "127.0.0.1:1", "-X",
               "socket.connection.setup.timeout.ms=1000")  # fmt: skip
    assert r.returncode == 1
    assert "127.0.0.1:1" in r.stderr


def test_perf_produce_times_every_kth_record_past_the_sample_cap(server, monkeypatch) -> None:
    """Per-record mode: every record sent and checked for errors, the latency of every k-th
    timed once the records outnumber LATENCY_SAMPLES."""
    from client.cli import perf

    monkeypatch.setattr(perf, "LATENCY_SAMPLES", 100)
    assert gregor("topics", "create", "perf-k", "--bootstrap-server", server.bootstrap).returncode == 0
    res = perf.run_produce({"bootstrap.servers": server.bootstrap}, "perf-k", 1000, 20)
    assert res["records"] == 1000 and res["errors"] == 0
    assert res["latency_samples"] == 100 and res["latency"]["p50_ms"] > 0
