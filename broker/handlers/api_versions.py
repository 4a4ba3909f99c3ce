"""ApiVersions (18): the API keys and version ranges this broker serves.

Answered for every version: an unsupported version gets UNSUPPORTED_VERSION *and* the table,
so a client can pick a version it shares with us (as Kafka does). The table lists every API
that has both a schema and a handler here; internal controller APIs (spec.internal) are listed
only by a node that runs a controller (`services.controller` is set).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.handlers.base import HANDLERS, RequestContext, handler
from client.errors import ErrorCode
from client.protocol.api_keys import ApiKey
from client.protocol.body import Body
from client.protocol.schema import API_SPECS

if TYPE_CHECKING:
    from broker.services import Services


def supported_apis(services: Services) -> list[Body]:
    show_internal = getattr(services, "controller", None) is not None
    out = []
    for key in sorted(HANDLERS):
        spec = API_SPECS.get(key)
        if spec is None or (spec.internal and not show_internal):
            continue
        out.append(
            {"api_key": key, "min_version": spec.min_version, "max_version": spec.max_version}
        )
    return out


def versions_body(services: Services, error_code: int = ErrorCode.NONE) -> Body:
    return {
        "error_code": int(error_code),
        "api_keys": supported_apis(services),
        "throttle_time_ms": 0,
    }


@handler(ApiKey.API_VERSIONS, access="none")
def handle(ctx: RequestContext, body: Body) -> Body:
    return versions_body(ctx.services)
