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
from typing import Any

from broker.handlers.base import RequestContext, handler
from broker.security.sasl import SaslExchange
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.security.scram import AuthenticationFailed

log = logging.getLogger(__name__)


def _credentials_of(services: Any) -> Callable[[str], Any]:
    """user -> {mechanism number: UserScramCredential} from the latest image, read at each
    step (a credential changed mid-exchange is seen by the next step)."""

    def of(user: str) -> Any:
        return services.metadata.scram_credentials.get(user, {})

    return of


@handler(ApiKey.SASL_HANDSHAKE)
def handshake(ctx: RequestContext, body: dict) -> dict | None:
    conn: Any = ctx.request.connection
    settings = ctx.services.sasl
    offered = settings.offered(bool(getattr(conn, "tls", False)))
    if not getattr(conn, "sasl", False) or conn.authenticated or conn.sasl_state is not None:
        return {"error_code": int(ErrorCode.ILLEGAL_SASL_STATE), "mechanisms": offered}
    mechanism = body["mechanism"]
    if mechanism not in offered:
        return {"error_code": int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "mechanisms": offered}
    conn.sasl_state = SaslExchange(mechanism, _credentials_of(ctx.services))
    return {"error_code": 0, "mechanisms": offered}


@handler(ApiKey.SASL_AUTHENTICATE)
def authenticate(ctx: RequestContext, body: dict) -> dict | None:
    conn: Any = ctx.request.connection
    services: Any = ctx.services
    exchange = getattr(conn, "sasl_state", None)
    delay_s = services.sasl.failed_delay_ms / 1000.0
    if not isinstance(exchange, SaslExchange) or conn.authenticated:
        ctx.respond_then_close(
            {
                "error_code": int(ErrorCode.ILLEGAL_SASL_STATE),
                "error_message": "SaslAuthenticate without a SaslHandshake first",
            },
            "SaslAuthenticate out of order",
            delay_s,
        )
        return None
    try:
        reply, user = exchange.step(body["auth_bytes"])
    except AuthenticationFailed as exc:
        services.auth_log.failed_login(exchange.user, exchange.mechanism, ctx.client_host, str(exc))
        ctx.respond_then_close(
            {
                "error_code": int(ErrorCode.SASL_AUTHENTICATION_FAILED),
                "error_message": "Authentication failed: invalid credentials with SASL"
                f" mechanism {exchange.mechanism}",
            },
            "failed SASL authentication",
            delay_s,
        )
        return None
    if user is not None:
        conn.sasl_state = None
        conn.mark_authenticated(f"User:{user}")
        log.debug("connection %s authenticated as User:%s", ctx.connection_id, user)
    return {"error_code": 0, "auth_bytes": reply, "session_lifetime_ms": 0}
