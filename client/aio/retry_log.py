"""Warnings for retries a user would otherwise wait through in silence.

A client retries retriable errors (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, lost
connections, ...) until delivery.timeout.ms, max.block.ms or request.timeout.ms run out, which
can be minutes. `RetryLog` says so while it happens, as Kafka's and librdkafka's clients do:

    WARNING  produce to orders-0 (broker 2) failing: [NOT_ENOUGH_REPLICAS] orders-0; retrying
    WARNING  produce to orders-0 (broker 2) still failing after 10.0 s: [NOT_ENOUGH_REPLICAS]
             orders-0; 97 retries since the last warning
    INFO     produce to orders-0 recovered after 112 retries in 11.6 s

- the first failure of a subject (what is retried: a partition's produce or fetch, metadata,
  the group's heartbeat, ...) logs a WARNING naming the error and the subject;
- while it keeps failing, at most one WARNING per `interval_s` (10 s), counting the retries
  since the last one;
- the first success after that logs an INFO;
- a subject that has not failed for `interval_s` starts over: its next failure warns at once;
- `grace_s`: for subjects whose first failures are routine (a topic being auto-created answers
  LEADER_NOT_AVAILABLE for a moment), the first WARNING waits until the failures have lasted
  that long.

Each log line goes to the logger of the module that reports it (`client.aio.sender`,
`client.aio.fetcher`, ...): the library configures no handler; an application, or the `gregor`
commands (client/cli/common.py), decides where WARNINGs go.

Loop-owned, like the client objects that own one. `clock` and `interval_s` are injectable
for tests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable

RETRY_WARNING_INTERVAL_S = 10.0


class _Episode:
    __slots__ = (
        "what",
        "since",
        "last_failure",
        "warned_at",
        "retries",
        "unwarned",
        "error",
    )

    def __init__(self, what: str, now: float, error: str) -> None:
        self.what = what
        self.since = now
        self.last_failure = now
        self.warned_at: float | None = None  # None: not warned yet (within its grace)
        self.retries = 0  # failures after the first
        self.unwarned = 0  # of those, since the last warning
        self.error = error


class RetryLog:
    """Rate-limited WARNINGs for subjects that keep failing with retriable errors."""

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = logger
        self.interval_s = RETRY_WARNING_INTERVAL_S if interval_s is None else interval_s
        self.clock = clock
        self.failing: dict[Hashable, _Episode] = {}  # (empty while all is well: a cheap test)

    def failed(self, key: Hashable, what: str, error: object, grace_s: float = 0.0) -> None:
        """`what` (e.g. "produce to orders-0 (broker 2)") failed with `error` and is retried.
        `grace_s`: warn only once it has been failing that long."""
        now = self.clock()
        ep = self.failing.get(key)
        text = str(error) or type(error).__name__
        if ep is None or now - ep.last_failure >= self.interval_s:
            ep = self.failing[key] = _Episode(what, now, text)
            if grace_s <= 0:
                self.log.warning("%s failing: %s; retrying", what, text)
                ep.warned_at = now
            return
        ep.retries += 1
        ep.unwarned += 1
        ep.last_failure = now
        ep.what, ep.error = what, text
        if ep.warned_at is None:
            if now - ep.since >= grace_s:
                self.log.warning("%s failing for %.1f s: %s; retrying", what, now - ep.since, text)
                ep.warned_at = now
                ep.unwarned = 0
        elif now - ep.warned_at >= self.interval_s:
            self.log.warning(
                "%s still failing after %.1f s: %s; %d %s since the last warning",
                what,
                now - ep.since,
                text,
                ep.unwarned,
                "retry" if ep.unwarned == 1 else "retries",
            )
            ep.warned_at = now
            ep.unwarned = 0

    def succeeded(self, key: Hashable) -> None:
        """`key`'s subject works again (an INFO if it was failing)."""
        ep = self.failing.pop(key, None)
        if ep is not None and ep.warned_at is not None:  # (recovered within its grace: quiet)
            self.log.info(
                "%s recovered after %d %s in %.1f s",
                ep.what,
                ep.retries,
                "retry" if ep.retries == 1 else "retries",
                self.clock() - ep.since,
            )

    def forget(self, key: Hashable) -> None:
        """Stop tracking `key` without a message (its subject gave up or went away)."""
        self.failing.pop(key, None)
