"""SCRAM (RFC 5802, RFC 7677: SCRAM-SHA-256 and SCRAM-SHA-512) and PLAIN (RFC 4616), pure:
hashlib, hmac and secrets, no sockets.

    cred = new_credential("SCRAM-SHA-256", "secret")        # what the metadata log stores:
    cred.salt, cred.stored_key, cred.server_key, cred.iterations   # never the password
    client = ScramClient("SCRAM-SHA-256", "alice", "secret")
    server = ScramServer("SCRAM-SHA-256", lookup)            # lookup(user) -> cred | None
    s1 = server.first(client.first())                        # client-first -> server-first
    s2 = server.final(client.final(s1))                      # proof checked; AuthenticationFailed
    client.verify(s2)                                        # the server knew the keys too

A user the server does not know gets a server-first like any other (a salt derived from the
user name and a per-process secret, the default iteration count), and fails at the proof
exactly as a wrong password does: the exchange does not tell whether the user exists.
`check_plain` verifies a PLAIN password against the same stored SCRAM keys (it recomputes the
salted password with the stored salt and iterations), spending the same PBKDF2 work on an
unknown user.

Messages are bytes (UTF-8). Any thread; one ScramServer/ScramClient per exchange.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

# Kafka's ScramMechanism numbers (DescribeUserScramCredentials, AlterUserScramCredentials)
MECHANISMS: dict[str, tuple[int, str]] = {
    "SCRAM-SHA-256": (1, "sha256"),
    "SCRAM-SHA-512": (2, "sha512"),
}
MECHANISM_NAMES = {num: name for name, (num, _h) in MECHANISMS.items()}
MIN_ITERATIONS = 4096  # Kafka's bounds
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 8192
_SECRET = secrets.token_bytes(32)  # fake salts for unknown users, per process


@dataclass(frozen=True)
class SaslCredentials:
    """What a client authenticates with on a SASL listener (security.protocol SASL_*): a
    mechanism (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN), a user name and its password."""

    mechanism: str
    username: str
    password: str = field(repr=False)


class AuthenticationFailed(Exception):
    """The exchange failed; the message is for the server's log, never for the client."""


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][1]
    except KeyError:
        raise ValueError(
            f"unknown SCRAM mechanism {mechanism!r} (expected {', '.join(MECHANISMS)})"
        ) from None


def _hmac(h: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, h).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2-HMAC with the mechanism's hash."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode(), salt, iterations)


