"""Request handlers: one module per API (or family), registered in one table, and `dispatch`,
the single place where requests meet handlers and errors are translated.

dispatch(request, services), on an I/O thread:
  1. unknown api key, no handler, or version outside the schema's range
       → {"error_code": 35 UNSUPPORTED_VERSION, "error_message": ...}, same correlation id
         (ApiVersions answers an unknown version with error 35 plus its table);
  2. schema check of the body fails → logged, connection closed (no response);
  3. handler(ctx, body) → dict: sent; None: the handler answers later via ctx;
  4. BrokerResponseError → {"error_code": its code, "error_message": ...};
     any other exception → UNKNOWN_SERVER_ERROR and a logged traceback; the broker keeps serving.

Importing this package imports every handler module (one line each, below).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.handlers.base import HANDLERS, RequestContext, handler
from broker.network.request import Request
from client.errors import BrokerResponseError, ErrorCode, InvalidRequestError
from client.protocol import API_SPECS, ApiKey  # importing client.protocol registers schemas

if TYPE_CHECKING:
    from broker.services import Services

log = logging.getLogger(__name__)

__all__ = ["HANDLERS", "RequestContext", "dispatch", "handler"]


def dispatch(request: Request, services: Services) -> None:
    """Run the handler for `request` and make sure it is answered (see module docstring)."""
    ctx = RequestContext(request, services)
    key, version = request.api_key, request.api_version
    spec = API_SPECS.get(key)
    fn = HANDLERS.get(key)
    if spec is None or fn is None or not (spec.min_version <= version <= spec.max_version):
        if key == ApiKey.API_VERSIONS and fn is not None:
            ctx.respond_raw(api_versions.versions_body(services, ErrorCode.UNSUPPORTED_VERSION))
            return
        what = spec.name if spec is not None else f"api key {key}"
        log.info(
            "unsupported request %s v%d from %s (client %r)",
            what,
            version,
            request.connection_id,
            request.client_id,
        )
        ctx.respond_error(ErrorCode.UNSUPPORTED_VERSION, f"{what} v{version} is not supported")
        return
    try:
        body = spec.check_request(request.body, version)
    except InvalidRequestError as exc:
        ctx.close_connection(f"malformed {spec.name} v{version} request: {exc.message}")
        return
    try:
        result = fn(ctx, body)
        if result is not None:
            ctx.respond(result)
    except BrokerResponseError as exc:
        if ctx.responded:
            log.error("%s handler raised %s after answering %r", spec.name, exc, request)
            return
        ctx.respond_error(exc.code, exc.message)
        return
    except Exception:
        log.exception("%s v%d handler failed on %r", spec.name, version, request)
        if not ctx.responded:
            ctx.respond_error(ErrorCode.UNKNOWN_SERVER_ERROR, f"internal error in {spec.name}")


# -- handler modules: importing one registers its handlers. One line per module. -----------------
import broker.handlers.acls  # noqa: E402
import broker.handlers.alter_configs  # noqa: E402
import broker.handlers.client_quotas  # noqa: E402
import broker.handlers.create_partitions  # noqa: E402
import broker.handlers.create_topics  # noqa: E402
import broker.handlers.delete_records  # noqa: E402
import broker.handlers.delete_topics  # noqa: E402
import broker.handlers.describe_cluster  # noqa: E402
import broker.handlers.describe_configs  # noqa: E402
import broker.handlers.describe_log_dirs  # noqa: E402
import broker.handlers.describe_producers  # noqa: E402
import broker.handlers.describe_quorum  # noqa: E402
import broker.handlers.elect_leaders  # noqa: E402
import broker.handlers.fetch  # noqa: E402
import broker.handlers.groups  # noqa: E402
import broker.handlers.init_producer_id  # noqa: E402
import broker.handlers.list_offsets  # noqa: E402
import broker.handlers.metadata  # noqa: E402
import broker.handlers.offset_for_leader_epoch  # noqa: E402
import broker.handlers.produce  # noqa: E402
import broker.handlers.reassignments  # noqa: E402
import broker.handlers.sasl  # noqa: E402
import broker.handlers.scram_credentials  # noqa: E402
import broker.handlers.txn  # noqa: E402
import broker.handlers.write_txn_markers  # noqa: E402, F401
from broker.handlers import api_versions  # noqa: E402
