"""SASL on the Kafka listener: SaslHandshake (17) and SaslAuthenticate (36) in Kafka's framing,
answered by the same code as on the native listener (broker/handlers/sasl.py, mechanisms in
broker/security/sasl.py), so a KAFKA listener mapped to SASL_SSL or SASL_PLAINTEXT checks the
same SCRAM credentials with the same refusals (docs/security.md).

    API               versions  notes
    SaslHandshake     0-1       v0 advertised, refused (the connection is closed): after
                                it a client would send raw SASL tokens without Kafka's
                                framing; librdkafka (2.0) sees no SASL support unless v0 is
                                listed, and then sends v1 and SaslAuthenticate
    SaslAuthenticate  0-2       a failed attempt: SASL_AUTHENTICATION_FAILED after
                                connection.failed.authentication.delay.ms, then closed

Before SaslAuthenticate succeeds the network layer lets only ApiVersions and these two
through (broker/network/connection.py PRE_AUTH_APIS: the api keys are Kafka's in both
protocols). On a listener without SASL, SaslHandshake answers ILLEGAL_SASL_STATE as Kafka does.

Threads: I/O threads (the connection is muted while its request runs).
"""

from __future__ import annotations

from broker.handlers.sasl import authenticate_answer, handshake_answer
from broker.kafka.apis import api
from broker.kafka.kio_requests import SaslAuthenticateRequest, SaslHandshakeRequest
from broker.kafka.request import KafkaContext
from client.protocol import ApiKey


@api(
    ApiKey.SASL_HANDSHAKE,
    0,
    1,
    refused_below=1,
    refused_why="v0's unframed SASL tokens are not served; v1 with SaslAuthenticate is",
)
def sasl_handshake(ctx: KafkaContext, body: SaslHandshakeRequest) -> None:
    ctx.respond(handshake_answer(ctx.request.connection, ctx.services, str(body.mechanism)))


@api(ApiKey.SASL_AUTHENTICATE, 0, 2)
def sasl_authenticate(ctx: KafkaContext, body: SaslAuthenticateRequest) -> None:
    request = ctx.request
    answer, close = authenticate_answer(
        request.connection,
        ctx.services,
        request.client_host,
        bytes(body.auth_bytes),
        request.connection_id,
    )
    kafka = {
        "error_code": answer["error_code"],
        "error_message": answer.get("error_message"),
        "auth_bytes": answer.get("auth_bytes", b""),
        "session_lifetime": 0,  # no re-authentication (KIP-368) asked of the client
    }
    if close is None:
        ctx.respond(kafka)
    else:
        ctx.respond_then_close(kafka, close, ctx.services.sasl.failed_delay_ms / 1000.0)
