"""The files of a secured cluster, generated in one go (`gregor cluster up --secure`, and the
compose file's `secure` profile through `python -m broker.security.secure_setup`): a CA, one
certificate per node, the SCRAM users to bootstrap and a client properties file for the admin.

    files = generate(Path("DIR/secure"), {"broker-1": ["127.0.0.1", "localhost"], ...})
    files.ca, files.node_cert("broker-1"), files.node_key("broker-1")
    files.scram_bootstrap        # sasl.scram.bootstrap.file of the controllers
    files.admin_properties       # --command-config FILE of the gregor CLI (mode 0600)
    files.broker_password        # of INTER_BROKER_USER, for sasl.inter.broker.password

Layout of DIR (keys, passwords and the CA's key are mode 0600):

    ca.pem  ca-key.pem                    the cluster's CA (EC P-256, 10 years)
    NAME.pem  NAME-key.pem                a node's certificate (server and client use, for
                                          its host names / IPs) and key (EC P-256, 2 years)
    scram-bootstrap.txt                   SCRAM-SHA-512 credentials of ADMIN_USER and
                                          INTER_BROKER_USER, in Kafka's --add-scram form
    admin.properties                      security.protocol=SASL_SSL, sasl.*, ssl.cafile
    broker.password                       INTER_BROKER_USER's password

Passwords are 32 random bytes (urlsafe base64) from `secrets`. `load(DIR)` reads an existing
directory (a resumed cluster). Any thread may call these functions.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import secrets
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ADMIN_USER = "admin"
INTER_BROKER_USER = "gregor-broker"
MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class SecureFiles:
    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    def node_cert(self, name: str) -> Path:
        return self.dir / f"{name}.pem"

    def node_key(self, name: str) -> Path:
        return self.dir / f"{name}-key.pem"

    @property
    def scram_bootstrap(self) -> Path:
        return self.dir / "scram-bootstrap.txt"

    @property
    def admin_properties(self) -> Path:
        return self.dir / "admin.properties"

    @property
    def broker_password(self) -> str:
        return (self.dir / "broker.password").read_text().strip()

    def admin_settings(self) -> dict[str, str]:
        """The admin's client settings (dotted names), as admin.properties holds them."""
        out = {}
        for line in self.admin_properties.read_text().splitlines():
            if line and not line.startswith("#"):
                k, _, v = line.partition("=")
                out[k] = v
        return out


def _private(path: Path, data: bytes) -> None:
    """Write `data` to `path`, readable by its owner only (created 0600, never wider)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _public(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _sans(hosts: Iterable[str]) -> list[Any]:
    from cryptography import x509

    out: list[x509.GeneralName] = []
    for h in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return out


def generate(
    directory: Path,
    nodes: Mapping[str, Iterable[str]],
    cluster_name: str = "gregor",
    ca_files: tuple[Path, Path] | None = None,
) -> SecureFiles:
    """A CA (or the given (cert, key) PEM pair) and one certificate per node of `nodes` (name
    -> host names and IP addresses it is reached by), the SCRAM bootstrap file and the admin's
    properties, in `directory` (created; mode 0700)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    files = SecureFiles(directory)
    now = datetime.datetime.now(datetime.UTC)
    pem = serialization.Encoding.PEM

    def key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def name(cn: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, cluster_name),
                x509.NameAttribute(NameOID.COMMON_NAME, cn),
            ]
        )

    if ca_files is None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = name(f"{cluster_name} CA")
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        _private(directory / "ca-key.pem", key_bytes(ca_key))
        _public(files.ca, ca_cert.public_bytes(pem))
    else:
        ca_cert = x509.load_pem_x509_certificate(ca_files[0].read_bytes())
        loaded = serialization.load_pem_private_key(ca_files[1].read_bytes(), None)
        assert isinstance(loaded, ec.EllipticCurvePrivateKey), "the CA key must be EC"
        ca_key = loaded
    for node, hosts in nodes.items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(node))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=730))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(x509.SubjectAlternativeName(_sans(hosts)), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        _private(files.node_key(node), key_bytes(key))
        _public(files.node_cert(node), cert.public_bytes(pem))
    admin_password = secrets.token_urlsafe(32)
    broker_password = secrets.token_urlsafe(32)
    _private(directory / "broker.password", broker_password.encode() + b"\n")
    _private(
        files.scram_bootstrap,
        (
            f"{MECHANISM}=[name={ADMIN_USER},password={admin_password}]\n"
            f"{MECHANISM}=[name={INTER_BROKER_USER},password={broker_password}]\n"
        ).encode(),
    )
    write_admin_properties(files, admin_password, files.ca)
    return files


def write_admin_properties(files: SecureFiles, password: str, cafile: Path | str) -> None:
    _private(
        files.admin_properties,
        (
            "# the cluster's admin user (gregor ... --command-config FILE); keep it private\n"
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={MECHANISM}\n"
            f"sasl.username={ADMIN_USER}\n"
            f"sasl.password={password}\n"
            f"ssl.cafile={cafile}\n"
        ).encode(),
    )


def load(directory: Path) -> SecureFiles | None:
    """The files `generate` wrote in `directory`; None when it holds none."""
    files = SecureFiles(directory)
    return files if files.ca.exists() and files.admin_properties.exists() else None


def main(argv: list[str] | None = None) -> int:
    """`python -m broker.security.secure_setup DIR NAME=HOST[,HOST...] ...`: the files of a
    secured cluster in DIR (kept when DIR holds them already), for containers (the compose
    file's `secure` profile). --owner UID:GID: the owner of DIR and its files (run as root);
    --client-dir D: ca.pem and admin.properties copied there too, owned by D's owner;
    --client-cafile: the ssl.cafile those admin.properties name (where the client finds ca.pem;
    default DIR/ca.pem)."""
    ap = argparse.ArgumentParser(prog="python -m broker.security.secure_setup")
    ap.add_argument("dir", type=Path)
    ap.add_argument("nodes", nargs="+", metavar="NAME=HOST[,HOST...]")
    ap.add_argument("--cluster-name", default="gregor")
    ap.add_argument("--owner", default=None, metavar="UID:GID")
    ap.add_argument("--client-dir", type=Path, default=None)
    ap.add_argument("--client-cafile", default=None)
    args = ap.parse_args(argv)
    nodes = {}
    for spec in args.nodes:
        node, sep, hosts = spec.partition("=")
        if not sep or not node or not hosts:
            ap.error(f"{spec!r}: expected NAME=HOST[,HOST...]")
        nodes[node] = [h.strip() for h in hosts.split(",") if h.strip()]
    files = load(args.dir)
    if files is not None:
        print(f"{args.dir} holds the cluster's files already: kept", flush=True)
    else:
        files = generate(args.dir, nodes, args.cluster_name)
        print(f"wrote a CA, {len(nodes)} node certificates and admin.properties in {args.dir}")
    if args.owner:
        uid, _, gid = args.owner.partition(":")
        for path in (args.dir, *args.dir.iterdir()):
            os.chown(path, int(uid), int(gid or uid))
    if args.client_dir is not None:
        args.client_dir.mkdir(parents=True, exist_ok=True)
        client = SecureFiles(args.client_dir)
        _public(client.ca, files.ca.read_bytes())
        password = files.admin_settings()["sasl.password"]
        write_admin_properties(client, password, args.client_cafile or client.ca)
        st = args.client_dir.stat()
        for path in (client.ca, client.admin_properties):
            os.chown(path, st.st_uid, st.st_gid)
        print(f"the admin's client files: {args.client_dir}/admin.properties, ca.pem")
    return 0


if __name__ == "__main__":
    sys.exit(main())
