"""TLS contexts from PEM files, for every link (client↔broker, follower↔leader,
broker↔controller, controller↔controller), and the principal a client certificate names.

    settings = TlsSettings.from_config(config)      # ssl.cafile, ssl.certfile, ssl.keyfile...
    server = ReloadableContext(settings, server=True)
    server.context                                   # the current ssl.SSLContext
    server.reload()                                  # re-read the files (SIGHUP)
    client_context(settings)                         # for an outgoing connection

Server side: `ssl.certfile` (the certificate chain, PEM) and `ssl.keyfile` (its private key,
PEM; may be the same file) are required; `ssl.cafile` (PEM CA bundle) is what client
certificates are checked against when `ssl.client.auth` is `requested` or `required`.
Client side: `ssl.cafile` is the trust store (empty: the system's default CAs), and
`ssl.certfile`/`ssl.keyfile` the client's own certificate (mTLS). Hostname verification is on
unless `ssl.endpoint.identification.algorithm` is empty (Kafka's switch).

TLS 1.2 is the lowest version either side accepts. Pure construction (no sockets); any thread.
"""

from __future__ import annotations

import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from client.errors import ConfigError

if TYPE_CHECKING:
    from client.config.loader import Config

CLIENT_AUTH = ("none", "requested", "required")
ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True)
class TlsSettings:
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    client_auth: str = "none"
    check_hostname: bool = True

    @classmethod
    def from_config(cls, config: Config | SimpleNamespace) -> TlsSettings:
        """From a config object with snake_case attributes (ssl_cafile, ...); missing ones
        take their defaults."""

        def opt(name: str) -> str | None:
            v = getattr(config, name, None)
            return str(v) if v else None

        algo = getattr(config, "ssl_endpoint_identification_algorithm", "https")
        return cls(
            cafile=opt("ssl_cafile"),
            certfile=opt("ssl_certfile"),
            keyfile=opt("ssl_keyfile"),
            client_auth=str(getattr(config, "ssl_client_auth", "none") or "none").lower(),
            check_hostname=bool(algo),
        )


def _check_file(key: str, path: str | None) -> None:
    if path is not None and not Path(path).is_file():
        raise ConfigError(f"{key}={path!r}: no such file (a PEM file is expected)")


def _load_chain(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    _check_file("ssl.certfile", s.certfile)
    _check_file("ssl.keyfile", s.keyfile)
    assert s.certfile is not None
    try:
        ctx.load_cert_chain(s.certfile, s.keyfile)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"ssl.certfile={s.certfile!r} / ssl.keyfile={s.keyfile!r}: cannot load the"
            f" certificate and key as PEM: {exc}"
        ) from exc


def _load_ca(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    _check_file("ssl.cafile", s.cafile)
    try:
        ctx.load_verify_locations(cafile=s.cafile)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"ssl.cafile={s.cafile!r}: cannot load PEM certificates: {exc}") from exc


def server_context(s: TlsSettings) -> ssl.SSLContext:
    """A server context: our certificate, and client certificates checked as `client_auth`
    says. ConfigError naming the key when a file is missing or unreadable."""
    if s.client_auth not in CLIENT_AUTH:
        raise ConfigError(
            f"ssl.client.auth={s.client_auth!r}: expected one of {', '.join(CLIENT_AUTH)}"
        )
    if not s.certfile:
        raise ConfigError(
            "ssl.certfile: a TLS listener (SSL or SASL_SSL) needs the server's certificate"
            " (PEM) in ssl.certfile and its key in ssl.keyfile"
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(ctx, s)
    if s.client_auth != "none":
        if not s.cafile:
            raise ConfigError(
                f"ssl.client.auth={s.client_auth}: ssl.cafile must name the CA bundle (PEM)"
                " that client certificates are checked against"
            )
        _load_ca(ctx, s)
        ctx.verify_mode = ssl.CERT_REQUIRED if s.client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def client_context(s: TlsSettings) -> ssl.SSLContext:
    """A client context: the server's certificate checked against `cafile` (or the system's
    CAs), its host name checked unless turned off, our own certificate sent when configured."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = s.check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    if s.cafile:
        _load_ca(ctx, s)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if s.certfile:
        _load_chain(ctx, s)
    elif s.keyfile:
        raise ConfigError("ssl.keyfile is set without ssl.certfile (the certificate it keys)")
    return ctx


class ReloadableContext:
    """The current context for one side of a link; `reload()` re-reads the PEM files and swaps
    the context in for new connections (live ones keep theirs). A failed reload keeps the old
    context and raises ConfigError. Any thread."""

    def __init__(self, settings: TlsSettings, server: bool) -> None:
        self.settings = settings
        self.server = server
        self._lock = threading.Lock()
        self._context = self._build()
        self.reloads = 0

    def _build(self) -> ssl.SSLContext:
        return server_context(self.settings) if self.server else client_context(self.settings)

    @property
    def context(self) -> ssl.SSLContext:
        return self._context

    def reload(self) -> None:
        ctx = self._build()
        with self._lock:
            self._context = ctx
            self.reloads += 1


def principal_from_cert(cert: dict[str, Any] | None) -> str:
    """`User:CN=...,OU=...,O=...` from `SSLObject.getpeercert()` (the subject in RFC 2253
    order, most specific first, as Kafka's default ssl.principal.mapping.rules give it);
    `User:ANONYMOUS` when the peer sent no certificate."""
    if not cert or not cert.get("subject"):
        return ANONYMOUS
    names = {
        "commonName": "CN",
        "organizationalUnitName": "OU",
        "organizationName": "O",
        "localityName": "L",
        "stateOrProvinceName": "ST",
        "countryName": "C",
        "streetAddress": "STREET",
        "domainComponent": "DC",
        "userId": "UID",
    }
    rdns = []
    for rdn in reversed(cert["subject"]):
        rdns.append("+".join(f"{names.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(rdns)


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