def credential_from_salted(
    mechanism: str, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The stored form (StoredKey, ServerKey) of a salted password: what the broker keeps."""
    h = _hash_name(mechanism)
    client_key = _hmac(h, salted, b"Client Key")
    return ScramCredential(
        mechanism,
        salt,
        hashlib.new(h, client_key).digest(),
        _hmac(h, salted, b"Server Key"),
        iterations,
    )


def new_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A fresh random salt (unless given), salted and iterated."""
    check_iterations(iterations)
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations {iterations}: expected {MIN_ITERATIONS} to {MAX_ITERATIONS}")


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape(name: str) -> str:
    if "=" in name.replace("=3D", "").replace("=2C", ""):
        raise AuthenticationFailed("bad escape in user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attrs(msg: str) -> list[tuple[str, str]]:
    out = []
    for part in msg.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise AuthenticationFailed(f"malformed SCRAM attribute {part[:40]!r}")
        out.append((key, value))
    return out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        raise AuthenticationFailed("bad base64") from None


class ScramServer:
    """One server-side exchange: `first(client_first)` then `final(client_final)`."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self.mechanism = mechanism
        self._h = _hash_name(mechanism)
        self._lookup = lookup
        self._nonce = nonce
        self.username: str | None = None
        self._cred: ScramCredential | None = None
        self._known = False
        self._client_first_bare = ""
        self._server_first = ""
        self._combined_nonce = ""

    def first(self, client_first: bytes) -> bytes:
        try:
            text = client_first.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("client-first is not UTF-8") from None
        if not text.startswith("n,"):
            # "y,"/"p=": channel binding, which Gregor does not offer
            raise AuthenticationFailed("unsupported GS2 header (channel binding)")
        _gs2, sep, bare = text[2:].partition(",")  # authzid, then the bare message
        if not sep:
            raise AuthenticationFailed("malformed client-first")
        attrs = _attrs(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise AuthenticationFailed("client-first must be n=USER,r=NONCE")
        if len(attrs) > 2:
            raise AuthenticationFailed("SCRAM extensions are not supported")
        self.username = _unescape(attrs[0][1])
        cred = self._lookup(self.username)
        self._known = cred is not None and cred.mechanism == self.mechanism
        if not self._known:
            # a salt and iteration count that look real and stay the same for this name
            salt = _hmac(self._h, _SECRET, self.username.encode())[:32]
            cred = ScramCredential(self.mechanism, salt, b"", b"", DEFAULT_ITERATIONS)
        assert cred is not None
        self._cred = cred
        self._client_first_bare = bare
        self._combined_nonce = attrs[1][1] + self._nonce()
        self._server_first = f"r={self._combined_nonce},s={_b64(cred.salt)},i={cred.iterations}"
        return self._server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        """Check the proof; the server-final message, or AuthenticationFailed."""
        if self._cred is None:
            raise AuthenticationFailed("client-final before client-first")
        try:
            text = client_final.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("client-final is not UTF-8") from None
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise AuthenticationFailed("client-final has no proof")
        attrs = dict(_attrs(without_proof))
        if attrs.get("c") != _b64(b"n,,"):
            raise AuthenticationFailed("channel binding mismatch")
        if attrs.get("r") != self._combined_nonce:
            raise AuthenticationFailed("nonce mismatch")
        proof = _unb64(proof_attr)
        auth_message = ",".join((self._client_first_bare, self._server_first, without_proof))
        cred = self._cred
        signature = _hmac(self._h, cred.stored_key or b"\0", auth_message.encode())
        if len(proof) != len(signature):
            raise AuthenticationFailed("proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        ok = hmac.compare_digest(hashlib.new(self._h, client_key).digest(), cred.stored_key)
        if not (ok and self._known):
            raise AuthenticationFailed(
                "invalid proof" if self._known else f"unknown user {self.username!r}"
            )
        return f"v={_b64(_hmac(self._h, cred.server_key, auth_message.encode()))}".encode()


class ScramClient:
    """One client-side exchange: `first()`, `final(server_first)`, `verify(server_final)`."""

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: str | None = None
    ) -> None:
        self.mechanism = mechanism
        self._h = _hash_name(mechanism)
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._bare = f"n={_escape(username)},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        attrs = dict(_attrs(server_first.decode()))
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise AuthenticationFailed("malformed server-first")
        if int(iterations) < MIN_ITERATIONS:
            raise AuthenticationFailed(f"server asks for only {iterations} iterations")
        salted = salted_password(self.mechanism, self._password, _unb64(salt), int(iterations))
        client_key = _hmac(self._h, salted, b"Client Key")
        stored_key = hashlib.new(self._h, client_key).digest()
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = ",".join((self._bare, server_first.decode(), without_proof)).encode()
        signature = _hmac(self._h, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(self._h, salted, b"Server Key")
        self._server_signature = _hmac(self._h, server_key, auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        """The server proved it holds the keys too (AuthenticationFailed otherwise)."""
        attrs = dict(_attrs(server_final.decode()))
        if "e" in attrs:
            raise AuthenticationFailed(f"server error {attrs['e']}")
        if not hmac.compare_digest(_unb64(attrs.get("v", "")), self._server_signature):
            raise AuthenticationFailed("the server's signature does not match")


def plain_message(username: str, password: str) -> bytes:
    return f"\0{username}\0{password}".encode()


def check_plain(message: bytes, lookup: Callable[[str], list[ScramCredential]]) -> str:
    """The user name of a good PLAIN message ([authzid] NUL user NUL password), checked
    against the user's stored SCRAM keys; AuthenticationFailed otherwise."""
    try:
        authzid, user, password = message.decode().split("\0")
    except (UnicodeDecodeError, ValueError):
        raise AuthenticationFailed("malformed PLAIN message") from None
    if authzid and authzid != user:
        raise AuthenticationFailed("PLAIN authorization id differs from the user")
    creds = lookup(user) if user else []
    if not creds:  # the same work as a real check, so timing does not tell
        salted_password("SCRAM-SHA-256", password, _SECRET, DEFAULT_ITERATIONS)
        raise AuthenticationFailed(f"unknown user {user!r}")
    cred = creds[0]
    salted = salted_password(cred.mechanism, password, cred.salt, cred.iterations)
    if not hmac.compare_digest(
        credential_from_salted(cred.mechanism, cred.salt, salted, cred.iterations).stored_key,
        cred.stored_key,
    ):
        raise AuthenticationFailed("wrong password")
    return user
