"""A fault-injecting TCP proxy for client tests: a real socket on 127.0.0.1 in front of a real
broker, forwarding the real frames (client.protocol.framing) both ways.

    client ──TCP──> FaultProxy (127.0.0.1:ephemeral) ──TCP──> broker
           <──────  rewrite / delay / swallow responses <──────

Per accepted client connection the proxy opens one upstream connection and runs two pumps:
requests are decoded only to record `(api_key, body)` and to remember each correlation id's api
key (responses carry no api key); responses of that key then meet the pending faults:

- `inject_error(api_key, code, times)`: the next `times` responses of `api_key` get `code` in
  every partition (`topics[].partitions[].error_code`; records emptied, offsets -1), else in
  every topic, else in the body. The broker really did the work (a produce was appended).
- `delay(api_key, seconds, times)`: hold the next responses (and, as TCP would, every response
  behind them on that connection).
- `swallow(api_key, times)`: never forward the next responses (the client's request times out).
- `drop_connections()`: abort every client and upstream socket.

Metadata (3) and DescribeCluster (60) responses advertise the proxy instead of the broker, so
the client keeps talking through the proxy. Faults queued for one api key apply in order.

Runs its own event loop on a thread it owns (`stop()` joins it), so sync and asyncio tests can
both use it; every public method may be called from any thread.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from client.protocol import (
    ApiKey,
    FrameDecoder,
    MalformedFrameError,
    decode_request,
    decode_response,
    encode_response,
    frame,
)

log = logging.getLogger(__name__)

_CHUNK = 1 << 16
_ADVERTISING_APIS = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER})


@dataclass
class _Fault:
    kind: str  # "error" | "delay" | "swallow"
    code: int = 0
    seconds: float = 0.0


class FaultProxy:
    """A proxy for one broker at `upstream` (host, port). Start it with `start()` or `with`."""

    def __init__(self, upstream: tuple[str, int], *, max_recorded: int = 10_000) -> None:
        self.upstream = upstream
        self.host = "127.0.0.1"
        self.port = 0
        self._lock = threading.Lock()
        self._faults: dict[int, collections.deque[_Fault]] = collections.defaultdict(
            collections.deque
        )
        self._recorded: collections.deque[tuple[int, dict]] = collections.deque(maxlen=max_recorded)
        self._accepted = 0
        self._applied: collections.Counter[str] = collections.Counter()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy")
        self._server: asyncio.Server | None = None
        self._transports: set[asyncio.WriteTransport] = set()
        self._conn_tasks: set[asyncio.Task] = set()  # one per accepted connection
        self._pumps: set[asyncio.Future] = set()  # two per connection

    # -- lifecycle (any thread) ----------------------------------------------------------------

    def start(self) -> FaultProxy:
        self._thread.start()
        try:
            self._call(self._listen)
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
            raise
        return self

    def stop(self) -> None:
        """Close the listener and every connection, then stop and join the loop thread."""
        if not self._thread.is_alive():
            return
        self._call(self._shutdown)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    # -- faults and observations (any thread) --------------------------------------------------

    def inject_error(self, api_key: int, code: int, times: int = 1) -> None:
        self._add(api_key, _Fault("error", code=int(code)), times)

    def delay(self, api_key: int, seconds: float, times: int = 1) -> None:
        self._add(api_key, _Fault("delay", seconds=seconds), times)

    def swallow(self, api_key: int, times: int = 1) -> None:
        self._add(api_key, _Fault("swallow"), times)

    def pending(self, api_key: int) -> int:
        """Faults queued for `api_key` that no response has met yet."""
        with self._lock:
            return len(self._faults[api_key])

    def applied(self, kind: str) -> int:
        """How many responses met a fault of `kind` ("error", "delay", "swallow")."""
        with self._lock:
            return self._applied[kind]

    def drop_connections(self) -> int:
        """Abort every client and upstream socket; returns how many were open."""
        return self._call(self._abort_all)

    @property
    def accepted(self) -> int:
        """Client connections accepted so far."""
        with self._lock:
            return self._accepted

    def requests(self, api_key: int | None = None) -> list[tuple[int, dict]]:
        """A copy of the recorded `(api_key, body)` of requests, oldest first."""
        with self._lock:
            return [r for r in self._recorded if api_key is None or r[0] == api_key]

    def _add(self, api_key: int, fault: _Fault, times: int) -> None:
        if times < 1:
            raise ValueError(f"times must be >= 1, got {times}")
        with self._lock:
            self._faults[int(api_key)].extend(_Fault(**vars(fault)) for _ in range(times))

    def _next_fault(self, api_key: int) -> _Fault | None:
        with self._lock:
            queue = self._faults.get(api_key)
            if not queue:
                return None
            fault = queue.popleft()
            self._applied[fault.kind] += 1
            return fault

    def _call(self, fn: Callable[[], Any]) -> Any:
        async def run() -> Any:
            result = fn()
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    # -- loop side -----------------------------------------------------------------------------

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("fault proxy %s -> %s:%d", self.bootstrap, *self.upstream)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self._abort_all()
        # End the pumps (one may be holding a delayed response); each connection's task then
        # returns by itself (cancelling it would upset asyncio's start_server callback).
        for p in list(self._pumps):
            p.cancel()
        if self._conn_tasks:
            _done, stuck = await asyncio.wait(self._conn_tasks, timeout=5)
            assert not stuck, f"fault proxy connections did not end: {stuck}"

    def _abort_all(self) -> int:
        n = len(self._transports)
        for t in list(self._transports):
            t.abort()
        self._transports.clear()
        return n

    async def _accept(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conn_tasks.add(task)
        self._transports.add(c_writer.transport)
        with self._lock:
            self._accepted += 1
        b_writer: asyncio.StreamWriter | None = None
        try:
            b_reader, b_writer = await asyncio.open_connection(*self.upstream)
            self._transports.add(b_writer.transport)
            pending: dict[int, int] = {}  # correlation id -> api key, for this connection
            pumps = [
                asyncio.ensure_future(self._requests(c_reader, b_writer, pending)),
                asyncio.ensure_future(self._responses(b_reader, c_writer, pending)),
            ]
            self._pumps.update(pumps)
            try:
                done, _ = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for p in pumps:
                    p.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
                self._pumps.difference_update(pumps)
            for p in done:
                exc = p.exception() if not p.cancelled() else None
                if exc is not None and not isinstance(exc, ConnectionError):
                    log.error("fault proxy pump failed", exc_info=exc)
        except ConnectionError as exc:
            log.info("fault proxy connection ended: %s", exc)
        finally:
            for w in (c_writer, b_writer):
                if w is not None:
                    self._transports.discard(w.transport)
                    w.transport.abort()
            self._conn_tasks.discard(task)

    async def _requests(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pending: dict[int, int]
    ) -> None:
        """Client -> broker: record each request and its correlation id, forward it unchanged."""
        decoder = FrameDecoder()
        while data := await reader.read(_CHUNK):
            for payload in decoder.feed(data):
                try:
                    api_key, _ver, corr, _cid, body = decode_request(payload)
                except MalformedFrameError as exc:
                    log.warning("fault proxy forwards a malformed request as is: %s", exc)
                else:
                    with self._lock:
                        self._recorded.append((api_key, body))
                    if not (api_key == ApiKey.PRODUCE and body.get("acks") == 0):
                        pending[corr] = api_key  # acks=0 produce has no response
                writer.write(frame(payload))
            await writer.drain()

    async def _responses(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pending: dict[int, int]
    ) -> None:
        """Broker -> client: apply the next fault of the response's api key, rewrite the
        advertised brokers, forward in order."""
        decoder = FrameDecoder()
        while data := await reader.read(_CHUNK):
            for payload in decoder.feed(data):
                corr, body = decode_response(payload)
                api_key = pending.pop(corr, None)
                if api_key is None:
                    writer.write(frame(payload))
                    continue
                changed = False
                fault = self._next_fault(api_key)
                if fault is not None and fault.kind == "swallow":
                    log.info("fault proxy swallows %s response %d", ApiKey(api_key).name, corr)
                    continue
                if fault is not None and fault.kind == "delay":
                    await writer.drain()
                    await asyncio.sleep(fault.seconds)
                if fault is not None and fault.kind == "error":
                    _set_error(body, fault.code)
                    changed = True
                if api_key in _ADVERTISING_APIS:
                    changed |= self._advertise_self(body)
                writer.write(encode_response(corr, body) if changed else frame(payload))
            await writer.drain()

    def _advertise_self(self, body: dict) -> bool:
        changed = False
        for b in body.get("brokers") or ():
            if (b.get("host"), b.get("port")) == self.upstream:
                b["host"], b["port"] = self.host, self.port
                changed = True
        return changed


def _set_error(body: dict, code: int) -> None:
    """Put `code` in every partition of the response (or every topic, or the body)."""
    topics = body.get("topics")
    parts = [
        p
        for t in topics or ()
        if isinstance(t, dict) and isinstance(t.get("partitions"), list)
        for p in t["partitions"]
        if isinstance(p, dict) and "error_code" in p
    ]
    if parts:
        for p in parts:
            p["error_code"] = code
            for field, empty in (("records", b""), ("base_offset", -1), ("offset", -1)):
                if field in p:
                    p[field] = empty
    elif topics and all(isinstance(t, dict) and "error_code" in t for t in topics):
        for t in topics:
            t["error_code"] = code
    elif "error_code" in body:
        body["error_code"] = code
    else:
        raise AssertionError(f"no error_code to rewrite in a response with keys {sorted(body)}")
