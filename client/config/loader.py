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
- Kafka's names for a duration key in a coarser unit (`log.retention.hours`, `log.retention.minutes`
  for `log.retention.ms`) are accepted in every layer, a whole number of that unit. Within one
  layer the key's own name wins, then the finer unit (ms > minutes > hours), as in Kafka, and the
  losers are logged; across layers the later layer wins as for any key.
- An unknown key that Kafka knows (`ssl.truststore.location`, `interceptor.classes`...) is an
  error saying so and what Gregor does instead (kafka_keys.py).

Every value remembers where it came from (`Config.source`): `config file PATH`, `environment
variable GREGOR_X`, or what the caller named its overrides (`command-line --override`, `the
producer's config dict`...), and errors name it.

Server roles (broker, controller) accept each other's keys, since process.roles may combine
them; a client role accepts its own keys. Errors are ConfigError naming the key, the value, where
it came from and what was expected. Config objects are immutable; any thread may read them.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from client.config.kafka_keys import explain
from client.config.keydef import CLIENT_ROLES, REFUSED, ConfigKey, UnitAlias, attr_name
from client.config.registry import REGISTRY
from client.errors import ConfigError

_log = logging.getLogger(__name__)

# GREGOR_* variables that are not config keys (set by tests and scripts), so that one left
# exported in a shell (scripts/test-long.sh's GREGOR_LONG_TESTS, a test seed) does not stop
# every gregor process started from it (tests/unit/config/test_load.py holds the list to the
# names the tests and scripts read).
# (GREGOR_COMMAND_CONFIG and GREGOR_USER_PASSWORD: read by the client commands, docs/security.md)
RESERVED_ENV = frozenset(
    {
        "GREGOR_SEED",
        "GREGOR_CRASH_SEED",
        "GREGOR_SIM_SEEDS",
        "GREGOR_VENV",
        "GREGOR_COMMAND_CONFIG",
        "GREGOR_USER_PASSWORD",
        # the test runners and the test suite (scripts/test.sh, scripts/test-long.sh, tests/)
        "GREGOR_LONG_TESTS",
        "GREGOR_TEST_WORKERS",
        "GREGOR_NO_EXTENSIONS",
        "GREGOR_TEST_SEED",
        "GREGOR_REPLICATION_SIM_SEEDS",
        "GREGOR_SIM_MEMBERSHIP_SEEDS",
        "GREGOR_POWER_SEED",
        "GREGOR_EOS_SEED",
        "GREGOR_CONCURRENCY_RECORDS",
        "GREGOR_COMPAT_CACHE",
        "GREGOR_CHAOS_NETNS",
    }
)


def _closest(name: str, candidates: list[str]) -> str | None:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return close[0] if close else None


def _unknown(name: str, source: str, role: str) -> ConfigError:
    ua = REGISTRY.unit_alias(name)
    known = REGISTRY.get(name) or REGISTRY.by_attr.get(name) or (ua.key if ua else None)
    if known is not None:
        shown = ua.name if ua is not None else known.name
        return ConfigError(
            f"config key '{shown}' (from {source}) is not used by a {role} "
            f"(it is a {'/'.join(known.roles)} key)"
        )
    why = explain(name)
    if why is not None:
        return ConfigError(
            f"config key '{name}' (from {source}) is a Kafka key that Gregor does not have: {why}"
        )
    candidates = [*REGISTRY.by_alias, *REGISTRY.unit_aliases]
    close = _closest(name, candidates) or _closest(name.replace("_", "."), candidates)
    hint = f" — did you mean '{close}'?" if close else ""
    return ConfigError(f"unknown config key '{name}' (from {source}){hint}")


def _parse(k: ConfigKey | UnitAlias, value: Any, source: str) -> Any:
    try:
        return k.parse(value)
    except ValueError as exc:
        what = (
            f"'{k.name}'" if isinstance(k, ConfigKey) else f"'{k.name}' ({k.key.name} in {k.unit})"
        )
        raise ConfigError(
            f"invalid value {value!r} for config key {what} from {source}: expected {exc}"
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


def setting(config: Any, attr: str, default: Any) -> Any:
    """`config.<attr>`, or `default` when the config has no such setting or it is None: for
    code that takes a Config or a plain namespace (tests, embedded defaults) where a key may be
    absent for its role."""
    try:
        value = getattr(config, attr)
    except (AttributeError, KeyError):
        return default
    return default if value is None else value


class Config(Mapping[str, Any]):
    """Typed, immutable settings of one component: `cfg.log_segment_bytes` or
    `cfg["log.segment.bytes"]` (aliases work both ways). Iterates over dotted names."""

    __slots__ = ("_role", "_values", "_sources")
    _role: str
    _values: dict[str, Any]
    _sources: dict[str, str]

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
        """Where a value came from: 'default', 'config file X', 'environment variable GREGOR_Y',
        the overrides' source ('command-line --override'), or 'ALIAS in SOURCE' when it was
        given as a coarser-unit alias ('log.retention.hours in config file X')."""
        k = REGISTRY.get(name)
        if k is None or k.name not in self._sources:
            raise KeyError(name)
        return self._sources[k.name]

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def with_overrides(
        self, overrides: Mapping[str, Any], source: str = "the with_overrides() argument"
    ) -> Config:
        """A new Config with `overrides` (dotted or snake_case names) applied on top."""
        values = dict(self._values)
        sources = dict(self._sources)
        _apply(self._role, values, sources, [(str(n), v, source) for n, v in overrides.items()])
        return Config(self._role, values, sources)


def _resolve(role: str, name: str, source: str) -> tuple[ConfigKey, UnitAlias | None]:
    """The key `name` sets, and the unit alias it was given as (None: the key or a same-unit
    alias). ConfigError for a name this role does not take."""
    k = REGISTRY.get(name)
    if k is None and "." not in name:
        k = REGISTRY.by_attr.get(name)
    ua = REGISTRY.unit_alias(name) if k is None else None
    if ua is not None:
        k = ua.key
    if k is None or not _accepts(role, k):
        raise _unknown(name, source, role)
    return k, ua


def _accepts(role: str, k: ConfigKey) -> bool:
    return k.name in REGISTRY.for_role(role)


def _apply(
    role: str,
    values: dict[str, Any],
    sources: dict[str, str],
    layer: Iterable[tuple[str, Any, str]],
) -> None:
    """One layer of (name as given, raw value, source). Within it a key's own name wins over
    Kafka's coarser-unit names for it (ms > minutes > hours), whatever their order; the
    shadowed ones are still validated, and logged."""
    chosen: dict[str, tuple[int, str, Any, str]] = {}  # key -> (rank, name given, value, source)
    for name, raw, source in layer:
        k, ua = _resolve(role, name, source)
        rank = 0 if ua is None else ua.rank
        typed = _parse(k if ua is None else ua, raw, source)
        prev = chosen.get(k.name)
        if prev is not None and prev[0] != rank:
            win, lose = (prev, (rank, name, typed, source))
            if rank < prev[0]:
                win, lose = lose, win
            _log.warning(
                "config key '%s' (%s) is ignored: '%s' (%s) sets %s too and takes precedence,"
                " as in Kafka",
                lose[1], lose[3], win[1], win[3], k.name,
            )  # fmt: skip
            if win is prev:
                continue
        chosen[k.name] = (rank, name, typed, source)
    for key_name, (rank, given, typed, source) in chosen.items():
        values[key_name] = typed
        sources[key_name] = source if rank == 0 else f"{given} in {source}"


def load_config(
    role: str,
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    overrides_source: str | Mapping[str, str] = "the overrides argument",
) -> Config:
    """defaults < YAML file at `path` < `env` GREGOR_* variables < `overrides` (dotted names).

    `env` defaults to os.environ; pass {} to ignore the environment. `overrides_source` says
    where the overrides came from, for errors and `Config.source` (`command-line --override`),
    as one string or per name. Raises ConfigError.
    """
    keys = REGISTRY.for_role(role)
    values = {n: k.default if k.default is None else k.parse(k.default) for n, k in keys.items()}
    sources = dict.fromkeys(keys, "default")
    if path is not None:
        source = f"config file {path}"
        _apply(role, values, sources, [(n, v, source) for n, v in read_yaml(path).items()])
    env = os.environ if env is None else env
    layer = []
    for var, raw in env.items():
        if not var.startswith("GREGOR_") or var in RESERVED_ENV:
            continue
        k = REGISTRY.by_env.get(var)
        ua = REGISTRY.unit_alias_by_env.get(var)
        if k is not None:
            target, given = k, k.name
        elif ua is not None:
            target, given = ua.key, ua.name
        else:
            named = {v: key.name for v, key in REGISTRY.by_env.items()}
            named.update({v: u.name for v, u in REGISTRY.unit_alias_by_env.items()})
            close = _closest(var, list(named))
            hint = f" — did you mean {close} ({named[close]})?" if close else ""
            raise ConfigError(
                f"environment variable {var} matches no config key{hint} "
                f"(GREGOR_ + the key upper-cased with '.' -> '_')"
            )
        if target.name in keys:
            layer.append((given, raw, f"environment variable {var}"))
    _apply(role, values, sources, layer)
    if overrides:
        by_name = overrides_source if isinstance(overrides_source, Mapping) else {}
        default = (
            overrides_source if isinstance(overrides_source, str) else "the overrides argument"
        )
        layer = [(str(n), v, by_name.get(str(n), default)) for n, v in overrides.items()]
        _apply(role, values, sources, layer)
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
                f"config key '{name}' (set by {sources[name]}) is not supported yet: {k.why}"
            )
        if name not in _warned:
            _warned.add(name)
            _log.warning(
                "config key '%s' (set by %s) has no effect yet: %s", name, sources[name], k.why
            )


def client_config(role: str, settings: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Config:
    """Client settings from Kafka's dotted names in a dict and/or snake_case keyword arguments:

        client_config("producer", {"bootstrap.servers": "h:9092", "linger.ms": 10})
        client_config("producer", bootstrap_servers="h:9092", linger_ms=10)

    No file and no environment: a library's settings come from its caller. Raises ConfigError.
    """
    if role not in CLIENT_ROLES:
        raise ValueError(f"client_config: role must be one of {', '.join(CLIENT_ROLES)}")
    layer: dict[str, Any] = dict(settings or {})
    given = {str(n): f"the {role}'s config dict" for n in layer}
    for name, value in kwargs.items():
        k = REGISTRY.by_attr.get(name)
        layer[k.name if k is not None else name] = value
        given[k.name if k is not None else name] = f"the {role}'s keyword argument {name}"
    return load_config(role, None, {}, layer, overrides_source=given)


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
    "RESERVED_ENV",
    "Config",
    "attr_name",
    "client_config",
    "load_config",
    "parse_override_args",
    "read_yaml",
]
