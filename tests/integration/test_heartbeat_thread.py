"""A broker's heartbeats do not wait for its periodic tasks: with the broker-tasks thread stuck
(as when a task waits for the metadata applier during a long apply of thousands of new
partitions), heartbeats go on, so the controller does not fence a busy broker."""

from __future__ import annotations

import threading

from helpers import broker_config, wait_until

from broker.server import BrokerServer


def test_heartbeats_go_on_while_the_periodic_tasks_are_stuck(tmp_path):
    cfg = broker_config(
        tmp_path, broker_heartbeat_interval_ms=50, replica_lag_time_max_ms=200
    )  # the ISR-shrink task every 100 ms
    server = BrokerServer(cfg)
    server.start()
    release, entered = threading.Event(), threading.Event()
    try:
        node = server.node
        beats: list[float] = []
        heartbeat = node.lifecycle.heartbeat

        def counted(*a, **kw):
            beats.append(1.0)
            return heartbeat(*a, **kw)

        def stuck(*_a, **_kw):
            entered.set()
            release.wait(30)
            return 0

        node.lifecycle.heartbeat = counted
        node.replica_manager.shrink_isrs = stuck  # the tasks thread looks it up each run
        wait_until(entered.is_set, 10, "the broker-tasks thread is stuck in a task")
        before = len(beats)
        wait_until(lambda: len(beats) >= before + 5, 10, "5 heartbeats while it is stuck")
        assert entered.is_set() and not release.is_set(), "the task was stuck all along"
    finally:
        release.set()
        server.shutdown(timeout=10)
