"""A listener that claims a security protocol Gregor does not speak stops start-up (issue 22,
item 1): `listeners: SASL_SSL://...` alone exits 2 without the broker's own SASL credentials: it
is the inter-broker listener, and followers must authenticate to leaders. An SSL listener is built (issue 25) but needs its certificate: without
ssl.certfile it exits 2 naming the key. A named listener mapped to PLAINTEXT still serves."""

from __future__ import annotations

import os
import subprocess

import pytest
from helpers import api_versions_ok, gregor_command


def _server(tmp_path, *overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    args = [*gregor_command(), "server", "--data-dir", str(tmp_path / "data")]
    for o in overrides:
        args += ["--override", o]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (
            ("listeners=SASL_SSL://127.0.0.1:29098",),
            ["inter.broker.listener.name: listener SASL_SSL uses SASL_SSL",
             "set sasl.inter.broker.username and sasl.inter.broker.password"],
        ),
        (
            ("listeners=SSL://127.0.0.1:29098",),
            ["ssl.certfile: a TLS listener (SSL or SASL_SSL) needs the server's certificate"],
        ),
        (
            ("listeners=SSL://127.0.0.1:29098", "ssl.certfile=/no/such/cert.pem"),
            ["ssl.certfile='/no/such/cert.pem': no such file"],
        ),
    ],
)  # fmt: skip
def test_a_listener_it_cannot_serve_as_claimed_stops_start_up(tmp_path, overrides, says) -> None:
    r = _server(tmp_path, *overrides)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "invalid configuration" in r.stderr, r.stderr
    for text in says:
        assert text in r.stderr, r.stderr
    assert "listening on" not in r.stdout, r.stdout


def test_a_named_listener_mapped_to_plaintext_serves(gregor_process) -> None:
    gp = gregor_process(
        "--override", "listeners=CLIENT://127.0.0.1:0",
        "--override", "listener.security.protocol.map=CLIENT:PLAINTEXT",
    )  # fmt: skip
    api_versions_ok(gp.address)
