"""InitProducerId (22): a new producer id, epoch 0, for an idempotent producer (from the
broker's block of ids; broker/producer_ids.py). The response is sent from the future's callback
when a new block has to come from the controller. With a transactional_id the transaction
coordinator answers (broker/txn/coordinator.py: the id's producer id, its epoch bumped), once
`__transaction_state` has the record."""

from __future__ import annotations

import concurrent.futures
import logging

from broker.handlers.base import RequestContext, handler
from broker.security.access import init_producer_id, require
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType

log = logging.getLogger(__name__)


def _body(code: int, pid: int = -1, epoch: int = -1) -> Body:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": pid, "producer_epoch": epoch}


@handler(
    ApiKey.INIT_PRODUCER_ID,
    access="IDEMPOTENT_WRITE on CLUSTER or WRITE on any TOPIC; WRITE on TRANSACTIONAL_ID",
)
def handle(ctx: RequestContext, body: Body) -> Body | None:
    services = ctx.services
    if body["transactional_id"] is not None:
        require(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body["transactional_id"])

        def answer(code: int, pid: int, epoch: int, msg: str | None) -> None:
            ctx.respond(_body(code, pid, epoch))

        services.txn_coordinator.init_producer_id(
            body["transactional_id"], body["transaction_timeout_ms"], answer
        )
        return None
    init_producer_id(ctx)

    def done(f: concurrent.futures.Future[int]) -> None:
        exc = f.exception()
        if exc is None:
            ctx.respond(_body(0, int(f.result()), 0))
            return
        log.warning("no producer id: %s", exc)
        ctx.respond(_body(int(getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR))))

    services.producer_ids.next_id().add_done_callback(done)
    return None
