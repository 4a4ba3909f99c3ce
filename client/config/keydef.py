"""ConfigKey: the declaration of one config key, and the `key(...)` one-line form.

Imported by the keys_*.py modules and the registry; pure, immutable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from client.config.types import PARSERS, TYPES, parse_enum

ROLES = ("broker", "controller", "producer", "consumer", "admin")

# Whether a key does what it says (`ConfigKey.status`). A key whose feature is not built yet is
# either REFUSED (a non-default value stops start-up / the client constructor with ConfigError:
# the user relies on it) or IGNORED (a non-default value is accepted with one warning: a tuning
# knob of an absent feature, harmless to leave unapplied). See docs/configuration.md.
IMPLEMENTED = "implemented"
REFUSED = "not yet: refused"
IGNORED = "not yet: ignored"
STATUSES = (IMPLEMENTED, REFUSED, IGNORED)
SERVER_ROLES = ("broker", "controller")
CLIENT_ROLES = ("producer", "consumer", "admin")


@dataclass(frozen=True)
class ConfigKey:
    """One config key. `type` is one of client.config.types.TYPES; `validator` (optional)
    raises ValueError('expected ...') for an out-of-range typed value; `choices` is for enums;
    a default of None means "not set" and None is then accepted as a value."""

    name: str
    type: str
    default: Any
    validator: Callable[[Any], None] | None = None
    doc: str = ""
    roles: tuple[str, ...] = ("broker",)
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    area: str = field(default="", compare=False)
    status: str = IMPLEMENTED
    why: str = ""  # for a key not implemented: what is missing
    # Kafka's names for this key in a coarser time unit, highest precedence first, each with
    # its unit's size in ms: (("log.retention.minutes", 60_000), ("log.retention.hours", ...)).
    # The key itself (and `aliases`) wins over all of them within one source, as in Kafka.
    unit_aliases: tuple[tuple[str, int], ...] = ()

    @property
    def implemented(self) -> bool:
        return self.status == IMPLEMENTED

    def __post_init__(self) -> None:
        assert self.type in TYPES, f"{self.name}: unknown config type {self.type!r}"
        assert self.roles and all(r in ROLES for r in self.roles), f"{self.name}: bad roles"
        assert self.type != "enum" or self.choices, f"{self.name}: enum without choices"
        assert self.doc, f"{self.name}: every key needs a one-line doc"
        assert self.status in STATUSES, f"{self.name}: unknown status {self.status!r}"
        assert self.implemented or self.why, f"{self.name}: say why it is not implemented"
        assert not self.unit_aliases or self.type == "duration_ms", f"{self.name}: unit aliases"

    @property
    def attr(self) -> str:
        """snake_case attribute name (log.segment.bytes -> log_segment_bytes)."""
        return attr_name(self.name)

    def parse(self, value: Any) -> Any:
        """Raw value -> typed value; ValueError('<what was expected>') when it does not fit."""
        if value is None:
            if self.default is None:
                return None
            raise ValueError(_expected(self))
        if self.type == "enum":
            typed = parse_enum(value, self.choices)
        else:
            typed = PARSERS[self.type](value)
        if self.validator is not None:
            self.validator(typed)
        return typed


def _expected(k: ConfigKey) -> str:
    try:
        if k.type == "enum":
            parse_enum(object(), k.choices)
        PARSERS[k.type](object())
    except ValueError as exc:
        return str(exc)
    return k.type  # pragma: no cover


def attr_name(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")


def env_name(name: str) -> str:
    """log.dirs -> GREGOR_LOG_DIRS."""
    return "GREGOR_" + attr_name(name).upper()


def key(
    name: str,
    type: str,
    default: Any,
    doc: str,
    roles: Sequence[str] = ("broker",),
    validator: Callable[[Any], None] | None = None,
    choices: Sequence[str] = (),
    aliases: Sequence[str] = (),
    status: str = IMPLEMENTED,
    why: str = "",
    unit_aliases: Sequence[tuple[str, int]] = (),
) -> ConfigKey:
    """Declare a key (the one-line form used by the keys_*.py modules)."""
    return ConfigKey(
        name,
        type,
        default,
        validator,
        doc,
        tuple(roles),
        tuple(choices),
        tuple(aliases),
        status=status,
        why=why,
        unit_aliases=tuple(unit_aliases),
    )


UNIT_NAMES = {1000: "seconds", 60_000: "minutes", 3_600_000: "hours"}


@dataclass(frozen=True)
class UnitAlias:
    """`log.retention.hours` for `log.retention.ms`: a whole number of `unit_ms` units; `rank` 1
    is the highest precedence after the key itself (rank 0)."""

    name: str
    key: ConfigKey
    unit_ms: int
    rank: int

    @property
    def unit(self) -> str:
        return UNIT_NAMES.get(self.unit_ms, f"units of {self.unit_ms} ms")

    def parse(self, value: Any) -> int:
        """Raw value -> the key's typed value in ms; a negative count is -1 (Kafka: unlimited
        retention), left to the key's validator. ValueError('<expected>') otherwise."""
        try:
            n = PARSERS["int"](value)
        except ValueError:
            raise ValueError(f"a whole number of {self.unit}") from None
        typed = -1 if n < 0 else n * self.unit_ms
        if self.key.validator is not None:
            self.key.validator(typed)
        return typed
