"""QuotaManager: records each response against its client's quotas and says how long the
connection is throttled (Kafka's ClientQuotaManager and RequestQuotaManager, with KIP-219's
order: the response goes out at once carrying throttle_time_ms, then the broker reads nothing
more from that connection for that long; nothing is refused).

What counts, per (user, client id) as resolved by client/quotas.py from the metadata image:
- producer_byte_rate: the size of each Produce request;
- consumer_byte_rate: the size of each Fetch response to a consumer (followers are exempt);
- request_percentage: the I/O thread time of each request and the network thread time of
  writing its answer, as a percentage of one thread (so 200 is two threads' worth); the
  network time is recorded after the answer is written and weighs on later requests.
Inter-broker and controller APIs, followers' requests (a `replica_id`), ApiVersions and the SASL
handshake are exempt (Kafka exempts cluster actions; a client must always be able to connect and
authenticate).

Clients sharing one quota share one rate (client/quotas.sensor_tags). A rate nobody recorded to
for an hour is dropped. With no quota in the image nothing is recorded at all.

Threads: `throttle` on whichever thread answers a request; `network_time` on a network thread;
one lock around the rates.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from broker.quota.rate import SampledRate, throttle_ms
from client.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Entity,
    quota_for,
)

PRODUCE, FETCH = 0, 1
# ApiVersions, SaslHandshake, SaslAuthenticate, and the inter-broker/controller APIs
# AlterPartition, BrokerRegistration, BrokerHeartbeat, AllocateProducerIds; 1000+ internal
EXEMPT_APIS = frozenset((17, 18, 36, 56, 62, 63, 67))
SENSOR_EXPIRY_MS = 3_600_000
SWEEP_EVERY_MS = 60_000
MAX_THROTTLE_MS = 2**31 - 1
NANOS_TO_PERCENT_SECONDS = 100.0 / 1e9  # 1 s of one thread = 100 (%) for one second


def user_of(principal: str) -> str:
    """The quota user of a principal: its name (`User:alice` → alice; ANONYMOUS when none)."""
    kind, sep, name = principal.partition(":")
    return name if sep and kind == "User" else principal


class QuotaManager:
    def __init__(
        self,
        quotas: Callable[[], Mapping[Entity, Mapping[str, float]]],
        num_samples: int = 11,
        window_seconds: int = 1,
        clock: Callable[[], float] = time.monotonic,
        on_throttle: Callable[[str, int], None] | None = None,
    ) -> None:
        """`quotas()`: the image's client quotas (read per request; a new object means they
        changed). `on_throttle(quota key, ms)`: each throttle decided (the broker metric)."""
        self._quotas = quotas
        self.num_samples = num_samples
        self.window_ms = window_seconds * 1000
        # Kafka does not bound a client quota's throttle time; the wire's int32 does
        self.max_throttle_ms = MAX_THROTTLE_MS
        self._clock = clock
        self.on_throttle = on_throttle
        self._lock = threading.Lock()
        self._rates: dict[tuple[str, Entity], SampledRate] = {}
        self._resolved: dict[tuple[str, str, str], tuple[float, Entity] | None] = {}
        self._senders: dict[tuple[str, str], Callable[[int], None]] = {}
        self._resolved_from: object = None
        self._next_sweep_ms = 0.0

    # -- pure-ish core (time as input) ---------------------------------------------------------
    def record(
        self, key: str, user: str, client_id: str, value: float, now_ms: float, check: bool = True
    ) -> int:
        """Record `value` against quota `key` of (user, client id); the throttle time in ms
        (0: within the quota, or no quota of that key applies). `check` False: record only."""
        quotas = self._quotas()
        if not quotas:
            return 0
        with self._lock:
            found = self._resolve(quotas, key, user, client_id)
            if found is None:
                return 0
            bound, tags = found
            rate = self._rates.get((key, tags))
            if rate is None:
                rate = self._rates[(key, tags)] = SampledRate(
                    self.num_samples, self.window_ms, now_ms
                )
            rate.record(value, now_ms)
            if now_ms >= self._next_sweep_ms:
                self._sweep(now_ms)
            return throttle_ms(rate, bound, now_ms, self.max_throttle_ms) if check else 0

    def _resolve(
        self, quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
    ) -> tuple[float, Entity] | None:
        if quotas is not self._resolved_from:
            self._resolved.clear()
            self._senders.clear()
            self._resolved_from = quotas
        k = (key, user, client_id)
        if k not in self._resolved:
            if len(self._resolved) > 100_000:  # bounded: many client ids
                self._resolved.clear()
                self._senders.clear()
            self._resolved[k] = quota_for(quotas, key, user, client_id)
        return self._resolved[k]

    def _sweep(self, now_ms: float) -> None:
        self._next_sweep_ms = now_ms + SWEEP_EVERY_MS
        for k, rate in list(self._rates.items()):
            if now_ms - rate.last_record_ms >= SENSOR_EXPIRY_MS:
                del self._rates[k]

    def rate_count(self) -> int:
        with self._lock:
            return len(self._rates)

    # -- the request path ----------------------------------------------------------------------
    def throttle(self, request: Any, response_size: int) -> int:
        """Record `request` (answered with `response_size` bytes) against its client's quotas;
        the throttle time in ms, the largest of its byte and request quotas' (0: none). Sets
        `request.quota_sent` when the request quota applies, for the network time."""
        api_key = request.api_key
        if api_key in EXEMPT_APIS or api_key >= 1000 or not self._quotas():
            return 0
        body = request.body
        if isinstance(body, dict) and body.get("replica_id", -1) >= 0:
            return 0  # a follower's Fetch, ListOffsets, OffsetForLeaderEpoch: not a client
        now_ns = time.monotonic_ns()
        now_ms = now_ns / 1e6
        user = user_of(getattr(request.connection, "principal", "User:ANONYMOUS"))
        client_id = request.client_id or ""
        wait = 0
        key = None
        if api_key == PRODUCE:
            key = PRODUCER_BYTE_RATE
            wait = self.record(key, user, client_id, request.size, now_ms)
        elif api_key == FETCH:
            key = CONSUMER_BYTE_RATE
            wait = self.record(key, user, client_id, response_size, now_ms)
        started = request.dequeued_ns
        if started:
            io_ns = (request.local_done_ns or now_ns) - started
            waited = self.record(
                REQUEST_PERCENTAGE, user, client_id, io_ns * NANOS_TO_PERCENT_SECONDS, now_ms
            )
            if self._resolved.get((REQUEST_PERCENTAGE, user, client_id)) is not None:
                request.quota_sent = self._network_time(user, client_id)
            if waited > wait:
                wait, key = waited, REQUEST_PERCENTAGE
        if wait and key is not None and self.on_throttle is not None:
            self.on_throttle(key, wait)
        return wait

    def _network_time(self, user: str, client_id: str) -> Callable[[int], None]:
        sent = self._senders.get((user, client_id))
        if sent is None:
            sent = self._senders[(user, client_id)] = self._new_sender(user, client_id)
        return sent

    def _new_sender(self, user: str, client_id: str) -> Callable[[int], None]:
        def sent(network_ns: int) -> None:
            self.record(
                REQUEST_PERCENTAGE,
                user,
                client_id,
                network_ns * NANOS_TO_PERCENT_SECONDS,
                time.monotonic_ns() / 1e6,
                check=False,
            )

        return sent
