"""Retries a user would otherwise wait through in silence are logged (issue 22, item 2).

A single broker with a topic of min.insync.replicas=2 answers every acks=all produce with
NOT_ENOUGH_REPLICAS (retriable): the producer retries until delivery.timeout.ms. It used to
say nothing (only INFO lines) until the record expired. Now the first failure is a WARNING
naming the error, the partition and the broker; while it lasts, at most one more per interval
(10 s) with the number of retries since; an INFO once the partition takes writes again. The
clock of the warnings is swapped for one the test moves, so nothing waits 10 s.
"""

from __future__ import annotations

import logging
import subprocess
import time

import pytest
from helpers import async_wait_until, gregor_command

from client import aio
from client.errors import GregorTimeoutError, NotEnoughReplicasError

SENDER = "client.aio.sender"


def _failing(caplog: pytest.LogCaptureFixture, what: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == SENDER and r.levelno == logging.WARNING and what in r.getMessage()
        and " failing" in r.getMessage()
    ]  # fmt: skip


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_not_enough_replicas_warns_once_then_per_interval_then_recovers(
    broker_server, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="client")
    bootstrap = broker_server.bootstrap
    async with aio.Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topic("nes", 1, config={"min.insync.replicas": "2"})
    p = aio.Producer(
        bootstrap_servers=bootstrap,
        acks="all",
        retry_backoff_ms=20,
        request_timeout_ms=1000,
        delivery_timeout_ms=5000,
    )
    await p.start()
    try:
        assert p._sender is not None
        clock = _Clock()
        retry_log = p._sender.retry_log
        retry_log.clock = clock
        fut = await p.send("nes", b"v")
        first = await async_wait_until(lambda: _failing(caplog, "nes-0"), 10, "the first warning")
        assert "produce to nes-0 (broker " in first[0], first
        assert "NOT_ENOUGH_REPLICAS" in first[0], first
        # many retries, still one warning while the interval has not passed
        await async_wait_until(
            lambda: any(ep.retries >= 5 for ep in retry_log.failing.values()),
            10,
            "five more retries",
        )
        assert len(_failing(caplog, "nes-0")) == 1
        for _ in range(2):  # 12 s pass, failing all along: the next failure warns again
            seen = sum(ep.retries for ep in retry_log.failing.values())
            clock.now += 6.0
            await async_wait_until(
                lambda seen=seen: sum(ep.retries for ep in retry_log.failing.values()) > seen,
                10,
                "another retry",
            )
        again = await async_wait_until(
            lambda: _failing(caplog, "nes-0")[1:], 10, "the second warning"
        )
        assert "still failing after 12.0 s" in again[0], again
        assert "NOT_ENOUGH_REPLICAS" in again[0]
        assert "retries since the last warning" in again[0], again
        # expired while queued: GregorTimeoutError naming the last error; expired while a
        # retry was in flight: that retry's own error (as Kafka's Sender.canRetry)
        with pytest.raises(
            (GregorTimeoutError, NotEnoughReplicasError), match="NOT_ENOUGH_REPLICAS"
        ):
            await fut
        assert len(_failing(caplog, "nes-0")) == 2  # still the same 10 s on that clock
        # the topic takes writes again: one INFO says so
        async with aio.Admin(bootstrap_servers=bootstrap) as admin:
            await admin.incremental_alter_configs({("topic", "nes"): {"min.insync.replicas": "1"}})
        md = await (await p.send("nes", b"w"))
        assert md.offset == 0
        recovered = [
            r.getMessage()
            for r in caplog.records
            if r.name == SENDER and r.levelno == logging.INFO and "recovered" in r.getMessage()
        ]
        assert len(recovered) == 1 and "produce to nes-0" in recovered[0], recovered
        assert not retry_log.failing
    finally:
        await p.close()


