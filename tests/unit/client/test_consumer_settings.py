"""FetchSettings and MemberSettings (client/aio/consumer_settings.py): the consumer's keys
read once from the resolved config, typed, with the registry's defaults."""

from __future__ import annotations

import pytest

from client.aio.config import resolve_config
from client.aio.consumer_settings import FetchSettings, MemberSettings


def test_fetch_settings_are_the_configs_values():
    cfg = resolve_config(
        "consumer",
        {"fetch.max.bytes": 1_000_000, "isolation.level": "read_committed"},
        {"max_partition_fetch_bytes": 4096, "key_deserializer": bytes.decode},
    )
    s = FetchSettings.from_config(cfg)
    assert (s.fetch_max_bytes, s.max_partition_fetch_bytes) == (1_000_000, 4096)
    assert s.read_committed and s.key_deserializer is bytes.decode
    assert s.value_deserializer is None
    assert s.auto_offset_reset == cfg.auto_offset_reset == "earliest"  # Gregor's default
    assert (s.fetch_min_bytes, s.fetch_max_wait_ms) == (cfg.fetch_min_bytes, cfg.fetch_max_wait_ms)
    assert not FetchSettings.from_config(resolve_config("consumer", None, {})).read_committed


def test_member_settings_are_the_configs_values():
    cfg = resolve_config(
        "consumer",
        {"group.id": "g", "group.instance.id": "i-1", "enable.auto.commit": False},
        {"session_timeout_ms": 10_000, "max_poll_interval_ms": 60_000},
    )
    s = MemberSettings.from_config(cfg)
    assert (s.group_id, s.group_instance_id, s.enable_auto_commit) == ("g", "i-1", False)
    assert (s.session_timeout_ms, s.max_poll_interval_ms) == (10_000, 60_000)
    assert s.group_remote_assignor is None  # the coordinator's default
    unset = MemberSettings.from_config(resolve_config("consumer", {"group.id": "g"}, {}))
    assert unset.session_timeout_ms is None  # the broker's group.consumer.session.timeout.ms
    with pytest.raises(AttributeError):
        s.group_id = "h"  # type: ignore[misc]  # frozen
