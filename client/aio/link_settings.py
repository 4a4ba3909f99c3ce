"""What a client's connections, metadata and producer sender read from the resolved client
config, built once (`ClusterSettings.from_config`, `SenderSettings.from_config`) when the
Producer, Consumer or Admin is built, typed, instead of `config.<key>` as they go. The keys are
the client keys of docs/configuration.md; the config itself is
`client.aio.config.resolve_config(role, ...)`'s namespace. Any thread may read them (frozen)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from types import SimpleNamespace

from client.security.scram import SaslCredentials


@dataclass(frozen=True)
class ClusterSettings:
    bootstrap_servers: tuple[tuple[str, int], ...]
    client_id: str
    metadata_max_age_ms: int
    retry_backoff_ms: int
    request_timeout_ms: int
    max_in_flight_requests_per_connection: int
    socket_connection_setup_timeout_ms: int
    max_response_bytes: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    ssl_context: ssl.SSLContext | None  # security.protocol SSL / SASL_SSL
    sasl: SaslCredentials | None  # security.protocol SASL_*

    @classmethod
    def from_config(cls, config: SimpleNamespace) -> ClusterSettings:
        return cls(
            bootstrap_servers=tuple((str(h), int(p)) for h, p in config.bootstrap_servers),
            client_id=str(config.client_id),
            metadata_max_age_ms=int(config.metadata_max_age_ms),
            retry_backoff_ms=int(config.retry_backoff_ms),
            request_timeout_ms=int(config.request_timeout_ms),
            max_in_flight_requests_per_connection=int(config.max_in_flight_requests_per_connection),
            socket_connection_setup_timeout_ms=int(config.socket_connection_setup_timeout_ms),
            max_response_bytes=int(config.max_response_bytes),
            reconnect_backoff_ms=int(config.reconnect_backoff_ms),
            reconnect_backoff_max_ms=int(config.reconnect_backoff_max_ms),
            ssl_context=getattr(config, "ssl_context", None),
            sasl=getattr(config, "sasl", None),
        )


@dataclass(frozen=True)
class SenderSettings:
    acks: int  # -1 (all), 0 or 1
    compression_type: str
    max_request_size: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    retries: int
    retry_backoff_ms: int

    @classmethod
    def from_config(cls, config: SimpleNamespace) -> SenderSettings:
        return cls(
            acks=int(config.acks),
            compression_type=str(config.compression_type),
            max_request_size=int(config.max_request_size),
            request_timeout_ms=int(config.request_timeout_ms),
            delivery_timeout_ms=int(config.delivery_timeout_ms),
            retries=int(config.retries),
            retry_backoff_ms=int(config.retry_backoff_ms),
        )
