"""`gregor consume` start positions and errors (issue 10, item 9), against a `gregor server`
process: -X auto.offset.reset is honoured, an offset outside the log is an error naming the
valid range (or, with -X auto.offset.reset given, a reset said on stderr), and a missing
topic or partition fails at once naming what exists, within --timeout-ms."""

from __future__ import annotations

import subprocess
import time

import pytest
from helpers import gregor_command, wait_until

from client import Consumer, Producer, TopicPartition


def gregor(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def server(gregor_process):
    # Tiny segments and retention so the log start moves past 0 within the test.
    return gregor_process(
        "--override", "log.segment.bytes=300",
        "--override", "log.retention.bytes=300",
        "--override", "log.retention.check.interval.ms=100",
    )  # fmt: skip


def _fill(bootstrap: str, topic: str, n: int) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as p:
        for i in range(n):
            p.send(topic, b"r%03d" % i, partition=0).result(30)


def test_dash_x_auto_offset_reset_is_honoured(server) -> None:
    _fill(server.bootstrap, "x", 3)
    bs = ["--bootstrap-server", server.bootstrap]
    r = gregor("consume", "x", "-X", "auto.offset.reset=earliest", "--max-messages", "3", *bs)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["r000", "r001", "r002"]


def test_offset_below_the_log_start_names_the_valid_range(server) -> None:
    _fill(server.bootstrap, "old", 40)
    tp = TopicPartition("old", 0)
    with Consumer(bootstrap_servers=server.bootstrap) as c:
        seen: list[tuple[int, float]] = []  # (log start, when first seen)

        def settled() -> int:
            """The log start once retention moved it and left it for 1 s (10 checks): it
            deletes one segment per check, so an early reading could still move."""
            now, start = time.monotonic(), c.beginning_offsets([tp])[tp]
            if not seen or seen[-1][0] != start:
                seen.append((start, now))
            return start if start > 0 and now - seen[-1][1] >= 1.0 else 0

        start = wait_until(settled, 30, "retention to move the log start and stop")
        end = c.end_offsets([tp])[tp]
    bs = ["--bootstrap-server", server.bootstrap]
    r = gregor("consume", "old", "--partition", "0", "--offset", "0", "--timeout-ms", "2000", *bs)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "offset 0 is out of range for old-0" in r.stderr
    assert f"{start}..{end}" in r.stderr and "--from-beginning" in r.stderr
    # With a reset policy given, it starts there and says so.
    r = gregor("consume", "old", "--partition", "0", "--offset", "0", "--timeout-ms", "2000",
               "-X", "auto.offset.reset=earliest", *bs)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"starting at {start}" in r.stderr
    assert r.stdout.splitlines()[0] == f"r{start:03d}"


def test_missing_partition_and_topic_fail_at_once(server) -> None:
    _fill(server.bootstrap, "three", 1)
    # at once: with request.timeout.ms at 10 min, a wait for metadata would pass the 60 s deadline
    bs = ["--bootstrap-server", server.bootstrap, "-X", "request.timeout.ms=600000"]
    t0 = time.monotonic()
    r = gregor("consume", "three", "--partition", "5", "--timeout-ms", "3000", *bs)
    assert r.returncode == 1, r.stderr
    assert "has 1 partition(s), 0..0: there is no partition 5" in r.stderr
    r = gregor("consume", "nope", "--timeout-ms", "3000", *bs)
    assert r.returncode == 1 and "topic 'nope' does not exist" in r.stderr
    print(f"both refusals took {time.monotonic() - t0:.2f}s")
