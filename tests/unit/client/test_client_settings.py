"""The client's typed settings: FetchSettings and MemberSettings
(client/aio/consumer_settings.py), ClusterSettings and SenderSettings
(client/aio/link_settings.py), ProducerSettings, AdminSettings: the keys read once from the resolved config, typed, with the
registry's defaults."""

from __future__ import annotations

import pytest

from client.aio.admin_settings import AdminSettings
from client.aio.config import resolve_config
from client.aio.consumer_settings import FetchSettings, MemberSettings
from client.aio.link_settings import ClusterSettings, SenderSettings
from client.aio.producer_settings import ProducerSettings
from client.errors import ConfigError


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


def test_cluster_settings_are_the_configs_values():
    cfg = resolve_config(
        "admin",
        {"bootstrap.servers": "a:1,b:2", "client.id": "me"},
        {"reconnect_backoff_max_ms": 777},
    )
    s = ClusterSettings.from_config(cfg)
    assert s.bootstrap_servers == (("a", 1), ("b", 2))
    assert (s.client_id, s.reconnect_backoff_max_ms) == ("me", 777)
    assert s.request_timeout_ms == cfg.request_timeout_ms
    assert s.ssl_context is None and s.sasl is None  # PLAINTEXT


@pytest.mark.parametrize(("acks", "expected"), [("all", -1), ("1", 1), (0, 0)])
def test_sender_settings_take_acks_as_the_wire_number(acks, expected):
    cfg = resolve_config("producer", {"acks": acks, "compression.type": "gzip"}, {"retries": 3})
    s = SenderSettings.from_config(cfg)
    assert (s.acks, s.compression_type, s.retries) == (expected, "gzip", 3)
    assert s.delivery_timeout_ms == cfg.delivery_timeout_ms


def test_producer_settings_are_the_configs_values():
    cfg = resolve_config(
        "producer",
        {"batch.size": 4096, "linger.ms": 7, "transactional.id": "t-1"},
        {"value_serializer": str.encode, "max_block_ms": 1234},
    )
    s = ProducerSettings.from_config(cfg)
    assert (s.batch_size, s.linger_ms, s.max_block_ms) == (4096, 7, 1234)
    assert s.value_serializer is str.encode and s.key_serializer is None
    assert (s.transactional_id, s.transaction_timeout_ms) == ("t-1", cfg.transaction_timeout_ms)
    assert s.idempotent  # a transactional.id implies it
    assert s.buffer_memory == cfg.buffer_memory
    with pytest.raises(AttributeError):
        s.linger_ms = 1  # type: ignore[misc]  # frozen


def test_producer_settings_decide_idempotence_once():
    # left at its default, acks=1 turns idempotence off; set explicitly, it is refused
    assert not ProducerSettings.from_config(resolve_config("producer", {"acks": 1}, {})).idempotent
    with pytest.raises(ConfigError, match="acks=1"):
        ProducerSettings.from_config(
            resolve_config("producer", {"acks": 1, "enable.idempotence": True}, {})
        )
    with pytest.raises(ConfigError, match="transactional.id"):
        ProducerSettings.from_config(
            resolve_config("producer", {"transactional.id": "t", "acks": 1}, {})
        )


def test_admin_settings_are_the_configs_values():
    cfg = resolve_config(
        "admin",
        {"bootstrap.servers": "h1:9092,h2:9093", "request.timeout.ms": 7_000},
        {"retry_backoff_ms": 250, "client_id": "ops"},
    )
    s = AdminSettings.from_config(cfg)
    assert s.bootstrap_servers == (("h1", 9092), ("h2", 9093))
    assert (s.request_timeout_ms, s.retry_backoff_ms, s.client_id) == (7_000, 250, "ops")
    assert s.max_response_bytes == cfg.max_response_bytes
    assert s.socket_connection_setup_timeout_ms == cfg.socket_connection_setup_timeout_ms
    assert s.ssl_context is None  # no ssl.* keys
    with pytest.raises(AttributeError):
        s.retry_backoff_ms = 1  # type: ignore[misc]  # frozen
