"""The one registry of every config key, assembled from the per-area keys_*.py modules.

A key is declared once (ConfigKey) and read by YAML loading, environment overrides, CLI
overrides, the client library and docs/configuration.md. To add a key, add one `key(...)` line
to the keys_*.py module of its area and run `python -m client.config.docs`.

Duplicate names (or aliases) across modules fail loudly at import. Immutable after import;
any thread may read.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from client.config.keydef import ROLES, SERVER_ROLES, ConfigKey, UnitAlias, attr_name, env_name

# (module, area title) in documentation order.
KEY_MODULES: tuple[tuple[str, str], ...] = (
    ("client.config.keys_server", "Server: identity, listeners, network, topics"),
    ("client.config.keys_log", "Log storage"),
    ("client.config.keys_replication", "Replication"),
    ("client.config.keys_controller", "Controller quorum and metadata"),
    ("client.config.keys_group", "Consumer groups and offsets"),
    ("client.config.keys_txn", "Transaction coordinator"),
    ("client.config.keys_client", "Clients: producer, consumer, admin"),
)


class Registry:
    """Name -> ConfigKey, with aliases, attribute names and environment names resolved."""

    def __init__(self, areas: Sequence[tuple[str, Sequence[ConfigKey]]]) -> None:
        self.areas: list[tuple[str, list[ConfigKey]]] = []
        self.keys: dict[str, ConfigKey] = {}
        self.by_alias: dict[str, ConfigKey] = {}
        self.by_attr: dict[str, ConfigKey] = {}
        self.by_env: dict[str, ConfigKey] = {}
        # Kafka's coarser-unit names (log.retention.hours): by dotted name, attribute, env name.
        self.unit_aliases: dict[str, UnitAlias] = {}
        self.unit_alias_by_attr: dict[str, UnitAlias] = {}
        self.unit_alias_by_env: dict[str, UnitAlias] = {}
        for title, keys in areas:
            placed = []
            for k in keys:
                k = ConfigKey(**{**k.__dict__, "area": title})
                for n in (k.name, *k.aliases):
                    assert n not in self.by_alias, f"config key {n!r} declared twice"
                    self.by_alias[n] = k
                    assert attr_name(n) not in self.by_attr, f"attribute of {n!r} clashes"
                    self.by_attr[attr_name(n)] = k
                    self.by_env[env_name(n)] = k
                for rank, (n, unit_ms) in enumerate(k.unit_aliases, 1):
                    assert n not in self.by_alias and n not in self.unit_aliases, n
                    ua = UnitAlias(n, k, unit_ms, rank)
                    self.unit_aliases[n] = ua
                    self.unit_alias_by_attr[attr_name(n)] = ua
                    self.unit_alias_by_env[env_name(n)] = ua
                self.keys[k.name] = k
                placed.append(k)
            self.areas.append((title, placed))

    def get(self, name: str) -> ConfigKey | None:
        """By dotted name or alias."""
        return self.by_alias.get(name)

    def unit_alias(self, name: str) -> UnitAlias | None:
        """By dotted name, or snake_case attribute name."""
        return self.unit_aliases.get(name) or self.unit_alias_by_attr.get(name)

    def for_role(self, role: str) -> dict[str, ConfigKey]:
        """Keys a process of `role` accepts. Server roles share one set: a process's
        process.roles may combine broker and controller."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")
        wanted = SERVER_ROLES if role in SERVER_ROLES else (role,)
        return {n: k for n, k in self.keys.items() if any(r in wanted for r in k.roles)}


def _load() -> Registry:
    areas = []
    for module, title in KEY_MODULES:
        areas.append((title, importlib.import_module(module).KEYS))
    return Registry(areas)


REGISTRY = _load()
