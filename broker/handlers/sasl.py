"""SaslHandshake (17) and SaslAuthenticate (36): authentication on SASL listeners
(broker/security/sasl.py does the mechanisms; docs/security.md).

The connection (broker/network/connection.py) serves only ApiVersions and these two until
SaslAuthenticate succeeds, with frames of at most sasl.server.max.receive.size, and closes it
when sasl.server.authentication.timeout.ms passes first. A failed attempt, whatever the cause
(unknown user, wrong password, tampered proof, malformed message), gets the same
SASL_AUTHENTICATION_FAILED answer after connection.failed.authentication.delay.ms, then the
connection is closed; the reason goes to the rate-limited authorizer log with the address.
PLAIN is offered on a listener without TLS only with sasl.plain.allow.without.tls.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.handlers.base import RequestContext, handler
from broker.security.sasl import SaslExchange
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.scram import AuthenticationFailed

if TYPE_CHECKING:
    from broker.services import Services

log = logging.getLogger(__name__)


def _credentials_of(services: Services) -> Callable[[str], Any]:
    """user -> {mechanism number: UserScramCredential} from the latest image, read at each
    step (a credential changed mid-exchange is seen by the next step)."""

    def of(user: str) -> Any:
        return services.metadata.scram_credentials.get(user, {})

    return of


def handshake_answer(conn: Any, services: Services, mechanism: str) -> Body:
    """SaslHandshake's answer (error_code, mechanisms) for `conn`; on success the exchange
    starts (conn.sasl_state). Shared with the Kafka listener (broker/kafka/apis_sasl.py)."""
    offered = services.sasl.offered(bool(getattr(conn, "tls", False)))
    if not getattr(conn, "sasl", False) or conn.authenticated or conn.sasl_state is not None:
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": offered}
    if mechanism not in offered:
        return {"error_code": int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "mechanisms": offered}
    conn.sasl_state = SaslExchange(mechanism, _credentials_of(services))
    return {"error_code": 0, "mechanisms": offered}


def authenticate_answer(
    conn: Any, services: Services, client_host: str, auth_bytes: bytes, connection_id: str
) -> tuple[Body, str | None]:
    """One SaslAuthenticate step for `conn`: (answer, None) to send, or (answer, reason) to
    send after connection.failed.authentication.delay.ms and then close (a refusal, the same
    whatever the cause). Shared with the Kafka listener (broker/kafka/apis_sasl.py)."""
    exchange = getattr(conn, "sasl_state", None)
    if not isinstance(exchange, SaslExchange) or conn.authenticated:
        return {
            "error_code": int(ErrorCode.ILLEGAL_SASL_STATE),
            "error_message": "SaslAuthenticate without a SaslHandshake first",
        }, "SaslAuthenticate out of order"
    try:
        reply, user = exchange.step(auth_bytes)
    except AuthenticationFailed as exc:
        services.auth_log.failed_login(exchange.user, exchange.mechanism, client_host, str(exc))
        return {
            "error_code": int(ErrorCode.SASL_AUTHENTICATION_FAILED),
            "error_message": "Authentication failed: invalid credentials with SASL"
            f" mechanism {exchange.mechanism}",
        }, "failed SASL authentication"
    if user is not None:
        conn.sasl_state = None
        conn.mark_authenticated(f"User:{user}")
        log.debug("connection %s authenticated as User:%s", connection_id, user)
    return {"error_code": 0, "auth_bytes": reply, "session_lifetime_ms": 0}, None


@handler(ApiKey.SASL_HANDSHAKE, access="none")
def handshake(ctx: RequestContext, body: Body) -> Body | None:
    return handshake_answer(ctx.request.connection, ctx.services, body["mechanism"])


@handler(ApiKey.SASL_AUTHENTICATE, access="none")
def authenticate(ctx: RequestContext, body: Body) -> Body | None:
    answer, close = authenticate_answer(
        ctx.request.connection,
        ctx.services,
        ctx.client_host,
        body["auth_bytes"],
        ctx.connection_id,
    )
    if close is None:
        return answer
    ctx.respond_then_close(answer, close, ctx.services.sasl.failed_delay_ms / 1000.0)
    return None
