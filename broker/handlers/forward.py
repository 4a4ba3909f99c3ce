"""Answering admin requests that the broker forwards to the controller (CreateTopics,
DeleteTopics, CreatePartitions): the response is sent from the controller future's callback
(whichever thread completes it), so no I/O thread waits on the controller.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from broker.handlers.base import RequestContext
from client.errors import ErrorCode
from client.protocol.body import Body

log = logging.getLogger(__name__)

R = TypeVar("R")  # the controller's typed result per forwarded entry


def respond_when_committed(
    ctx: RequestContext,
    fut: concurrent.futures.Future[list[R]],
    local: Sequence[Body | None],
    forwarded: Sequence[str],
    error_entry: Callable[[str, int, str], Body],
    wrap: Callable[[list[Body | R]], Body],
    what: str,
) -> None:
    """Respond once `fut` (the controller's answer for the topics named in `forwarded`, a list of
    per-topic entries in that order) completes. `local` holds the request's entries in order,
    None where the controller answers. If the controller call fails, each forwarded topic gets
    `error_entry(name, code, message)`. `wrap` builds the response body from the entries."""

    def done(f: concurrent.futures.Future[list[R]]) -> None:
        answers: Iterator[Body | R]
        exc = f.exception()
        if exc is not None:
            code = int(getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR))
            log.warning("%s failed in the controller: %s", what, exc)
            answers = iter([error_entry(name, code, str(exc)) for name in forwarded])
        else:
            answers = iter(f.result())
        ctx.respond(wrap([r if r is not None else next(answers) for r in local]))

    fut.add_done_callback(done)
