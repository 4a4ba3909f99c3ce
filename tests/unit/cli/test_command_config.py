"""Where the client commands take their settings from (client/cli/common.py): the properties
file of --command-config, else the one $GREGOR_COMMAND_CONFIG names; $GREGOR_SASL_USERNAME and
$GREGOR_SASL_PASSWORD over the file's; -X over everything. Servers ignore the variables."""

from __future__ import annotations

import argparse

import pytest

from client.cli.common import CommandError, client_config, command_config
from client.config import load_config


def _props(path, **kv: str):
    path.write_text("# comment\n" + "".join(f"{k.replace('_', '.')}={v}\n" for k, v in kv.items()))
    return str(path)


def test_flag_then_environment_file_then_variables(tmp_path) -> None:
    flag = _props(tmp_path / "a.properties", sasl_username="alice", sasl_password="from-a")
    env_file = _props(tmp_path / "b.properties", sasl_username="bob", security_protocol="SSL")
    assert command_config(flag, {}) == {"sasl.username": "alice", "sasl.password": "from-a"}
    env = {"GREGOR_COMMAND_CONFIG": env_file}
    assert command_config(None, env) == {"sasl.username": "bob", "security.protocol": "SSL"}
    assert command_config(flag, env)["sasl.username"] == "alice"  # the flag wins
    env |= {"GREGOR_SASL_USERNAME": "carol", "GREGOR_SASL_PASSWORD": "from-env"}
    assert command_config(None, env) == {
        "sasl.username": "carol",
        "sasl.password": "from-env",
        "security.protocol": "SSL",
    }
    assert command_config(None, {"GREGOR_SASL_PASSWORD": "p"}) == {"sasl.password": "p"}
    assert command_config(None, {}) == {}


def test_x_wins_and_a_missing_file_is_a_clear_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GREGOR_COMMAND_CONFIG", str(tmp_path / "missing.properties"))
    args = argparse.Namespace(bootstrap_server="h:1", command_config=None, overrides=[])
    with pytest.raises(CommandError, match="--command-config .*missing.properties"):
        client_config(args)
    monkeypatch.setenv(
        "GREGOR_COMMAND_CONFIG", _props(tmp_path / "c.properties", sasl_password="file")
    )
    monkeypatch.setenv("GREGOR_SASL_PASSWORD", "env")
    args.overrides = ["sasl.password=x-flag"]
    assert client_config(args)["sasl.password"] == "x-flag"
    args.overrides = []
    assert client_config(args)["sasl.password"] == "env"


def test_servers_ignore_the_client_variables(tmp_path) -> None:
    env = {
        "GREGOR_COMMAND_CONFIG": "/x.properties",
        "GREGOR_SASL_USERNAME": "u",
        "GREGOR_SASL_PASSWORD": "p",
        "GREGOR_USER_PASSWORD": "p",
        "GREGOR_LOG_DIRS": str(tmp_path),
    }
    cfg = load_config("broker", None, env)
    assert cfg.log_dirs == (str(tmp_path),)
