"""Closing a client in an awkward state leaves no task behind (issue 22, item 2).

The issue's user saw, on exit after a record expired: `ERROR asyncio: Task was destroyed but
it is pending! ... Sender._init_producer_id()`. An expired batch resets the idempotent
producer's id, the sender asked for a new one, and close() stopped the sender's loop without
cancelling that request: the sync facade then stopped its event loop with the task pending.

Here every client is closed while something is being retried: InitProducerId against a broker
that refuses it, a produce answered NOT_ENOUGH_REPLICAS, records expired, sends pending, group
heartbeats. With client.aio no task may remain on the loop after close(); with the sync
facade (in a fresh interpreter, what users see) nothing may be printed about destroyed tasks
or unretrieved exceptions, also for clients dropped without close() or left open at exit.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import async_wait_until

from broker.handlers import dispatch
from broker.handlers.base import RequestContext
from client import aio
from client.errors import (
    ClientClosedError,
    ErrorCode,
    GregorTimeoutError,
    NotEnoughReplicasError,
)
from client.protocol import ApiKey

REFUSED = "refused-init"  # the client.id whose InitProducerId the broker refuses


@pytest.fixture
def broker(broker_factory):
    refused: list[int] = []

    def refusing(request, services) -> None:
        if request.api_key == ApiKey.INIT_PRODUCER_ID and request.client_id == REFUSED:
            refused.append(1)
            RequestContext(request, services).respond_error(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, "refused by the test"
            )
            return
        dispatch(request, services)

    b = broker_factory(dispatch=refusing)
    b.refused = refused
    from client import Admin

    with Admin(bootstrap_servers=b.bootstrap) as admin:
        admin.create_topic("nes", 1, config={"min.insync.replicas": "2"})  # NOT_ENOUGH_REPLICAS
        admin.create_topic("ok", 2)
    return b


def _leftovers() -> set[asyncio.Task]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}


async def test_aio_clients_leave_no_task_after_close(broker) -> None:
    b = broker.bootstrap
    # closing while InitProducerId is retried (a record waits for the producer id)
    p = aio.Producer(bootstrap_servers=b, client_id=REFUSED, retry_backoff_ms=20)
    fut = await p.send("ok", b"a")
    await async_wait_until(lambda: len(broker.refused) >= 3, 10, "InitProducerId retries")
    await p.close(timeout=0.2)
    with pytest.raises(ClientClosedError):
        await fut
    assert _leftovers() == set()

    # closing in the middle of NOT_ENOUGH_REPLICAS retries
    p = aio.Producer(bootstrap_servers=b, retry_backoff_ms=20, request_timeout_ms=1000)
    fut = await p.send("nes", b"b")
    assert p._sender is not None
    await async_wait_until(lambda: p._sender.retry_log.failing, 10, "a failing partition")  # type: ignore[union-attr]
    await p.close(timeout=0.2)
    with pytest.raises(ClientClosedError):
        await fut
    assert _leftovers() == set()

    # the path: the record expires (the producer id is reset and asked again), close
    p = aio.Producer(
        bootstrap_servers=b, retry_backoff_ms=20, request_timeout_ms=1000, delivery_timeout_ms=2000
    )
    # Past delivery.timeout.ms the record fails: with the timeout when it expires between
    # attempts, or with the broker's error when an attempt's answer comes after the deadline
    # (Kafka's Sender does the same; which one is a matter of timing)
    with pytest.raises((GregorTimeoutError, NotEnoughReplicasError)) as failed:
        await (await p.send("nes", b"c"))
    if isinstance(failed.value, GregorTimeoutError):
        assert "expired after delivery.timeout.ms" in str(failed.value)
    await p.close()
    assert _leftovers() == set()

    # consumers, one in a group (heartbeat task), and an admin
    c = aio.Consumer(bootstrap_servers=b, auto_offset_reset="earliest")
    await c.start()
    c.subscribe(["ok"])
    await c.poll(200)
    await c.close()
    g = aio.Consumer(bootstrap_servers=b, group_id="g", auto_offset_reset="earliest")
    await g.start()
    g.subscribe(["ok"])
    await g.poll(200)
    await async_wait_until(lambda: g._group is not None and g._group._task, 10, "a heartbeat")
    await g.close()
    a = aio.Admin(bootstrap_servers=b)
    await a.list_topics()
    await a.close()
    assert _leftovers() == set()


_CHILD = """
import gc, sys
from client import Admin, Consumer, Producer
from client.errors import ClientClosedError, GregorError

