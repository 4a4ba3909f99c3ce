"""A listener that claims a security protocol Gregor does not speak stops start-up (issue 22,
item 1). `listeners: SSL://127.0.0.1:29098` used to start, log `listener SSL: bound` and serve
plain text on it; now the process exits 2 naming the listener and what is supported. A named
listener mapped to PLAINTEXT still starts and serves."""

from __future__ import annotations

import os
import subprocess

from helpers import api_versions_ok, gregor_command


def test_an_ssl_listener_stops_start_up_naming_it(tmp_path) -> None:
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    r = subprocess.run(
        [*gregor_command(), "server", "--data-dir", str(data), "--override",
         "listeners=SSL://127.0.0.1:29098"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "invalid configuration" in r.stderr, r.stderr
    assert "listener SSL://127.0.0.1:29098 uses security protocol SSL" in r.stderr, r.stderr
    assert "only PLAINTEXT listeners are" in r.stderr, r.stderr
    assert "listening on" not in r.stdout, r.stdout


def test_a_named_listener_mapped_to_plaintext_serves(gregor_process) -> None:
    gp = gregor_process(
        "--override", "listeners=CLIENT://127.0.0.1:0",
        "--override", "listener.security.protocol.map=CLIENT:PLAINTEXT",
    )  # fmt: skip
    api_versions_ok(gp.address)