def test_cli_produce_shows_the_warning_on_stderr(broker_server) -> None:
    """`gregor produce` to a partition that keeps refusing: the WARNING is on stderr well
    before the record expires, then the error, and no pending-task noise on exit."""
    bootstrap = broker_server.bootstrap
    from client import Admin

    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic("nes-cli", 1, config={"min.insync.replicas": "2"})
    started = time.monotonic()
    out = subprocess.run(
        [*gregor_command(), "produce", "nes-cli", "--bootstrap-server", bootstrap,
         "-X", "delivery.timeout.ms=3000", "-X", "request.timeout.ms=1000",
         "-X", "retry.backoff.ms=20"],
        input=b"one\n",
        capture_output=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    err = out.stderr.decode()
    assert out.returncode == 1, err
    warnings = [
        line for line in err.splitlines()
        if line.startswith("WARNING") and "produce to nes-cli-0" in line and " failing" in line
    ]  # fmt: skip
    assert warnings and "NOT_ENOUGH_REPLICAS" in warnings[0], err
    assert len(warnings) <= 1 + elapsed / 10, err  # at most one per 10 s
    assert "error: " in err and "NOT_ENOUGH_REPLICAS" in err.split("error: ", 1)[1], err
    assert "Task was destroyed" not in err and "never retrieved" not in err, err
    assert "Traceback" not in err, err


async def test_consumer_fetch_of_a_missing_topic_warns_then_recovers(broker_server, caplog) -> None:
    """A consumer assigned a partition of a topic that is not there (yet) fetches nothing and
    used to say nothing: now, once that has lasted 2 s, a WARNING names the partition and the
    error; once the topic is created and fetched from, an INFO says so."""
    caplog.set_level(logging.INFO, logger="client")
    bootstrap = broker_server.bootstrap
    tp = aio.TopicPartition("later", 0)
    c = aio.Consumer(bootstrap_servers=bootstrap, retry_backoff_ms=20)
    await c.start()
    try:
        clock = _Clock()
        c._fetcher.retry_log.clock = clock
        c.assign([tp])
        c.seek(tp, 0)

        def fetch_warnings() -> list[str]:
            return [
                r.getMessage()
                for r in caplog.records
                if r.name == "client.aio.fetcher" and r.levelno == logging.WARNING
            ]

        async def poll_until(cond, what: str) -> None:
            deadline = time.monotonic() + 30
            while not cond():
                assert time.monotonic() < deadline, what
                assert await c.poll(20) == []

        await poll_until(lambda: tp in c._fetcher.retry_log.failing, "a failed fetch")
        assert fetch_warnings() == []  # within its 2 s of grace (a topic being created)
        clock.now += 2.0
        await poll_until(fetch_warnings, "the warning")
        assert "fetch of later-0" in fetch_warnings()[0], fetch_warnings()
        assert "UNKNOWN_TOPIC_OR_PARTITION" in fetch_warnings()[0], fetch_warnings()
        for _ in range(20):  # many more retries, no more warnings
            await c.poll(20)
        assert len(fetch_warnings()) == 1, fetch_warnings()
        async with aio.Admin(bootstrap_servers=bootstrap) as admin:
            await admin.create_topic("later", 1)
        async with aio.Producer(bootstrap_servers=bootstrap) as p:
            await (await p.send("later", b"here"))
        got: list = []
        deadline = time.monotonic() + 30
        while not got:
            assert time.monotonic() < deadline, "the record never came"
            got = await c.poll(200)
        assert got[0].value == b"here"
        recovered = [
            r.getMessage()
            for r in caplog.records
            if r.name == "client.aio.fetcher" and r.levelno == logging.INFO
            and "recovered" in r.getMessage()
        ]  # fmt: skip
        assert recovered and "fetch of later-0" in recovered[0], recovered
    finally:
        await c.close()


async def test_group_heartbeats_that_keep_failing_warn_then_recover(broker_factory, caplog) -> None:
    """A group member whose coordinator cannot be found (the broker answers FindCoordinator
    with COORDINATOR_NOT_AVAILABLE) retries its heartbeat every retry.backoff.ms: one WARNING
    names the group and the error, the retries do not repeat it, an INFO says when it joins."""
    from broker.handlers import dispatch
    from broker.handlers.base import RequestContext
    from client.errors import ErrorCode
    from client.protocol import ApiKey

    refusing = [True]

    def no_coordinator(request, services) -> None:
        if request.api_key == ApiKey.FIND_COORDINATOR and refusing[0]:
            RequestContext(request, services).respond_error(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, "refused by the test"
            )
            return
        dispatch(request, services)

    b = broker_factory(dispatch=no_coordinator)
    caplog.set_level(logging.INFO, logger="client")
    async with aio.Admin(bootstrap_servers=b.bootstrap) as admin:
        await admin.create_topic("grouped", 1)
    c = aio.Consumer(bootstrap_servers=b.bootstrap, group_id="g1", retry_backoff_ms=20)
    await c.start()
    try:
        assert c._group is not None
        c._group.retry_log.clock = _Clock()  # (frozen: the 10 s never pass)
        c.subscribe(["grouped"])

        def group_logs(level: int) -> list[str]:
            return [
                r.getMessage()
                for r in caplog.records
                if r.name == "client.aio.group" and r.levelno == level and "heartbeat" in r.getMessage()
            ]  # fmt: skip

        deadline = time.monotonic() + 30
        while not group_logs(logging.WARNING):
            assert time.monotonic() < deadline, "no warning"
            await c.poll(20)
        first = group_logs(logging.WARNING)[0]
        assert "[group=g1 " in first and "COORDINATOR_NOT_AVAILABLE" in first, first
        await async_wait_until(
            lambda: any(ep.retries >= 5 for ep in c._group.retry_log.failing.values()),  # type: ignore[union-attr]
            10,
            "more heartbeat retries",
        )
        assert len(group_logs(logging.WARNING)) == 1
        refusing[0] = False
        while not c.assignment():
            assert time.monotonic() < deadline, "never assigned"
            await c.poll(50)
        recovered = [m for m in group_logs(logging.INFO) if "recovered" in m]
        assert len(recovered) == 1 and "[group=g1 " in recovered[0], recovered
    finally:
        await c.close()
