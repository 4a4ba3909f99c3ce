"""Gregor's configuration: one registry of every key (docs/architecture.md §12).

    load_config(role, path=None, env=os.environ, overrides=None) -> Config
    client_config(role, {"linger.ms": 10}) / client_config(role, linger_ms=10) -> Config
    REGISTRY.keys["log.segment.bytes"] -> ConfigKey(name, type, default, validator, doc, roles)

Keys are declared in client/config/keys_*.py (one line each); `python -m client.config.docs`
regenerates docs/configuration.md from them.
"""

from client.config.keydef import CLIENT_ROLES, ROLES, SERVER_ROLES, ConfigKey, env_name, key
from client.config.loader import (
    RESERVED_ENV,
    Config,
    client_config,
    load_config,
    parse_override_args,
    read_yaml,
    setting,
)
from client.config.registry import REGISTRY, Registry

__all__ = [
    "CLIENT_ROLES",
    "REGISTRY",
    "RESERVED_ENV",
    "ROLES",
    "SERVER_ROLES",
    "Config",
    "ConfigKey",
    "Registry",
    "client_config",
    "env_name",
    "key",
    "load_config",
    "parse_override_args",
    "read_yaml",
    "setting",
]
