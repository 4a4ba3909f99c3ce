"""LeaderConnection: a follower's blocking connection to a leader (one request at a time),
over TLS when inter.broker.listener.name is SSL/SASL_SSL, authenticated as the broker's own
SASL user when it is SASL_* (SaslHandshake, then SCRAM or PLAIN). Used by one replica fetcher
thread (broker/replica/fetcher.py).
"""

from __future__ import annotations

import socket
import ssl

from client.protocol import ApiKey, decode_response, encode_request
from client.protocol.body import Body
from client.protocol.framing import LENGTH, LENGTH_SIZE
from client.protocol.schema import API_SPECS
from client.security.scram import AuthenticationFailed, SaslCredentials, ScramClient, plain_message

Endpoint = tuple[str, int]


class LeaderConnection:
    """A blocking connection to the leader (one request at a time)."""

    def __init__(
        self,
        endpoint: Endpoint,
        timeout_s: float,
        max_frame: int,
        client_id: str,
        tls: ssl.SSLContext | None = None,
        sasl: SaslCredentials | None = None,
    ):
        self.endpoint = endpoint
        self.client_id = client_id
        sock = socket.create_connection(endpoint, timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            try:  # the handshake, within the socket's timeout (ssl.SSLError is an OSError)
                sock = tls.wrap_socket(sock, server_hostname=endpoint[0])
            except BaseException:
                sock.close()
                raise
        self.sock = sock
        self.max_frame = max_frame
        self.corr = 0
        if sasl is not None:
            try:
                self._authenticate(sasl)
            except BaseException:
                self.close()
                raise

    def _authenticate(self, creds: SaslCredentials) -> None:
        """SaslHandshake and SaslAuthenticate (SCRAM or PLAIN) as this broker's own user;
        ConnectionError saying why when refused (the fetcher backs off and retries)."""
        where = f"{self.endpoint[0]}:{self.endpoint[1]}"
        hs = self.request(ApiKey.SASL_HANDSHAKE, {"mechanism": creds.mechanism})
        if hs["error_code"]:
            raise ConnectionError(
                f"SASL handshake with {where} refused (error {hs['error_code']}); the leader"
                f" offers {', '.join(hs['mechanisms']) or 'nothing'}"
                " (sasl.mechanism.inter.broker.protocol)"
            )

        def step(data: bytes) -> bytes:
            resp = self.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": data})
            if resp["error_code"]:
                raise ConnectionError(
                    f"authentication as {creds.username!r} at {where} failed:"
                    f" {resp.get('error_message')} (sasl.inter.broker.username/password)"
                )
            return bytes(resp["auth_bytes"])

        if creds.mechanism == "PLAIN":
            step(plain_message(creds.username, creds.password))
            return
        scram = ScramClient(creds.mechanism, creds.username, creds.password)
        final = step(scram.final(step(scram.first())))
        try:
            scram.verify(final)
        except AuthenticationFailed as exc:
            raise ConnectionError(f"{where} did not prove it knows the credentials: {exc}") from exc

    def request(self, api_key: int, body: Body) -> Body:
        self.corr = (self.corr + 1) & 0x7FFFFFFF
        self.sock.sendall(encode_request(api_key, 0, self.corr, self.client_id, body))
        (size,) = LENGTH.unpack(self._read_exactly(LENGTH_SIZE))
        if size > self.max_frame:
            raise ConnectionError(
                f"a response of {size} bytes exceeds socket.request.max.bytes={self.max_frame}"
            )
        corr, resp = decode_response(self._read_exactly(size))
        if corr != self.corr:
            raise ConnectionError(f"correlation id {corr}, expected {self.corr}")
        if set(resp) == {"error_code"}:
            raise ConnectionError(f"request refused: error {resp['error_code']}")
        return API_SPECS[api_key].check_response(resp, 0)  # (a Fetch answer: its fast check)

    def _read_exactly(self, n: int) -> bytearray:
        """The next `n` bytes of the stream, received straight into one buffer (a fetch
        response is megabytes: no intermediate copies)."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise ConnectionError(
                    f"{self.endpoint[0]}:{self.endpoint[1]} closed the connection"
                )
            got += k
        return buf

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
