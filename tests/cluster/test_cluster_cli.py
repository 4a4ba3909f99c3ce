"""`gregor cluster up` and `gregor cluster status` (issue 11): one command starts 3 controllers
and 3 brokers on loopback, prints the bootstrap servers and the nodes; `status` shows brokers,
quorum and offline partitions; Ctrl-C stops every node and exits 0."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess

import pytest
from helpers import gregor_command, poll_n, wait_until

from client import Consumer, Producer, TopicPartition


def _free_base() -> int:
    """A port P with P..P+2 and P+101..P+103 free on loopback now (printed for replay)."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20_000, 60_000)
        socks = []
        try:
            for port in (*range(base, base + 3), *range(base + 101, base + 104)):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            print(f"cluster up base port {base}")
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free port range")


def _status(bootstrap: str) -> dict:
    r = subprocess.run(
        [*gregor_command(), "cluster", "status", "--bootstrap-server", bootstrap, "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.slow
def test_cluster_up_status_and_ctrl_c(tmp_path) -> None:
    base = _free_base()
    out = open(tmp_path / "up.out", "w+")  # noqa: SIM115 - closed below
    up = subprocess.Popen(
        [*gregor_command(), "cluster", "up", "--data-dir", str(tmp_path / "c"),
         "--base-port", str(base)],
        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    pids: list[int] = []
    try:
        text = wait_until(
            lambda: (lambda t: t if "Ctrl-C stops" in t or up.poll() is not None else None)(
                (tmp_path / "up.out").read_text()
            ),
            60,
            "cluster up ready",
        )
        assert up.poll() is None, text
        bootstrap = re.search(r"bootstrap servers: (\S+)", text)[1]
        assert bootstrap.split(",") == [f"127.0.0.1:{base + i}" for i in range(3)]
        pids += [int(m) for m in re.findall(r"^\S+\s+\d+\s+\S+\s+(\d+)\s", text, re.M)]
        assert len(pids) == 6
        st = wait_until(
            lambda: (lambda s: s if len(s["brokers"]) == 3 else None)(_status(bootstrap)),
            30,
            "3 brokers in status",
        )
        assert [b["fenced"] for b in st["brokers"]] == [False] * 3
        assert sorted(v["id"] for v in st["quorum"]["voters"]) == [1, 2, 3]
        with Producer(bootstrap_servers=bootstrap) as p:
            for i in range(30):
                p.send("up", b"%d" % i, partition=0).result(30)  # auto-created, RF 1
        with Consumer(bootstrap_servers=bootstrap) as c:
            c.assign([TopicPartition("up", 0)])
            assert len(poll_n(c, 30, timeout=30)) == 30
        assert _status(bootstrap)["offline"] == []
        os.killpg(up.pid, signal.SIGINT)
        assert up.wait(60) == 0
        for pid in pids:  # every node stopped with it
            wait_until(lambda pid=pid: not _alive(pid), 10, f"node {pid} gone")
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait(10)
        for pid in pids:  # the nodes run in their own sessions: never leave one behind
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
        out.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
