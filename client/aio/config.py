"""Client configuration: Kafka's dotted names in a dict, or snake_case keyword arguments.

    Producer({"bootstrap.servers": "localhost:9092", "linger.ms": 10})
    Producer(bootstrap_servers="localhost:9092", linger_ms=10)

Both spellings resolve to one `ClientConfig` with snake_case attributes (units last). Unknown
keys, wrong types and out-of-range values raise ConfigError naming the key, the value, what was
expected and the closest known key.

INTERIM: this is a thin local table until `client.config.client_config` (H-records/config)
covers the client roles; `resolve_config` switches to it when it is importable and knows the
role, so callers never change.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from client.errors import ConfigError

MiB = 1024 * 1024


@dataclass(frozen=True)
class Key:
    name: str  # snake_case
    default: Any
    kind: type | tuple[type, ...]
    doc: str = ""
    lo: int | None = None
    choices: tuple[Any, ...] | None = None


def _k(name: str, default: Any, kind: Any, doc: str = "", lo: int | None = None, choices=None):
    return Key(name, default, kind, doc, lo, choices)


_CALLABLE = (type(None), Callable)  # type: ignore[arg-type]

COMMON = [
    _k("bootstrap_servers", "localhost:9092", (str, list, tuple), "host:port[,host:port...]"),
    _k("client_id", None, (str, type(None)), "sent with every request; default gregor-ROLE-N"),
    _k("request_timeout_ms", 30_000, int, "how long to wait for any response", lo=1),
    _k("metadata_max_age_ms", 300_000, int, "refresh metadata at least this often", lo=0),
    _k("retry_backoff_ms", 100, int, "wait before retrying a failed request", lo=0),
    _k("reconnect_backoff_ms", 50, int, "first wait before reconnecting to a broker", lo=0),
    _k("reconnect_backoff_max_ms", 1000, int, "longest wait before reconnecting", lo=0),
    _k("socket_connection_setup_timeout_ms", 10_000, int, "TCP connect timeout", lo=1),
    _k(
        "max_in_flight_requests_per_connection",
        5,
        int,
        "pipelined requests per connection before the sender waits",
        lo=1,
    ),
    _k("max_response_bytes", 100 * MiB, int, "largest response frame accepted", lo=1024),
]

PRODUCER = [
    _k("acks", "all", (str, int), "all/-1, 1 or 0", choices=("all", "-1", "0", "1", -1, 0, 1)),
    _k("linger_ms", 5, (int, float), "wait this long for a batch to fill", lo=0),
    _k("batch_size", 16_384, int, "target bytes per partition batch", lo=1),
    _k(
        "compression_type",
        None,
        (str, type(None)),
        "none, gzip, lz4 or zstd",
        choices=(None, "none", "gzip", "lz4", "zstd"),
    ),
    _k("retries", 2_147_483_647, int, "retries of a failed batch (retriable errors)", lo=0),
    _k("delivery_timeout_ms", 120_000, int, "give up on a record after this long", lo=1),
    _k("buffer_memory", 32 * MiB, int, "bytes of unsent records before send() blocks", lo=1024),
    _k("max_block_ms", 60_000, int, "how long send() blocks for buffer space / metadata", lo=0),
    _k("max_request_size", 1 * MiB, int, "largest Produce request per partition", lo=1024),
    _k("enable_idempotence", False, bool, "accepted; idempotent producers come later"),
    _k("key_serializer", None, _CALLABLE, "callable(key) -> bytes"),
    _k("value_serializer", None, _CALLABLE, "callable(value) -> bytes"),
]

CONSUMER = [
    _k("group_id", None, (str, type(None)), "stored; group membership comes later"),
    _k(
        "auto_offset_reset",
        "earliest",
        str,
        "earliest, latest or none",
        choices=("earliest", "latest", "none"),
    ),
    _k("enable_auto_commit", True, bool, "stored; takes effect with groups"),
    _k("auto_commit_interval_ms", 5000, int, "stored; takes effect with groups", lo=0),
    _k("fetch_min_bytes", 1, int, "the broker waits for this many bytes", lo=0),
    _k("fetch_max_wait_ms", 500, int, "... or this long", lo=0),
    _k("fetch_max_bytes", 50 * MiB, int, "bytes per fetch response", lo=1),
    _k("max_partition_fetch_bytes", 1 * MiB, int, "bytes per partition per fetch", lo=1),
    _k("max_poll_records", 500, int, "records returned by one poll()", lo=1),
    _k(
        "fetch_buffer_bytes",
        64 * MiB,
        int,
        "fetched-but-unpolled bytes before prefetching pauses",
        lo=1024,
    ),
    _k(
        "isolation_level",
        "read_uncommitted",
        str,
        "read_uncommitted or read_committed",
        choices=("read_uncommitted", "read_committed"),
    ),
    _k("check_crcs", True, bool, "verify each fetched batch's CRC-32C"),
    _k("session_timeout_ms", 45_000, int, "stored; takes effect with groups", lo=1),
    _k("heartbeat_interval_ms", 3000, int, "stored; takes effect with groups", lo=1),
    _k("key_deserializer", None, _CALLABLE, "callable(bytes) -> key"),
    _k("value_deserializer", None, _CALLABLE, "callable(bytes) -> value"),
]

ROLES: dict[str, list[Key]] = {
    "producer": COMMON + PRODUCER,
    "consumer": COMMON + CONSUMER,
    "admin": COMMON,
}

_ids = itertools.count(1)


def resolve_config(role: str, config: Mapping[str, Any] | None, kwargs: Mapping[str, Any]):
    """One config object for `role` from a dict of dotted (or snake_case) names and kwargs.

    Keyword arguments win over the dict. Returns a namespace with snake_case attributes.
    """
    keys = {k.name: k for k in ROLES[role]}
    given: dict[str, Any] = {}
    for source in (config or {}), kwargs:
        for raw, value in source.items():
            name = raw.replace(".", "_").replace("-", "_")
            if name not in keys:
                close = difflib.get_close_matches(name, list(keys), n=1)
                hint = f"; did you mean {close[0].replace('_', '.')!r}?" if close else ""
                raise ConfigError(f"unknown {role} config key {raw!r}{hint}")
            given[name] = value
    out: dict[str, Any] = {}
    for name, key in keys.items():
        value = given.get(name, key.default)
        out[name] = _check(role, key, value)
    if out["client_id"] is None:
        out["client_id"] = f"gregor-{role}-{next(_ids)}"
    out["bootstrap_servers"] = parse_bootstrap(out["bootstrap_servers"])
    if role == "producer":
        out["acks"] = {"all": -1, "-1": -1, "0": 0, "1": 1}.get(str(out["acks"]), out["acks"])
        if out["compression_type"] is None:
            out["compression_type"] = "none"
    return SimpleNamespace(role=role, **out)


def _check(role: str, key: Key, value: Any) -> Any:
    dotted = key.name.replace("_", ".")
    if key.kind is _CALLABLE:
        if value is not None and not callable(value):
            raise ConfigError(f"{role} config {dotted}={value!r}: expected a callable")
        return value
    kinds = key.kind if isinstance(key.kind, tuple) else (key.kind,)
    if isinstance(value, str) and str not in kinds:
        value = _from_string(role, key, value)
    if type(value) is bool and bool not in kinds:
        raise ConfigError(f"{role} config {dotted}={value!r}: expected {_names(kinds)}")
    if not isinstance(value, kinds):
        raise ConfigError(f"{role} config {dotted}={value!r}: expected {_names(kinds)}")
    if key.choices is not None and value not in key.choices:
        raise ConfigError(f"{role} config {dotted}={value!r}: expected one of {key.choices}")
    if key.lo is not None and isinstance(value, (int, float)) and value < key.lo:
        raise ConfigError(f"{role} config {dotted}={value!r}: expected >= {key.lo}")
    return value


def _from_string(role: str, key: Key, value: str) -> Any:
    kinds = key.kind if isinstance(key.kind, tuple) else (key.kind,)
    dotted = key.name.replace("_", ".")
    try:
        if bool in kinds:
            if value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise ValueError(value)
        if int in kinds:
            return int(value)
        if float in kinds:
            return float(value)
    except ValueError:
        raise ConfigError(f"{role} config {dotted}={value!r}: expected {_names(kinds)}") from None
    return value


def _names(kinds: tuple[type, ...]) -> str:
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def parse_bootstrap(value: str | list | tuple) -> list[tuple[str, int]]:
    """'h1:p1,h2:p2' (or a list of 'h:p' / (h, p)) -> [(host, port)]."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[tuple[str, int]] = []
    for item in items:
        if isinstance(item, tuple):
            out.append((str(item[0]), int(item[1])))
            continue
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ConfigError(f"bootstrap.servers entry {item!r}: expected host:port")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise ConfigError(f"bootstrap.servers={value!r}: expected at least one host:port")
    return out
