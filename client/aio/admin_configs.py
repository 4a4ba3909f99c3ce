"""Admin's `incremental_alter_configs()` and `describe_configs()` (Kafka's
`Admin.incrementalAlterConfigs` / `describeConfigs`) for topic and broker resources, sent to any
broker (which forwards alterations to the controller).

Loop-owned: runs on the admin's event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from client.aio.cluster import ClusterClient
from client.aio.types import ConfigEntry
from client.errors import ConfigError, error_for_code
from client.protocol import ApiKey
from client.protocol.apis.admin import RESOURCE_BROKER, RESOURCE_TOPIC


def config_text(value: Any) -> str:
    """A config value as the wire carries it (Kafka's text form: true/false for booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def incremental_alter_configs(
    cluster: ClusterClient,
    changes: Mapping[tuple[str, str], Mapping[str, Any]],
    validate_only: bool,
    timeout: int,
) -> None:
    """See Admin.incremental_alter_configs; `timeout` in ms."""
    resources = []
    for (kind, name), configs in changes.items():
        if kind not in ("topic", "broker"):
            raise ConfigError(f"resource kind {kind!r}: expected 'topic' or 'broker'")
        resources.append(
            {
                "resource_type": RESOURCE_TOPIC if kind == "topic" else RESOURCE_BROKER,
                "resource_name": str(name),
                "configs": [
                    {
                        "name": k,
                        "config_operation": 1 if v is None else 0,
                        "value": None if v is None else config_text(v),
                    }
                    for k, v in configs.items()
                ],
            }
        )
    resp = await cluster.send_any(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        {"resources": resources, "validate_only": validate_only},
        timeout_ms=timeout,
    )
    for r in resp["responses"]:
        if r["error_code"]:
            raise error_for_code(r["error_code"])(r["error_message"] or r["resource_name"])


async def describe_configs(
    cluster: ClusterClient,
    topics: Iterable[str],
    brokers: Iterable[int],
    keys: Iterable[str] | None,
) -> dict[tuple[str, str], dict[str, ConfigEntry]]:
    """See Admin.describe_configs."""
    ks = None if keys is None else list(keys)
    resources = [
        {"resource_type": RESOURCE_TOPIC, "resource_name": t, "configuration_keys": ks}
        for t in topics
    ]
    resources += [
        {"resource_type": RESOURCE_BROKER, "resource_name": str(b), "configuration_keys": ks}
        for b in brokers
    ]
    resp = await cluster.send_any(ApiKey.DESCRIBE_CONFIGS, {"resources": resources})
    out: dict[tuple[str, str], dict[str, ConfigEntry]] = {}
    for r in resp["results"]:
        if r["error_code"]:
            raise error_for_code(r["error_code"])(r["error_message"] or r["resource_name"])
        kind = "topic" if r["resource_type"] == RESOURCE_TOPIC else "broker"
        out[(kind, r["resource_name"])] = {
            c["name"]: ConfigEntry(
                c["name"], c["value"], c["read_only"], c["is_default"], c["is_sensitive"]
            )
            for c in r["configs"]
        }
    return out
