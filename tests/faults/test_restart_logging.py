"""Start-up logs one INFO line per state change that really happened (issue 10).

A restarted server used to log three lines per partition: leader (the stale state replayed
from the metadata log), follower of -1 (the re-registration moving leadership off it), leader
again. Now a clean shutdown is a controlled shutdown (leadership moved off and the broker fenced
in the metadata, as Kafka's), so a restart logs one "became leader" per partition.
"""

from __future__ import annotations

import os
import re
import signal

from client import Admin, Producer


def _stop(gp) -> None:
    os.killpg(gp.proc.pid, signal.SIGTERM)
    assert gp.proc.wait(30) == 0


def test_restart_logs_one_line_per_partition(gregor_process, tmp_path) -> None:
    data = tmp_path / "data"
    first = gregor_process(data_dir=data)
    with Admin(bootstrap_servers=first.bootstrap) as admin:
        admin.create_topic("logged", partitions=3)
    with Producer(bootstrap_servers=first.bootstrap) as p:
        p.send("logged", b"v", partition=1).result(30)
    _stop(first)
    second = gregor_process(data_dir=data)
    _stop(second)
    start = second.stderr().split("] started: epoch")[0]  # start-up only, not the shutdown
    for part in range(3):
        lines = re.findall(rf"\[logged-{part}\] .*", start)
        assert len(lines) == 1 and "became leader" in lines[0], lines
    assert "follower of -1" not in second.stderr()
    assert "UNCLEAN" not in start
