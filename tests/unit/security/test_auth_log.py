"""The authorizer log is rate-limited: at most max_lines per interval, then one line with how
many were left out; every failure is counted."""

from __future__ import annotations

import logging

from broker.security.auth_log import LOGGER_NAME, AuthLog


def test_failed_logins_are_logged_with_address_and_rate_limited(caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    now = [0.0]
    log = AuthLog(max_lines=3, interval_s=10.0, clock=lambda: now[0])
    for i in range(10):
        log.failed_login(f"user{i}", "SCRAM-SHA-256", "/10.0.0.7", "invalid proof")
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME]
    assert lines == [
        f"failed authentication from /10.0.0.7: user 'user{i}', mechanism SCRAM-SHA-256:"
        " invalid proof"
        for i in range(3)
    ]
    now[0] = 10.5
    log.failed_login("x", "PLAIN", "/10.0.0.8", "unknown user 'x'")
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME]
    assert lines[3] == "7 more authorizer events in the last 10 s were not logged"
    assert "user 'x'" in lines[4] and "/10.0.0.8" in lines[4]
    assert log.failed_logins == 11


def test_denials_share_the_rate_limit_and_name_who_what_where(caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    now = [0.0]
    log = AuthLog(max_lines=2, interval_s=10.0, clock=lambda: now[0])
    for _ in range(5):
        log.denied("User:alice", "10.0.0.9", "WRITE", "TOPIC:orders")
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME]
    assert (
        lines
        == ["principal User:alice from host 10.0.0.9 is denied operation WRITE on TOPIC:orders"] * 2
    )
    assert log.denials == 5
