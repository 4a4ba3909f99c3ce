"""Config value types: parsing from YAML / environment / flag values, and validators.

Every parser takes a raw value (a YAML scalar or list, or a string from the environment or a
flag) and returns the typed value, or raises ValueError whose message says what was expected.
The registry turns that into a ConfigError naming the key, the value and where it came from.

    int          42, "42", "1_000"                              -> int
    float        0.5, "0.5", 3                                  -> float
    bool         true/false, yes/no, on/off, 1/0 (any case)     -> bool
    str          any scalar                                     -> str
    list         "a,b,c" or a YAML list                         -> tuple[str, ...]
    size         1GiB, 512MiB, 10KiB (1024-based), 10KB, 5MB (1000-based), 100B, plain ints
                                                                -> int bytes
    duration_ms  7d, 2h, 30m / 30min, 10s, 500ms, 1.5s, plain ints meaning ms -> int ms
    enum         one of the key's choices (case-insensitive)   -> the choice as declared

Pure functions; any thread may call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

TYPES = ("int", "float", "bool", "str", "list", "size", "duration_ms", "enum")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}

SIZE_UNITS = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
DURATION_UNITS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 7 * 86_400_000,
}
_NUMBER_UNIT = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_int(value: Any) -> int:
    if _is_int(value):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError("an integer")


def parse_float(value: Any) -> float:
    if _is_int(value) or isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ValueError("a number")


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if _is_int(value) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    raise ValueError("a boolean (true/false, yes/no, on/off, 1/0)")


def parse_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if _is_int(value) or isinstance(value, float):
        return str(value)
    raise ValueError("a string")


def parse_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, (list, tuple)):
        out = []
        for item in value:
            if isinstance(item, (dict, list, tuple)) or item is None or isinstance(item, bool):
                raise ValueError("a list of strings (comma-separated or a YAML list)")
            s = str(item).strip()
            if s:
                out.append(s)
        return tuple(out)
    raise ValueError("a list (comma-separated string or a YAML list)")


def _with_unit(value: Any, units: dict[str, int], default_unit: int, what: str) -> int:
    if _is_int(value):
        return value * default_unit
    if isinstance(value, float) and value.is_integer():
        return int(value) * default_unit
    if isinstance(value, str):
        m = _NUMBER_UNIT.match(value.replace("_", ""))
        if m:
            number, unit = m.group(1), m.group(2).lower()
            factor = units.get(unit) if unit else default_unit
            if factor is not None:
                result = float(number) * factor if "." in number else int(number) * factor
                if result == int(result):
                    return int(result)
    raise ValueError(what)


def parse_size(value: Any) -> int:
    return _with_unit(
        value, SIZE_UNITS, 1, "a size in bytes (e.g. 1048576, 512KiB, 100MiB, 1GiB, 10KB, 5MB)"
    )


def parse_duration_ms(value: Any) -> int:
    return _with_unit(
        value,
        DURATION_UNITS,
        1,
        "a duration (e.g. 500ms, 10s, 5m, 2h, 7d, or a plain integer of milliseconds)",
    )


def parse_enum(value: Any, choices: Sequence[str]) -> str:
    if isinstance(value, bool):
        # YAML 1.1 (PyYAML) reads an unquoted off/no as False and on/yes as True: a choice
        # spelled that way is what the file meant (auto.balance.mode: off)
        for word in ("on", "yes", "true") if value else ("off", "no", "false"):
            for choice in choices:
                if choice.lower() == word:
                    return choice
        raise ValueError("one of " + ", ".join(choices))
    if isinstance(value, (str, int, float)):
        v = str(value).strip().lower()
        for choice in choices:
            if choice.lower() == v:
                return choice
    raise ValueError("one of " + ", ".join(choices))


PARSERS: dict[str, Callable[[Any], Any]] = {
    "int": parse_int,
    "float": parse_float,
    "bool": parse_bool,
    "str": parse_str,
    "list": parse_list,
    "size": parse_size,
    "duration_ms": parse_duration_ms,
}


def format_size(n: int) -> str:
    """1073741824 -> '1GiB'; values that are not whole units stay plain."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


