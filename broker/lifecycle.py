"""BrokerLifecycle: a broker's membership in the cluster, through the ControllerChannel only.

    STARTING --register--> REGISTERED (fenced) --caught up, unfenced--> RUNNING
    RUNNING --controlled_shutdown--> SHUTTING_DOWN --leadership moved, fenced--> STOPPED

- register: BrokerRegistration with a new incarnation id per process start (a restarted broker
  is a new incarnation; the controller fences the old one's leadership away). While the old
  incarnation's session is still open (DUPLICATE_BROKER_REGISTRATION: killed and restarted
  within broker.session.timeout.ms) the registration is retried until it expires.
- catch up: heartbeats carry the broker's OWN published metadata offset, and the controller
  unfences the broker once that reaches its registration record.
- running: `heartbeat()` every broker.heartbeat.interval.ms (the node's heartbeat thread); a broker
  silent for broker.session.timeout.ms is fenced by the controller.
- controlled shutdown: heartbeats with want_shutdown until the controller has moved leadership
  off this broker and fenced it (Kafka's brokers do this on SIGTERM), bounded in time
  (controlled.shutdown.timeout.ms): without an answer it gives up with one line saying why.

Whether the channel reaches an in-process controller or a remote quorum is invisible here.
Threads: `start`/`controlled_shutdown` from the node's control thread, `heartbeat` from its
heartbeat thread; the state is a plain attribute read for logging and tests.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from client.errors import ErrorCode
from controller.channel import ControllerChannel
from controller.results import BrokerHeartbeatResult

_log = logging.getLogger(__name__)

STARTING, REGISTERED, RUNNING, SHUTTING_DOWN, STOPPED = (
    "starting",
    "registered",
    "running",
    "shutting down",
    "stopped",
)


REGISTRATION_RETRY_S = 0.2


class BrokerLifecycleError(RuntimeError):
    """Registration or unfencing failed (the broker cannot serve)."""


class BrokerLifecycle:
    def __init__(
        self,
        node_id: int,
        channel: ControllerChannel,
        publisher: Any,
        failed_replicas: Callable[[], list[tuple[str, int]]] | None = None,
        cannot_create_replicas: Callable[[], str | None] | None = None,
    ) -> None:
        """`publisher.image.offset` is the broker's published metadata offset and
        `publisher.wait_for(predicate, timeout)` waits for a newer image (MetadataPublisher).
        `failed_replicas()`: the replicas this broker could not create or open, reported with
        every heartbeat so the controller moves their leadership elsewhere.
        `cannot_create_replicas()`: why this broker cannot take new replicas now (None when it
        can), measured for every heartbeat so the controller places new replicas elsewhere."""
        self.node_id = node_id
        self.channel = channel
        self.publisher = publisher
        self._failed_replicas = failed_replicas or list
        self._cannot_create_replicas = cannot_create_replicas or (lambda: None)
        self.incarnation_id = uuid.uuid4().hex  # one per process start
        self.broker_epoch = -1
        self.state = STARTING

    def _set(self, state: str) -> None:
        if state != self.state:
            _log.info("[broker=%d] %s -> %s", self.node_id, self.state, state)
            self.state = state

    def start(
        self,
        host: str,
        port: int,
        rack: str | None,
        timeout: float = 30.0,
        endpoints: Sequence[tuple[str, str, int]] = (),
    ) -> int:
        """Register (`host:port`: the inter-broker endpoint; `endpoints`: every listener's
        (name, host, port)), then heartbeat until unfenced; returns the broker epoch.
        Raises BrokerLifecycleError (or the channel's error) when it does not get there."""
        deadline = time.monotonic() + timeout
        waited = False
        while True:
            reg = self.channel.register_broker(
                self.node_id, host, port, rack, self.incarnation_id, list(endpoints)
            ).result(timeout)
            code = reg.get("error_code", 0)
            if code != ErrorCode.DUPLICATE_BROKER_REGISTRATION or time.monotonic() > deadline:
                break
            # The previous incarnation (killed, restarted at once) still has a session: retry
            # until the controller fences it (broker.session.timeout.ms), as Kafka's brokers do.
            if not waited:
                _log.info(
                    "[broker=%d] the previous incarnation's session is still open; retrying the"
                    " registration until it expires",
                    self.node_id,
                )
                waited = True
            time.sleep(REGISTRATION_RETRY_S)
        if code != 0:
            raise BrokerLifecycleError(f"broker {self.node_id} registration failed: {reg}")
        self.broker_epoch = int(reg["broker_epoch"])
        self._set(REGISTERED)
        deadline = time.monotonic() + timeout
        while True:
            seen = self.publisher.image.offset
            if not self._heartbeat(timeout)["is_fenced"]:
                break
            if time.monotonic() > deadline:
                raise BrokerLifecycleError(
                    f"broker {self.node_id} was not unfenced within {timeout}s"
                )
            self._wait_past(seen)  # catching up
        self._set(RUNNING)
        return self.broker_epoch

    def _wait_past(self, offset: int, timeout: float = 0.1) -> None:
        """Wait (briefly) for a metadata image newer than `offset` to be published."""
        self.publisher.wait_for(lambda img: img.offset > offset, timeout)

    def heartbeat(self, timeout: float = 10.0) -> BrokerHeartbeatResult | None:
        """One periodic heartbeat (RUNNING only; a no-op answering None otherwise)."""
        if self.state != RUNNING:
            return None
        # the call gives up when this wait does, so abandoned calls do not pile up on a
        # channel whose controllers are gone (they would hold back the controlled shutdown's)
        return self._heartbeat(timeout, timeout_ms=int(timeout * 1000))

    def _heartbeat(
        self, timeout: float, want_shutdown: bool = False, timeout_ms: int | None = None
    ) -> BrokerHeartbeatResult:
        hb = self.channel.broker_heartbeat(
            self.node_id,
            self.broker_epoch,
            self.publisher.image.offset,
            want_shutdown=want_shutdown,
            failed_replicas=self._failed_replicas(),
            cannot_create_replicas=self._cannot_create_replicas(),
            timeout_ms=timeout_ms,
        ).result(timeout)
        if hb.get("error_code", 0) != 0:
            raise BrokerLifecycleError(f"broker {self.node_id} heartbeat failed: {hb}")
        return hb

    def controlled_shutdown(self, timeout: float = 4.0) -> bool:
        """Ask the controller to move leadership off this broker and fence it, so the metadata
        says what is true while it is down. Best effort and bounded by `timeout` seconds
        (controlled.shutdown.timeout.ms): when no controller answers in time it gives up with
        one WARNING line saying why (the controllers tried and the last error) and the shutdown
        goes on; the controller fences the broker later (broker.session.timeout.ms). True
        when the controller confirmed it."""
        if self.state != RUNNING:
            self._set(STOPPED)
            return False
        self._set(SHUTTING_DOWN)
        t0 = time.monotonic()
        deadline = t0 + timeout
        try:
            while True:
                seen = self.publisher.image.offset
                left = max(0.001, deadline - time.monotonic())
                # the call itself gives up at the deadline (with its reason); the margin only
                # covers a channel that ignores timeout_ms
                hb = self._heartbeat(left + 1.0, want_shutdown=True, timeout_ms=int(left * 1000))
                if hb.get("should_shut_down"):
                    return True
                if time.monotonic() > deadline:
                    self._gave_up(t0, "the controller had not moved leadership off it yet")
                    return False
                self._wait_past(seen)
        except Exception as exc:  # (a GregorTimeoutError names the controllers tried)
            self._gave_up(t0, failure_reason(exc))
            return False
        finally:
            self._set(STOPPED)

    def _gave_up(self, t0: float, why: str) -> None:
        _log.warning(
            "[broker=%d] controlled shutdown gave up after %.1fs (controlled.shutdown.timeout.ms):"
            " %s; stopping without it (the controller fences this broker after"
            " broker.session.timeout.ms)",
            self.node_id,
            time.monotonic() - t0,
            why,
        )


def failure_reason(exc: BaseException) -> str:
    """One line for a failed controller call: its message, never an empty string (a bare
    concurrent.futures.TimeoutError from `Future.result` has none)."""
    if str(exc):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "no answer from the controller quorum"
    return type(exc).__name__
