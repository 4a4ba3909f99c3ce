"""client/security/tls.py: contexts from PEM files, clear ConfigErrors for bad files, reload
that swaps the context (or keeps the old one when the new files are bad), and the principal
a certificate subject gives."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from tls_certs import Pki

from client.errors import ConfigError
from client.security.tls import (
    ANONYMOUS,
    ReloadableContext,
    TlsSettings,
    client_context,
    principal_from_cert,
    server_context,
)


def test_principal_is_the_subject_most_specific_first() -> None:
    cert = {
        "subject": (
            (("countryName", "DE"),),
            (("organizationName", "Acme, Inc"),),
            (("commonName", "alice"),),
        )
    }
    assert principal_from_cert(cert) == "User:CN=alice,O=Acme\\, Inc,C=DE"
    assert principal_from_cert(None) == ANONYMOUS
    assert principal_from_cert({}) == ANONYMOUS


def test_server_context_needs_a_certificate(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ssl.certfile: a TLS listener"):
        server_context(TlsSettings())
    with pytest.raises(ConfigError, match=r"ssl.certfile='/nope.pem': no such file"):
        server_context(TlsSettings(certfile="/nope.pem"))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ConfigError, match="cannot load the certificate and key as PEM"):
        server_context(TlsSettings(certfile=str(junk)))


def test_client_auth_needs_a_ca_and_a_known_value(tmp_path: Path) -> None:
    pki = Pki(tmp_path)
    node = pki.issue("broker")
    with pytest.raises(ConfigError, match="ssl.client.auth=required: ssl.cafile must name"):
        server_context(TlsSettings(certfile=node.cert, keyfile=node.key, client_auth="required"))
    with pytest.raises(ConfigError, match="ssl.client.auth='sometimes': expected one of"):
        server_context(TlsSettings(certfile=node.cert, keyfile=node.key, client_auth="sometimes"))
    ctx = server_context(
        TlsSettings(certfile=node.cert, keyfile=node.key, cafile=pki.ca, client_auth="required")
    )
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2


def test_client_context_checks_host_names_unless_turned_off(tmp_path: Path) -> None:
    pki = Pki(tmp_path)
    assert client_context(TlsSettings(cafile=pki.ca)).check_hostname is True
    assert client_context(TlsSettings(cafile=pki.ca, check_hostname=False)).check_hostname is False
    assert client_context(TlsSettings(cafile=pki.ca)).verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ConfigError, match="ssl.keyfile is set without ssl.certfile"):
        client_context(TlsSettings(cafile=pki.ca, keyfile=pki.ca))


def test_settings_from_a_config_object() -> None:
    class Cfg:
        ssl_cafile = "/ca.pem"
        ssl_certfile = ""
        ssl_client_auth = "REQUIRED"
        ssl_endpoint_identification_algorithm = ""

    s = TlsSettings.from_config(Cfg())
    assert s == TlsSettings(cafile="/ca.pem", client_auth="required", check_hostname=False)


def test_reload_swaps_the_context_and_a_bad_reload_keeps_the_old(tmp_path: Path) -> None:
    pki = Pki(tmp_path)
    node = pki.issue("broker")
    holder = ReloadableContext(TlsSettings(certfile=node.cert, keyfile=node.key), server=True)
    first = holder.context
    pki.issue("broker")  # new files at the same paths
    holder.reload()
    assert holder.context is not first and holder.reloads == 1
    second = holder.context
    Path(node.cert).write_text("garbage")
    with pytest.raises(ConfigError):
        holder.reload()
    assert holder.context is second and holder.reloads == 1
