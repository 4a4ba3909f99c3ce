"""Loading a typed, immutable Config: defaults < YAML file < environment < overrides.

    cfg = load_config("broker", "config/single-node.yaml", os.environ, {"num.io.threads": "4"})
    cfg.num_io_threads, cfg["log.segment.bytes"], cfg.with_overrides({"log.dirs": "/data"})

- YAML: a mapping of Kafka's dotted names (nested mappings are flattened: `log: {dirs: x}`
  is `log.dirs`). Unknown keys are an error naming the closest known key.
- Environment: `GREGOR_` + the upper-cased key with `.` -> `_` (GREGOR_LOG_DIRS for log.dirs).
  A GREGOR_ variable matching no key at all is an error naming the closest key, except the
  variables of RESERVED_ENV (test seeds, the venv path). A variable naming a key of another
  role (GREGOR_ACKS for a broker) is ignored: one shell may carry several processes' settings.
- Overrides (CLI flags): dotted names (snake_case names are accepted too).

Server roles (broker, controller) accept each other's keys, since process.roles may combine
them; a client role accepts its own keys. Errors are ConfigError naming the key, the value, where
it came from and what was expected. Config objects are immutable; any thread may read them.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from client.config.keydef import CLIENT_ROLES, REFUSED, ConfigKey, attr_name
from client.config.registry import REGISTRY
from client.errors import ConfigError

_log = logging.getLogger(__name__)

# GREGOR_* variables that are not config keys (set by tests and scripts).
RESERVED_ENV = frozenset({"GREGOR_SEED", "GREGOR_CRASH_SEED", "GREGOR_SIM_SEEDS", "GREGOR_VENV"})


def _closest(name: str, candidates: list[str]) -> str | None:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return close[0] if close else None


def _unknown(name: str, source: str, role: str) -> ConfigError:
    shown = name
    known = REGISTRY.get(name) or REGISTRY.by_attr.get(name)
    if known is not None:
        return ConfigError(
            f"config key '{known.name}' in {source} is not used by a {role} "
            f"(it is a {'/'.join(known.roles)} key)"
        )
    close = _closest(name, list(REGISTRY.by_alias)) or _closest(
        name.replace("_", "."), list(REGISTRY.by_alias)
    )
    hint = f" — did you mean '{close}'?" if close else ""
    return ConfigError(f"unknown config key '{shown}' in {source}{hint}")


def _parse(k: ConfigKey, value: Any, source: str) -> Any:
    try:
        return k.parse(value)
    except ValueError as exc:
        raise ConfigError(
            f"invalid value {value!r} for config key '{k.name}' in {source}: expected {exc}"
        ) from None


def _flatten(data: Mapping[str, Any], source: str, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in data.items():
        if not isinstance(name, str):
            raise ConfigError(f"config key {name!r} in {source} is not a string")
        full = f"{prefix}{name}"
        if isinstance(value, Mapping) and REGISTRY.get(full) is None:
            out.update(_flatten(value, source, full + "."))
        else:
            out[full] = value
    return out


def read_yaml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The flat {dotted name: raw value} of a YAML config file (ConfigError if malformed)."""
    import yaml

    with open(path) as f:
        try:
            data = yaml.safe_load(f)
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"config file {path}: expected a mapping of config keys, got {type(data).__name__}"
        )
    return _flatten(data, f"config file {path}")


