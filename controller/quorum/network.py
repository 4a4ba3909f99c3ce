"""Controller networking over the native protocol (client/protocol framing, asyncio streams).

- `PeerTransport`: one outbound connection per peer voter; `send(to, message_dict)` queues a
  RaftMessage (1000) frame (carrying the sender's cluster id, once known) (bounded queue per peer: a full queue drops the message, which Raft
  tolerates) and a writer task connects with back-off, writes, and discards the `{error_code}`
  acknowledgements.
- `ControllerServer`: accepts connections and serves ApiVersions (18), RaftMessage (1000),
  MetadataFetch (1001), DescribeQuorum (55), BrokerRegistration (62), BrokerHeartbeat (63),
  AlterPartition (56). Requests on one connection are answered in order. Unknown keys/versions get
  `{"error_code": 35}`; a malformed frame or body is logged and the connection closed.
- `request(host, port, api_key, body)`: a blocking one-shot client (CLI, tests).

TLS (controller.listener.names mapped to SSL, docs/security.md): the server does the handshake
per accepted connection with its ReloadableContext's current context; PeerTransport and
`request` connect with the client context and check the peer's host name.

Threading: PeerTransport and ControllerServer live on the controller thread's event loop; every
method except `request` must be called there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

import msgpack

import client.protocol  # noqa: F401  (registers every schema)
from client.errors import ErrorCode, InvalidRequestError, NotControllerError
from client.protocol.api_keys import ApiKey
from client.protocol.body import Body
from client.protocol.framing import (
    FrameDecoder,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from client.protocol.schema import API_SPECS
from client.security.tls import ReloadableContext

_log = logging.getLogger(__name__)

MAX_FRAME = 64 * 1024 * 1024


def parse_voters(spec: str) -> dict[int, tuple[str, int]]:
    """`1@127.0.0.1:9093,2@host:9094` → {1: ("127.0.0.1", 9093), 2: ("host", 9094)}."""
    out: dict[int, tuple[str, int]] = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        try:
            nid, addr = part.split("@", 1)
            host, port = addr.rsplit(":", 1)
            out[int(nid)] = (host.strip("[]"), int(port))
        except ValueError:
            raise ValueError(
                f"controller.quorum.voters: bad entry {part!r}, expected ID@HOST:PORT"
            ) from None
    if not out:
        raise ValueError("controller.quorum.voters is empty")
    return out


class PeerTransport:
    def __init__(
        self,
        node_id: int,
        peers: dict[int, tuple[str, int]],
        loop: asyncio.AbstractEventLoop,
        max_queue: int = 1024,
        reconnect_backoff_ms: int = 50,
        cluster_id: Callable[[], str | None] = lambda: None,
        tls: ReloadableContext | None = None,
    ) -> None:
        """`cluster_id()`: the id each RaftMessage carries (None: not known yet); `tls`: the
        controllers' listener is SSL (its current client context per connection)."""
        self.tls = tls
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.peers = {k: v for k, v in peers.items() if k != node_id}
        self.loop = loop
        self.max_queue = max_queue
        self.backoff_s = reconnect_backoff_ms / 1000.0
        self._queues: dict[int, asyncio.Queue[bytes]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._by_peer: dict[int, asyncio.Task[None]] = {}
        self.dropped = 0

    def start(self) -> None:
        for peer in self.peers:
            self._start_writer(peer)

    def _start_writer(self, peer: int) -> None:
        q: asyncio.Queue[bytes] = asyncio.Queue(self.max_queue)
        self._queues[peer] = q
        task = self.loop.create_task(self._writer(peer, q))
        self._tasks.append(task)
        self._by_peer[peer] = task

    def set_peers(self, peers: dict[int, tuple[str, int]]) -> None:
        """The controller membership changed: connect to new peers (or new addresses), stop
        writing to departed ones. Loop thread, after `start()`."""
        peers = {k: v for k, v in peers.items() if k != self.node_id}
        for peer in list(self.peers):
            if peers.get(peer) != self.peers[peer]:
                task = self._by_peer.pop(peer, None)
                if task is not None:
                    task.cancel()
                    self._tasks.remove(task)
                self._queues.pop(peer, None)
                del self.peers[peer]
        for peer, addr in peers.items():
            if peer not in self.peers:
                self.peers[peer] = addr
                self._start_writer(peer)

    def send(self, to: int, message: Body) -> None:
        q = self._queues.get(to)
        if q is None:
            _log.warning("[controller=%d] no address for raft peer %d", self.node_id, to)
            return
        frame = encode_request(
            ApiKey.RAFT_MESSAGE,
            0,
            0,
            f"controller-{self.node_id}",
            {
                "cluster_id": self.cluster_id(),
                "payload": msgpack.packb(message, use_bin_type=True),
            },
        )
        try:
            q.put_nowait(frame)
        except asyncio.QueueFull:
            self.dropped += 1

    async def _writer(self, peer: int, q: asyncio.Queue[bytes]) -> None:
        host, port = self.peers[peer]
        while True:
            try:
                if self.tls is None:
                    reader, writer = await asyncio.open_connection(host, port)
                else:
                    reader, writer = await asyncio.open_connection(
                        host, port, ssl=self.tls.context, server_hostname=host
                    )
            except OSError as exc:  # ssl.SSLError included
                if isinstance(exc, ssl.SSLError):
                    _log.warning(
                        "[controller=%d] TLS to raft peer %d at %s:%d failed: %s",
                        self.node_id, peer, host, port, exc,
                    )  # fmt: skip
                await asyncio.sleep(self.backoff_s)
                continue
            with contextlib.suppress(OSError):
                writer.get_extra_info("socket").setsockopt(
                    socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
                )
            drain_acks = self.loop.create_task(self._discard(reader))
            try:
                while True:
                    frame = await q.get()
                    writer.write(frame)
                    # coalesce whatever else is queued into this write
                    while not q.empty():
                        writer.write(q.get_nowait())
                    await writer.drain()
                    if drain_acks.done():
                        break
            except (OSError, ConnectionError):
                pass
            finally:
                drain_acks.cancel()
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            await asyncio.sleep(self.backoff_s)

    async def _discard(self, reader: asyncio.StreamReader) -> None:
        while await reader.read(65536):
            pass

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t


Handler = Callable[[Body], Any]  # returns a body Body or an awaitable of one


class ControllerServer:
    """Serves the controller APIs; `handlers` maps api key → handler(body) (sync or async).

    A handler raising NotControllerError is answered `{error_code: 41 (NOT_CONTROLLER),
    error_message, leader_id, leader_endpoint}`, the leader hint coming from `leader_hint()` →
    (leader id or -1, "host:port" or None)."""

    def __init__(
        self,
        host: str,
        port: int,
        handlers: dict[int, Handler],
        node_id: int,
        leader_hint: Callable[[], tuple[int, str | None]] | None = None,
        tls: ReloadableContext | None = None,
    ) -> None:
        """`tls`: serve TLS (the controllers' listener is SSL) with its current server
        context, the handshake done per connection (so a reload reaches the next one)."""
        self.tls = tls
        self.host, self.port = host, port
        self.handlers = handlers
        self.node_id = node_id
        self.leader_hint = leader_hint or (lambda: (-1, None))
        self._server: asyncio.base_events.Server | None = None
        self._conns: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, reuse_address=True
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        return self.host, self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        # Closing the transports ends each handler's read loop (cancelling a handler task
        # makes asyncio's stream protocol log a spurious error on 3.11).
        for w in list(self._conns.values()):
            w.close()
        if self._conns:
            await asyncio.wait(list(self._conns), timeout=5)

    def api_versions(self) -> list[Body]:
        keys = sorted(set(self.handlers) | {ApiKey.API_VERSIONS})
        return [
            {
                "api_key": int(k),
                "min_version": API_SPECS[k].min_version,
                "max_version": API_SPECS[k].max_version,
            }
            for k in keys
            if k in API_SPECS
        ]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns[task] = writer
        decoder = FrameDecoder(MAX_FRAME)
        peer = writer.get_extra_info("peername")
        try:
            if self.tls is not None:
                try:
                    await writer.start_tls(self.tls.context, ssl_handshake_timeout=10.0)
                except (ssl.SSLError, TimeoutError) as exc:
                    _log.info(
                        "[controller=%d] TLS handshake from %s failed: %s", self.node_id, peer, exc
                    )
                    return
            while True:
                data = await reader.read(256 * 1024)
                if not data:
                    return
                for payload in decoder.feed(data):
                    api_key, version, corr, _client, body = decode_request(payload)
                    resp = await self._dispatch(api_key, version, body)
                    writer.write(encode_response(corr, resp))
                await writer.drain()
        except InvalidRequestError as e:
            _log.warning("[controller=%d] closing connection from %s: %s", self.node_id, peer, e)
        except (ConnectionError, OSError):
            pass
        finally:
            self._conns.pop(task, None)
            writer.close()

    async def _dispatch(self, api_key: int, version: int, body: Body) -> Body:
        spec = API_SPECS.get(api_key)
        if api_key == ApiKey.API_VERSIONS:
            return {"error_code": 0, "api_keys": self.api_versions(), "throttle_time_ms": 0}
        handler = self.handlers.get(api_key)
        if spec is None or handler is None or not spec.min_version <= version <= spec.max_version:
            return {"error_code": int(ErrorCode.UNSUPPORTED_VERSION)}
        body = spec.check_request(body, version)  # InvalidRequestError closes the connection
        try:
            result = handler(body)
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                result = await result
            answer: Body = result
            return answer
        except NotControllerError as e:
            leader_id, endpoint = self.leader_hint()
            return {
                "error_code": int(ErrorCode.NOT_CONTROLLER),
                "error_message": e.message,
                "leader_id": leader_id,
                "leader_endpoint": endpoint,
            }
        except Exception:
            _log.exception("[controller=%d] %s failed", self.node_id, spec.name)
            return {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR)}


def request(
    host: str,
    port: int,
    api_key: int,
    body: Body,
    version: int = 0,
    timeout: float = 5.0,
    client_id: str = "gregor-cli",
    ssl_context: ssl.SSLContext | None = None,
) -> Body:
    """Send one request and return the response body (blocking; any thread). `ssl_context`:
    over TLS (the controllers' listener is SSL); ssl.SSLError (an OSError) when it fails."""
    with _connect(host, port, timeout, ssl_context) as s:
        s.sendall(encode_request(api_key, version, 1, client_id, body))
        decoder = FrameDecoder(MAX_FRAME)
        while True:
            data = s.recv(256 * 1024)
            if not data:
                raise ConnectionError(f"{host}:{port} closed the connection")
            frames = decoder.feed(data)
            if frames:
                _corr, resp = decode_response(frames[0])
                return resp


def _connect(host: str, port: int, timeout: float, tls: ssl.SSLContext | None) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    if tls is None:
        return sock
    try:
        return tls.wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise
