"""The authorizer log: one named logger (`gregor.authorizer`, Kafka's `kafka.authorizer.logger`)
for failed logins and authorization denials, each line with the principal or user name tried and the
client address, rate-limited: at most `max_lines` lines per `interval_s`, then one line saying
how many were left out. Failed logins are INFO (a guessing client must not flood the log).

Any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

LOGGER_NAME = "gregor.authorizer"


class AuthLog:
    def __init__(
        self,
        max_lines: int = 10,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger | None = None,
    ) -> None:
        self.log = logger or logging.getLogger(LOGGER_NAME)
        self.max_lines = max_lines
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._window_start = float("-inf")
        self._lines = 0
        self._suppressed = 0
        self.failed_logins = 0  # a statistic: every failure, logged or not
        self.denials = 0  # a statistic: every authorization denial, logged or not

    def failed_login(self, user: str | None, mechanism: str, address: str, reason: str) -> None:
        """A failed SASL authentication: the name tried, the mechanism, the client address and
        why (for the operator; the client is told only that it failed)."""
        self.failed_logins += 1
        self._emit(
            "failed authentication from %s: user %r, mechanism %s: %s",
            address,
            user,
            mechanism,
            reason,
        )

    def denied(self, principal: str, host: str, operation: str, resource: str) -> None:
        """An authorization denial (Kafka's "Principal = ... is Denied operation = ...")."""
        self.denials += 1
        self._emit(
            "principal %s from host %s is denied operation %s on %s",
            principal,
            host,
            operation,
            resource,
        )

    def _emit(self, fmt: str, *args: object) -> None:
        now = self._clock()
        with self._lock:
            if now - self._window_start >= self.interval_s:
                if self._suppressed:
                    self.log.info(
                        "%d more authorizer events in the last %.0f s were not logged",
                        self._suppressed,
                        self.interval_s,
                    )
                self._window_start, self._lines, self._suppressed = now, 0, 0
            if self._lines >= self.max_lines:
                self._suppressed += 1
                return
            self._lines += 1
        self.log.info(fmt, *args)