class Config(Mapping[str, Any]):
    """Typed, immutable settings of one component: `cfg.log_segment_bytes` or
    `cfg["log.segment.bytes"]` (aliases work both ways). Iterates over dotted names."""

    __slots__ = ("_role", "_values", "_sources")

    def __init__(self, role: str, values: dict[str, Any], sources: dict[str, str]) -> None:
        object.__setattr__(self, "_role", role)
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_sources", sources)

    @property
    def role(self) -> str:
        return self._role

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # dunder probes (copy, pickle) and unset slots
            raise AttributeError(attr)
        k = REGISTRY.by_attr.get(attr)
        if k is not None and k.name in self._values:
            return self._values[k.name]
        close = _closest(attr, [a for a, k in REGISTRY.by_attr.items() if k.name in self._values])
        hint = f"; did you mean {close!r}?" if close else ""
        raise AttributeError(f"{self._role} config has no setting {attr!r}{hint}")

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError("Config is immutable; use with_overrides()")

    def __getitem__(self, name: str) -> Any:
        k = REGISTRY.get(name)
        if k is None or k.name not in self._values:
            raise KeyError(name)
        return self._values[k.name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        changed = {n: v for n, v in self._values.items() if self._sources[n] != "default"}
        return f"Config(role={self._role!r}, non-defaults={changed!r})"

    def __reduce__(self) -> Any:  # picklable (e.g. handed to a subprocess)
        return (Config, (self._role, self._values, self._sources))

    def source(self, name: str) -> str:
        """Where a value came from: 'default', 'config file X', 'environment GREGOR_Y', 'override'."""
        k = REGISTRY.get(name)
        if k is None or k.name not in self._sources:
            raise KeyError(name)
        return self._sources[k.name]

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def with_overrides(self, overrides: Mapping[str, Any], source: str = "override") -> Config:
        """A new Config with `overrides` (dotted or snake_case names) applied on top."""
        values = dict(self._values)
        sources = dict(self._sources)
        _apply(self._role, values, sources, overrides, source)
        return Config(self._role, values, sources)


def _resolve(role: str, name: str, source: str) -> ConfigKey:
    k = REGISTRY.get(name)
    if k is None and "." not in name:
        k = REGISTRY.by_attr.get(name)
    if k is None or not _accepts(role, k):
        raise _unknown(name, source, role)
    return k


def _accepts(role: str, k: ConfigKey) -> bool:
    return k.name in REGISTRY.for_role(role)


def _apply(
    role: str,
    values: dict[str, Any],
    sources: dict[str, str],
    layer: Mapping[str, Any],
    source: str,
) -> None:
    for name, raw in layer.items():
        k = _resolve(role, str(name), source)
        values[k.name] = _parse(k, raw, source)
        sources[k.name] = source


def load_config(
    role: str,
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """defaults < YAML file at `path` < `env` GREGOR_* variables < `overrides` (dotted names).

    `env` defaults to os.environ; pass {} to ignore the environment. Raises ConfigError.
    """
    keys = REGISTRY.for_role(role)
    values = {n: k.default if k.default is None else k.parse(k.default) for n, k in keys.items()}
    sources = dict.fromkeys(keys, "default")
    if path is not None:
        _apply(role, values, sources, read_yaml(path), f"config file {path}")
    env = os.environ if env is None else env
    for var, raw in env.items():
        if not var.startswith("GREGOR_") or var in RESERVED_ENV:
            continue
        k = REGISTRY.by_env.get(var)
        if k is None:
            close = _closest(var, list(REGISTRY.by_env))
            hint = f" — did you mean {close} ({REGISTRY.by_env[close].name})?" if close else ""
            raise ConfigError(
                f"environment variable {var} matches no config key{hint} "
                f"(GREGOR_ + the key upper-cased with '.' -> '_')"
            )
        if k.name in keys:
            values[k.name] = _parse(k, raw, f"environment {var}")
            sources[k.name] = f"environment {var}"
    if overrides:
        _apply(role, values, sources, overrides, "override")
    _check_implemented(keys, values, sources)
    return Config(role, values, sources)


_warned: set[str] = set()  # IGNORED keys already warned about in this process


def _check_implemented(
    keys: Mapping[str, ConfigKey], values: Mapping[str, Any], sources: Mapping[str, str]
) -> None:
    """A key whose feature is not built yet, set to anything but its default: ConfigError for
    a REFUSED key, one warning per process for an IGNORED one (keydef.py)."""
    for name, k in keys.items():
        if k.implemented or sources[name] == "default":
            continue
        default = k.default if k.default is None else k.parse(k.default)
        if values[name] == default:
            continue
        if k.status == REFUSED:
            raise ConfigError(
                f"config key '{name}' ({sources[name]}) is not supported yet: {k.why}"
            )
        if name not in _warned:
            _warned.add(name)
            _log.warning("config key '%s' (%s) has no effect yet: %s", name, sources[name], k.why)


def client_config(role: str, settings: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Config:
    """Client settings from Kafka's dotted names in a dict and/or snake_case keyword arguments:

        client_config("producer", {"bootstrap.servers": "h:9092", "linger.ms": 10})
        client_config("producer", bootstrap_servers="h:9092", linger_ms=10)

    No file and no environment: a library's settings come from its caller. Raises ConfigError.
    """
    if role not in CLIENT_ROLES:
        raise ValueError(f"client_config: role must be one of {', '.join(CLIENT_ROLES)}")
    layer: dict[str, Any] = dict(settings or {})
    for name, value in kwargs.items():
        k = REGISTRY.by_attr.get(name)
        layer[k.name if k is not None else name] = value
    return load_config(role, None, {}, layer)


def parse_override_args(items: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`["num.io.threads=4", "log.dirs=/d"]` (repeated --override flags) -> a dict for
    load_config's `overrides`; ConfigError for an item without `=` or without a key."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
        out[name.strip()] = value
    return out


__all__ = [
    "parse_override_args",
    "RESERVED_ENV",
    "Config",
    "attr_name",
    "client_config",
    "load_config",
    "read_yaml",
]
