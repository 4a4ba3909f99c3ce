"""Settings that do nothing are not accepted silently (issue 10, item 7).

The registry records per key whether it is implemented. A key marked implemented must be read
somewhere in the code; a key of a feature not built yet is refused when set (ConfigError naming
it) or, where leaving it unapplied is harmless, accepted with one warning.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from client import Consumer
from client.config import load_config
from client.config.keydef import IGNORED, REFUSED, ConfigKey, attr_name, env_name
from client.config.loader import _warned, client_config
from client.config.registry import REGISTRY
from client.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]


def _code() -> str:
    parts = []
    for pkg in ("client", "controller", "broker"):
        for path in (ROOT / pkg).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("client/config/keys_") or rel in (
                "client/config/docs.py",
                "broker/handlers/describe_configs.py",  # lists topic keys' defaults, reads none
                "controller/quorum/topic_configs.py",  # names topic keys' broker twins, reads none
            ):
                continue  # declarations, the docs generator and DescribeConfigs are not readers
            parts.append(path.read_text())
    return "\n".join(parts)


def _is_read(k: ConfigKey, code: str) -> bool:
    for name in (k.name, *k.aliases):
        if re.search(rf"\b{re.escape(attr_name(name))}\b", code) or f'"{name}"' in code:
            return True
    return False


def test_every_key_marked_implemented_is_read_somewhere() -> None:
    code = _code()
    unread = [k.name for k in REGISTRY.keys.values() if k.implemented and not _is_read(k, code)]
    assert not unread, f"marked implemented but read nowhere: {unread}"


def _other_value(k: ConfigKey):
    if k.type == "bool":
        return not k.default
    if k.type == "enum":
        return next(c for c in k.choices if c != k.default)
    if k.type == "list":  # the first candidate its validator accepts
        for candidate in (("compact",), ("roundrobin",), ("something-else",)):
            try:
                if k.parse(candidate) != k.parse(k.default):
                    return candidate
            except ValueError:
                continue
        raise AssertionError(f"no other value for {k.name}")
    if k.type == "str":
        return "something"
    return (k.default or 0) + 1


NOT_YET = [k for k in REGISTRY.keys.values() if not k.implemented]


def test_the_known_no_op_keys_are_marked() -> None:
    for name in ("heartbeat.interval.ms", "partition.assignment.strategy"):
        assert REGISTRY.get(name).status == REFUSED, name


@pytest.mark.parametrize("k", [k for k in NOT_YET if k.status == REFUSED], ids=lambda k: k.name)
def test_refused_keys_stop_with_their_name(k: ConfigKey) -> None:
    role = k.roles[0]
    value = _other_value(k)
    with pytest.raises(ConfigError, match=rf"'{re.escape(k.name)}'.*not supported yet"):
        if role in ("broker", "controller"):
            load_config(role, None, {}, {k.name: value})
        else:
            client_config(role, {k.name: value})
    # the default itself is fine
    if role not in ("broker", "controller"):
        client_config(role, {k.name: k.default})


@pytest.mark.parametrize("k", [k for k in NOT_YET if k.status == IGNORED], ids=lambda k: k.name)
def test_ignored_keys_warn_once(k: ConfigKey, caplog) -> None:
    role = k.roles[0]
    _warned.discard(k.name)
    value = _other_value(k)

    def load() -> None:
        if role in ("broker", "controller"):
            load_config(role, None, {}, {k.name: value})
        else:
            client_config(role, {k.name: value})

    with caplog.at_level(logging.WARNING, logger="client.config.loader"):
        load()
        load()
    said = [r.getMessage() for r in caplog.records if k.name in r.getMessage()]
    assert len(said) == 1 and "has no effect yet" in said[0], said


def test_group_settings_not_built_are_refused() -> None:
    with pytest.raises(ConfigError, match="'heartbeat.interval.ms'.*coordinator sets"):
        Consumer(bootstrap_servers="127.0.0.1:1", group_id="g", heartbeat_interval_ms=1000)
    with pytest.raises(ConfigError, match="group_id"):
        Consumer(bootstrap_servers="127.0.0.1:1").subscribe(["t"], on_assign=print)
    Consumer(bootstrap_servers="127.0.0.1:1", group_id="g", enable_auto_commit=False).close()


def test_idempotence_settings() -> None:
    """On by default (Kafka 3's rule); asked for explicitly it must not conflict; left at its
    default, a conflicting setting turns it off."""

    def idempotent(*args, **kw) -> bool:
        from client import aio

        return aio.Producer(*args, bootstrap_servers="127.0.0.1:1", **kw)._idempotent

    assert idempotent()
    assert not idempotent(acks=1)
    assert not idempotent(enable_idempotence=False)
    with pytest.raises(ConfigError, match="enable.idempotence=true conflicts with acks=1"):
        idempotent(enable_idempotence=True, acks=1)
    with pytest.raises(ConfigError, match="max.in.flight.requests.per.connection=6"):
        idempotent({"enable.idempotence": True, "max.in.flight.requests.per.connection": 6})


def _yaml_scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


SERVER_NOT_YET = [k for k in NOT_YET if k.roles[0] in ("broker", "controller")]
CLIENT_NOT_YET = [k for k in NOT_YET if k.roles[0] not in ("broker", "controller")]


@pytest.mark.parametrize("source", ["yaml", "env"])
@pytest.mark.parametrize("k", SERVER_NOT_YET, ids=lambda k: k.name)
def test_server_file_and_environment_are_checked_too(k, source, tmp_path, caplog) -> None:
    """The YAML file and GREGOR_* variables go through the same check as overrides: a refused
    key stops loading naming the key and where it was set; an ignored one warns once."""
    role = k.roles[0]
    text = _yaml_scalar(_other_value(k))
    path, env = None, {}
    if source == "yaml":
        path = tmp_path / "node.yaml"
        path.write_text(f'{k.name}: "{text}"\n')
        where = f"config file {path}"
    else:
        env = {env_name(k.name): text}
        where = f"environment variable {env_name(k.name)}"
    _warned.discard(k.name)
    if k.status == REFUSED:
        with pytest.raises(
            ConfigError, match=rf"'{re.escape(k.name)}' \(set by {re.escape(where)}\)"
        ):
            load_config(role, path, env)
        return
    with caplog.at_level(logging.WARNING, logger="client.config.loader"):
        load_config(role, path, env)
    said = [r.getMessage() for r in caplog.records if k.name in r.getMessage()]
    assert len(said) == 1 and where in said[0] and "has no effect yet" in said[0], said


@pytest.mark.parametrize("k", CLIENT_NOT_YET, ids=lambda k: k.name)
def test_client_keyword_arguments_are_checked_too(k) -> None:
    """Producer(enable_idempotence=True)-style snake_case kwargs, not only dotted dicts."""
    kwargs = {attr_name(k.name): _other_value(k)}
    if k.status == REFUSED:
        with pytest.raises(ConfigError, match=rf"'{re.escape(k.name)}'.*not supported yet"):
            client_config(k.roles[0], **kwargs)
    else:
        _warned.discard(k.name)
        client_config(k.roles[0], **kwargs)  # accepted (test_ignored_keys_warn_once: the warning)
