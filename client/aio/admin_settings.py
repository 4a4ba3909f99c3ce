"""What an Admin reads from the resolved admin config, built once (`AdminSettings.from_config`)
when the Admin is built, typed, instead of `config.<key>` in each call: the request timeout
and retry back-off its calls use, and what a connection of its own needs (DescribeQuorum asks a
controller directly, client/aio/admin_quorum.py). The cluster connections read theirs
(`ClusterSettings`, client/aio/link_settings.py). The keys are the admin keys of
docs/configuration.md; the config itself is `client.aio.config.resolve_config("admin", ...)`'s
namespace. Frozen: any thread may read them."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from types import SimpleNamespace


@dataclass(frozen=True)
class AdminSettings:
    bootstrap_servers: tuple[tuple[str, int], ...]
    client_id: str
    request_timeout_ms: int  # each call's default timeout
    retry_backoff_ms: int  # the first wait between a call's retries (doubling)
    socket_connection_setup_timeout_ms: int
    max_response_bytes: int
    ssl_context: ssl.SSLContext | None  # a controller's listener is PLAINTEXT or SSL

    @classmethod
    def from_config(cls, config: SimpleNamespace) -> AdminSettings:
        return cls(
            bootstrap_servers=tuple((str(h), int(p)) for h, p in config.bootstrap_servers),
            client_id=str(config.client_id),
            request_timeout_ms=int(config.request_timeout_ms),
            retry_backoff_ms=int(config.retry_backoff_ms),
            socket_connection_setup_timeout_ms=int(config.socket_connection_setup_timeout_ms),
            max_response_bytes=int(config.max_response_bytes),
            ssl_context=getattr(config, "ssl_context", None),
        )
