"""DescribeConfigs (32): topic resources (type 2: the topic's overrides from the metadata image,
then every topic-level key with its broker-wide default) and broker resources (type 4, name =
node id: every key of this broker's config, `is_default` when nothing set it). Read-only here:
changes go through IncrementalAlterConfigs to the controller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.handlers.base import RequestContext, handler
from broker.security.access import check, config_resource, enabled
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation
from controller.quorum.topic_configs import TOPIC_DEFAULTS  # topic key -> broker default key

if TYPE_CHECKING:
    from broker.services import Services

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

SENSITIVE_MARKERS = ("password", "secret")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) or "" for v in value)
    return str(value)


def _entry(name: str, value: Any, is_default: bool, read_only: bool) -> Body:
    sensitive = any(m in name for m in SENSITIVE_MARKERS)
    return {
        "name": name,
        "value": None if sensitive else _text(value),
        "read_only": read_only,
        "is_default": is_default,
        "is_sensitive": sensitive,
    }


def _broker_value(config: Any, name: str) -> Any:
    try:
        return config[name]
    except KeyError:
        return None


def _topic_configs(services: Services, topic: str) -> list[Body]:
    overrides = services.metadata.topic_config(topic)
    out = [_entry(k, v, False, False) for k, v in sorted(overrides.items())]
    for k, broker_key in sorted(TOPIC_DEFAULTS.items()):
        if k not in overrides:
            out.append(_entry(k, _broker_value(services.config, broker_key), True, False))
    return out


def _broker_configs(services: Services) -> list[Body]:
    config = services.config
    out = []
    for name in sorted(config):
        source = config.source(name) if hasattr(config, "source") else "default"
        out.append(_entry(name, config[name], source == "default", True))
    return out


def _describe(services: Services, res: Body) -> Body:
    rtype, rname = int(res["resource_type"]), res["resource_name"]
    result = {
        "error_code": 0,
        "error_message": None,
        "resource_type": rtype,
        "resource_name": rname,
        "configs": [],
    }
    if rtype == RESOURCE_TOPIC:
        if rname not in services.metadata.topics:
            result["error_code"] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            result["error_message"] = f"unknown topic {rname!r}"
            return result
        configs = _topic_configs(services, rname)
    elif rtype == RESOURCE_BROKER:
        if rname not in ("", str(services.node_id)):
            result["error_code"] = int(ErrorCode.INVALID_REQUEST)
            result["error_message"] = f"broker {rname!r} is not this broker ({services.node_id})"
            return result
        configs = _broker_configs(services)
    else:
        result["error_code"] = int(ErrorCode.INVALID_REQUEST)
        result["error_message"] = f"unsupported resource type {rtype}"
        return result
    keys = res.get("configuration_keys")
    if keys is not None:
        wanted = set(keys)
        configs = [c for c in configs if c["name"] in wanted]
    result["configs"] = configs
    return result


@handler(ApiKey.DESCRIBE_CONFIGS, access="DESCRIBE_CONFIGS on TOPIC, or CLUSTER for a broker")
def handle(ctx: RequestContext, body: Body) -> Body:
    results = []
    for r in body["resources"]:
        denied = (
            check(
                ctx,
                AclOperation.DESCRIBE_CONFIGS,
                *config_resource(int(r["resource_type"]), r["resource_name"]),
            )
            if enabled(ctx)
            else None
        )
        if denied is None:
            results.append(_describe(ctx.services, r))
        else:  # DESCRIBE_CONFIGS on the topic, or on the cluster for a broker
            results.append(
                {
                    "error_code": denied[0],
                    "error_message": denied[1],
                    "resource_type": int(r["resource_type"]),
                    "resource_name": r["resource_name"],
                    "configs": [],
                }
            )
    return {"results": results, "throttle_time_ms": 0}