b = sys.argv[1]
sys.path.insert(0, sys.argv[2])  # tests/, for helpers
from helpers import wait_until


def wait(cond, what):
    wait_until(cond, 30, what)


def retrying(p, key):
    return lambda: any(k == key or getattr(k, "topic", None) == key
                       for k in p._core._sender.retry_log.failing)


# closing while InitProducerId is retried
p = Producer(bootstrap_servers=b, client_id=REFUSED_ID, retry_backoff_ms=20)
f = p.send("ok", b"a")
wait(retrying(p, "init_producer_id"), "InitProducerId retries")
p.close(timeout=0.2)
assert isinstance(f.exception(5), ClientClosedError), f.exception()
# mid-retry with NOT_ENOUGH_REPLICAS
p = Producer(bootstrap_servers=b, retry_backoff_ms=20, request_timeout_ms=1000)
f = p.send("nes", b"b")
wait(retrying(p, "nes"), "produce retries")
p.close(timeout=0.2)
assert isinstance(f.exception(5), ClientClosedError), f.exception()
# the issue's path: expired, then closed
p = Producer(bootstrap_servers=b, retry_backoff_ms=20, request_timeout_ms=1000,
             delivery_timeout_ms=2000)
try:
    p.send("nes", b"c").result(30)
    raise AssertionError("delivered?")
except GregorError:
    pass
p.close()
# pending sends, dropped without close()
p = Producer(bootstrap_servers=b, retry_backoff_ms=20, request_timeout_ms=1000)
p.send("nes", b"d")
del p
gc.collect()
# consumers and an admin: closed, dropped
c = Consumer(bootstrap_servers=b, auto_offset_reset="earliest")
c.subscribe(["ok"])
c.poll(200)
c.close()
c = Consumer(bootstrap_servers=b, group_id="g", auto_offset_reset="earliest")
c.subscribe(["ok"])
c.poll(500)
c.close()
c = Consumer(bootstrap_servers=b, group_id="g2", auto_offset_reset="earliest")
c.subscribe(["ok"])
c.poll(200)
del c
gc.collect()
a = Admin(bootstrap_servers=b)
a.list_topics()
a.close()
# left open at exit: a producer retrying, a group member heartbeating
p = Producer(bootstrap_servers=b, client_id=REFUSED_ID, retry_backoff_ms=20)
p.send("ok", b"e")
p2 = Producer(bootstrap_servers=b, retry_backoff_ms=20, request_timeout_ms=1000)
p2.send("nes", b"f")
c = Consumer(bootstrap_servers=b, group_id="g3")
c.subscribe(["ok"])
c.poll(200)
wait(retrying(p, "init_producer_id"), "InitProducerId retries")
wait(retrying(p2, "nes"), "produce retries")
wait(lambda: c._core._group._task is not None, "the heartbeat task")
print("ok")
""".replace("REFUSED_ID", repr(REFUSED))


def test_sync_clients_print_no_task_noise(broker) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, broker.bootstrap, str(Path(__file__).parents[1])],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-4000:]
    for noise in ("Task was destroyed", "never retrieved", "Traceback", "Exception ignored"):
        assert noise not in out.stderr, out.stderr[-4000:]
    assert broker.refused  # (the refusing path was taken)