def format_duration_ms(n: int) -> str:
    """604800000 -> '7d'; 1500 -> '1500ms'."""
    for unit, factor in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if n and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}ms"


# -- validators: callables raising ValueError("expected ..."); str() describes them in the docs.


class Validator:
    def __init__(self, check: Callable[[Any], bool], description: str) -> None:
        self._check = check
        self.description = description

    def __call__(self, value: Any) -> None:
        if not self._check(value):
            raise ValueError(self.description)

    def __str__(self) -> str:
        return self.description


def at_least(lo: int | float) -> Validator:
    return Validator(lambda v: v >= lo, f">= {lo}")


def in_range(lo: int | float, hi: int | float) -> Validator:
    return Validator(lambda v: lo <= v <= hi, f"between {lo} and {hi}")


def at_least_or_minus_one(lo: int) -> Validator:
    """>= lo, or -1 meaning unlimited / not set."""
    return Validator(lambda v: v == -1 or v >= lo, f">= {lo}, or -1")


def non_empty() -> Validator:
    return Validator(lambda v: len(v) > 0, "a non-empty value")


def items_in(choices: Sequence[str]) -> Validator:
    return Validator(
        lambda v: len(v) > 0 and all(i in choices for i in v),
        "a non-empty list of " + ", ".join(choices),
    )


_HOST_PORT = re.compile(
    r"^(?:[A-Za-z_][A-Za-z0-9_]*://)?(\[[0-9a-fA-F:.]+\]|[^:\s\[\]]*):(\d{1,5})$"
)
_VOTER = re.compile(r"^\d+@(\[[0-9a-fA-F:.]+\]|[^:\s\[\]@]+):(\d{1,5})$")


def host_ports() -> Validator:
    """Each item HOST:PORT or NAME://HOST:PORT (e.g. PLAINTEXT://127.0.0.1:9092, [::1]:9092)."""
    return Validator(
        lambda v: (
            len(v) > 0 and all((m := _HOST_PORT.match(i)) and int(m.group(2)) <= 65535 for i in v)
        ),
        "HOST:PORT[,HOST:PORT...] (optionally NAME://HOST:PORT)",
    )


def voters() -> Validator:
    """`1@host:9093,2@host:9094`: node id @ host : port, comma-separated."""
    return Validator(
        lambda v: (
            v == ""
            or all(
                (m := _VOTER.match(p.strip())) and int(m.group(2)) <= 65535 for p in v.split(",")
            )
        ),
        "ID@HOST:PORT[,ID@HOST:PORT...]",
    )


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MAP_ITEM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*:([A-Za-z_]+)$")


def protocol_map() -> Validator:
    """`NAME:PROTOCOL[,...]` (listener.security.protocol.map), PROTOCOL one of Kafka's four."""
    return Validator(
        lambda v: all(
            (m := _MAP_ITEM.match(i)) and m.group(1).upper() in SECURITY_PROTOCOLS for i in v
        ),
        "NAME:PROTOCOL[,NAME:PROTOCOL...] with PROTOCOL one of " + ", ".join(SECURITY_PROTOCOLS),
    )


_HTTP_LISTENER = re.compile(r"^http://(\[[0-9a-fA-F:.]+\]|[^:/\s\[\]]+):(\d{1,5})/?$")


def parse_http_listener(value: str) -> tuple[str, int] | None:
    """`http://HOST:PORT` (IPv6 in brackets; port 0 picks a free one) -> (host, port); "" or
    None -> None (off). ValueError("expected ...") for anything else (another scheme, a path,
    no port, a port above 65535)."""
    if not value:
        return None
    m = _HTTP_LISTENER.match(value.strip())
    if m is None or int(m.group(2)) > 65535:
        raise ValueError("expected empty (off) or http://HOST:PORT, e.g. http://127.0.0.1:9404")
    host = m.group(1)
    if host.startswith("["):
        host = host[1:-1]
    return host, int(m.group(2))


def http_listener() -> Validator:
    """Empty (off) or http://HOST:PORT (parse_http_listener)."""

    def check(v: Any) -> bool:
        try:
            parse_http_listener(v)
        except ValueError:
            return False
        return True

    return Validator(check, "empty (off), or http://HOST:PORT")
