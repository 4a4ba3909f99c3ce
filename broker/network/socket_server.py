"""SocketServer: one acceptor per listener plus `num.network.threads` network threads shared by
all listeners (Kafka's SocketServer).

No business rules here: bytes in, `Request`s onto the request channel, response frames out.

Threads: all methods from the server's control thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.network.acceptor import Acceptor, ConnectionQuota
from broker.network.memory_pool import MemoryPool
from broker.network.processor import Processor
from broker.request_channel import RequestChannel
from client.security.tls import ReloadableContext

log = logging.getLogger(__name__)


# a listener's payload decoder: (payload, connection) -> Request (Connection.decode)
Decoder = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class NetworkSettings:
    """What the network layer reads from the broker config."""

    host: str = "127.0.0.1"
    port: int = 9092
    num_network_threads: int = 2
    socket_request_max_bytes: int = 100 * 1024 * 1024
    connections_max_idle_ms: int = 600_000
    max_connections: int = 2**31 - 1
    queued_max_request_bytes: int = 100 * 1024 * 1024
    socket_request_receive_timeout_ms: int = 30_000
    # SASL listeners: before a connection authenticated (docs/security.md)
    sasl_server_max_receive_size: int = 512 * 1024
    sasl_server_authentication_timeout_ms: int = 10_000
    connection_failed_authentication_delay_ms: int = 100
    # Further listeners beyond (host, port), which is named `name`: (name, host, port) each.
    name: str = "PLAINTEXT"
    extra_listeners: tuple[tuple[str, str, int], ...] = field(default=())
    # Listener name -> the function that turns a payload into a Request on a connection of
    # that listener (Connection.decode); listeners not named speak Gregor's native protocol.
    decoders: tuple[tuple[str, Decoder], ...] = field(default=())

    @property
    def listeners(self) -> list[tuple[str, str, int]]:
        return [(self.name, self.host, self.port), *self.extra_listeners]


class SocketServer:
    def __init__(
        self,
        settings: NetworkSettings,
        channel: RequestChannel,
        tls: Mapping[str, ReloadableContext] | None = None,
        sasl: frozenset[str] = frozenset(),
    ) -> None:
        """`tls`: listener name -> its server TLS context, for the TLS listeners (SSL,
        SASL_SSL); the others are plain TCP. `sasl`: the names of the SASL listeners, whose
        connections must authenticate before anything but the handshake APIs."""
        tls = tls or {}
        if settings.num_network_threads < 1:
            raise ValueError("num.network.threads must be >= 1")
        self.settings = settings
        self.channel = channel
        self.quota = ConnectionQuota(settings.max_connections)
        self.memory_pool = MemoryPool(settings.queued_max_request_bytes)
        self.processors = [
            Processor(i, channel, self.memory_pool, settings, self.quota.release)
            for i in range(settings.num_network_threads)
        ]
        self.acceptors = [
            Acceptor(
                host,
                port,
                self.processors,
                self.quota,
                listener=name,
                tls=tls.get(name),
                sasl=name in sasl,
            )
            for name, host, port in settings.listeners
        ]
        self.acceptor = self.acceptors[0]  # the first listener's
        self.address: tuple[str, int] | None = None

    def bind(self) -> dict[str, tuple[str, int]]:
        """Bind every listener; returns {name: bound (host, port)} (port 0 → the real port)."""
        bound = {a.listener: a.bind() for a in self.acceptors}
        self.address = bound[self.acceptor.listener]
        return bound

    def start_accepting(self) -> None:
        """Start the network threads, then the acceptors (after `bind`)."""
        for p in self.processors:
            p.start()
        for a in self.acceptors:
            a.start()

    def start(self) -> tuple[str, int]:
        """Bind, start the network threads and the acceptors; returns the first bound address."""
        self.bind()
        self.start_accepting()
        assert self.address is not None
        return self.address

    def stop_accepting(self) -> None:
        for a in self.acceptors:
            a.stop()

    def stop_processing(self) -> None:
        """No new requests are taken from any connection (graceful shutdown, step 1)."""
        for p in self.processors:
            p.stop_processing()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop accepting, close every connection after flushing written responses, join threads."""
        self.stop_accepting()
        for p in self.processors:
            p.shutdown(timeout)

    @property
    def connection_count(self) -> int:
        return self.quota.count
