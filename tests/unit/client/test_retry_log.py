"""RetryLog: one WARNING when a subject starts failing, at most one per interval while it
lasts (with the retries since the last), an INFO when it recovers (client/aio/retry_log.py)."""

from __future__ import annotations

import logging

import pytest

from client.aio.retry_log import RETRY_WARNING_INTERVAL_S, RetryLog

LOGGER = "test.retry_log"


class _Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def _messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


def test_warns_at_first_then_once_per_interval_with_the_count(caplog) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = _Clock()
    rl = RetryLog(logging.getLogger(LOGGER), clock=clock)
    assert rl.interval_s == RETRY_WARNING_INTERVAL_S == 10.0
    rl.failed("t-0", "produce to t-0 (broker 2)", "[NOT_ENOUGH_REPLICAS] t-0")
    assert _messages(caplog, logging.WARNING) == [
        "produce to t-0 (broker 2) failing: [NOT_ENOUGH_REPLICAS] t-0; retrying"
    ]
    for _ in range(19):  # 9.5 s of retries every 0.5 s: no second warning yet
        clock.now += 0.5
        rl.failed("t-0", "produce to t-0 (broker 2)", "[NOT_ENOUGH_REPLICAS] t-0")
    assert len(_messages(caplog, logging.WARNING)) == 1
    for _ in range(40):  # 20 s more: two more warnings, each with its count
        clock.now += 0.5
        rl.failed("t-0", "produce to t-0 (broker 3)", "[NOT_LEADER_OR_FOLLOWER] t-0")
    warnings = _messages(caplog, logging.WARNING)
    assert len(warnings) == 3, warnings
    assert warnings[1].startswith("produce to t-0 (broker 3) still failing after 10.0 s: ")
    assert warnings[1].endswith("; 20 retries since the last warning"), warnings[1]
    assert "after 20.0 s" in warnings[2] and "; 20 retries since" in warnings[2], warnings[2]
    rl.succeeded("t-0")
    assert _messages(caplog, logging.INFO) == [
        "produce to t-0 (broker 3) recovered after 59 retries in 29.5 s"
    ]
    rl.succeeded("t-0")  # (already well: nothing)
    assert len(_messages(caplog, logging.INFO)) == 1 and not rl.failing


def test_subjects_are_apart_and_a_quiet_interval_starts_over(caplog) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = _Clock()
    rl = RetryLog(logging.getLogger(LOGGER), interval_s=1.0, clock=clock)
    rl.failed("a", "fetch from a", "x")
    rl.failed("b", "fetch from b", "y")
    assert len(_messages(caplog, logging.WARNING)) == 2  # one each
    clock.now += 1.0  # no failure of "a" for a whole interval: a new episode, a new warning
    rl.failed("a", "fetch from a", "x")
    assert _messages(caplog, logging.WARNING)[-1] == "fetch from a failing: x; retrying"
    rl.forget("b")
    rl.succeeded("b")
    assert _messages(caplog, logging.INFO) == []


def test_grace_delays_the_first_warning_and_a_quick_recovery_stays_quiet(caplog) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = _Clock()
    rl = RetryLog(logging.getLogger(LOGGER), clock=clock)
    for _ in range(4):  # 1.5 s of LEADER_NOT_AVAILABLE while a topic is being created
        rl.failed("t", "metadata of t", "LEADER_NOT_AVAILABLE", grace_s=2.0)
        clock.now += 0.5
    rl.succeeded("t")
    assert caplog.records == []
    for _ in range(6):  # this time it lasts: one warning once 2 s have passed
        rl.failed("t", "metadata of t", "LEADER_NOT_AVAILABLE", grace_s=2.0)
        clock.now += 0.5
    assert _messages(caplog, logging.WARNING) == [
        "metadata of t failing for 2.0 s: LEADER_NOT_AVAILABLE; retrying"
    ]
    rl.succeeded("t")
    assert _messages(caplog, logging.INFO) == ["metadata of t recovered after 5 retries in 3.0 s"]
