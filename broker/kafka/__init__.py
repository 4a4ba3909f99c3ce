"""The Kafka listener: Apache Kafka's wire protocol on top of Gregor's logs, groups and
metadata (docs/kafka-compat.md). An adapter: it decodes Kafka's frames with kio
(broker/kafka/codec.py), translates each API to the native handler that serves it
(broker/kafka/apis.py), converts record batches (broker/kafka/records.py), and encodes
Kafka's answers. Kafka's types stop here.

    dispatch(request, services, state)  an I/O thread runs one Kafka request
    by_protocol(native_dispatch)  the I/O pool's dispatch when some listener speaks Kafka
    decode_request                Connection.decode for KAFKA listeners (network thread)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import broker.kafka.apis_acls
import broker.kafka.apis_admin
import broker.kafka.apis_admin2
import broker.kafka.apis_classic
import broker.kafka.apis_consumer_group
import broker.kafka.apis_group_admin
import broker.kafka.apis_groups
import broker.kafka.apis_quotas
import broker.kafka.apis_sasl  # (registers SaslHandshake and SaslAuthenticate)
import broker.kafka.apis_txn
import broker.kafka.apis_txn_markers  # noqa: F401  (registers WriteTxnMarkers)
from broker.kafka.apis import APIS, api_versions_body
from broker.kafka.codec import API_VERSIONS_KEY, MalformedKafkaRequest, build, decode_body
from broker.kafka.codec import encode_response as _encode
from broker.kafka.request import KafkaContext, KafkaRequest, KafkaState, decode_request
from broker.network.request import Request

if TYPE_CHECKING:
    from broker.services import Services

log = logging.getLogger(__name__)

__all__ = ["by_protocol", "decode_request", "dispatch"]

UNSUPPORTED_VERSION = 35


def dispatch(request: KafkaRequest, services: Services, state: KafkaState) -> None:
    """Decode, translate and answer one Kafka request (see the module docstring)."""
    ctx = KafkaContext(request, services, state)
    key, version = request.api_key, request.api_version
    api = APIS.get(key)
    if api is None or not api.min_version <= version <= api.max_version:
        if key == API_VERSIONS_KEY:
            # Kafka's quirk: the answer is v0 (which every client can read), error 35 and the
            # table, so the client retries with a version both sides know.
            from kio.schema.api_versions.v0.response import ApiVersionsResponse

            answer = build(ApiVersionsResponse, api_versions_body(UNSUPPORTED_VERSION))
            ctx.respond_frame(_encode(key, 0, request.correlation_id, answer))
            return
        what = f"api key {key}" if api is None else f"api key {key} v{version}"
        ctx.close(f"Kafka request {what} is not supported (client {request.client_id!r})")
        return
    if version < api.refused_below:
        ctx.close(
            f"Kafka request api key {key} v{version} is refused: v{api.refused_below}+ only"
            f" ({api.refused_why})"
        )
        return
    try:
        body = decode_body(key, version, request.payload)
    except MalformedKafkaRequest as exc:
        ctx.close(f"malformed Kafka request api key {key} v{version}: {exc}")
        return
    try:
        api.handle(ctx, body)
    except Exception:
        log.exception("Kafka api key %d v%d failed on %r", key, version, request)
        if not ctx.responded:
            ctx.close("internal error")


class ByProtocol:
    """The I/O pool's dispatch: `native(request, services=...)` for Gregor's requests,
    `dispatch` for Kafka's (with the listener's state, one per server). `close` at the
    server's shutdown. Any thread."""

    def __init__(self, native: Callable[..., None]) -> None:
        self._native = native
        self._state = KafkaState()

    def __call__(self, request: Request, services: Services) -> None:
        if isinstance(request, KafkaRequest):
            dispatch(request, services, self._state)
        else:
            self._native(request, services=services)

    def close(self) -> None:
        self._state.close()


def by_protocol(native: Callable[..., None]) -> ByProtocol:
    """The dispatch for a server with Kafka listeners (see ByProtocol)."""
    return ByProtocol(native)
