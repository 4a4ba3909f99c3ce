"""The files of a secured cluster (broker/security/secure_setup.py): node certificates that
chain to the generated CA and name their hosts, private files 0600, the SCRAM bootstrap file in
the form the controllers read, and admin.properties the CLI reads."""

from __future__ import annotations

import ssl
import stat

from broker.security import secure_setup
from client.cli.common import read_properties


def test_generate(tmp_path) -> None:
    d = tmp_path / "secure"
    files = secure_setup.generate(d, {"broker-1": ["127.0.0.1", "localhost", "b1"]})
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for private in ("ca-key.pem", "broker-1-key.pem", "scram-bootstrap.txt", "admin.properties",
                    "broker.password"):  # fmt: skip
        assert stat.S_IMODE((d / private).stat().st_mode) == 0o600, private
    # the node's certificate is issued by the CA and names its hosts
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(files.node_cert("broker-1").read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(files.ca.read_bytes()))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(n.value) for n in sans} == {"127.0.0.1", "localhost", "b1"}
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(  # key and certificate match
        files.node_cert("broker-1"), files.node_key("broker-1")
    )
    lines = files.scram_bootstrap.read_text().splitlines()
    admin = read_properties(str(files.admin_properties))
    assert admin["sasl.username"] == "admin" and admin["security.protocol"] == "SASL_SSL"
    assert lines == [
        f"SCRAM-SHA-512=[name=admin,password={admin['sasl.password']}]",
        f"SCRAM-SHA-512=[name=gregor-broker,password={files.broker_password}]",
    ]
    assert admin["ssl.cafile"] == str(files.ca)
    assert secure_setup.load(d) == files and secure_setup.load(tmp_path) is None


def test_main_keeps_existing_files_and_copies_client_files(tmp_path) -> None:
    d, client = tmp_path / "secure", tmp_path / "client"
    assert secure_setup.main([str(d), "n1=h1", "--client-dir", str(client),
                              "--client-cafile", "rel/ca.pem"]) == 0  # fmt: skip
    password = read_properties(str(d / "admin.properties"))["sasl.password"]
    ca = (d / "ca.pem").read_bytes()
    assert secure_setup.main([str(d), "n1=h1", "--client-dir", str(client)]) == 0
    assert (d / "ca.pem").read_bytes() == ca  # kept
    copied = read_properties(str(client / "admin.properties"))
    assert copied["sasl.password"] == password and (client / "ca.pem").read_bytes() == ca
    assert stat.S_IMODE((client / "admin.properties").stat().st_mode) == 0o600
