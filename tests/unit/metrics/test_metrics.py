"""The metrics room's parts without a broker: the listener URL, the scrape-time collectors
(broker and quorum state from stand-ins), the per-request recorder, the HTTP listener's
health answers (docs/metrics.md)."""

from __future__ import annotations

import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.lifecycle import REGISTERED, RUNNING
from broker.metrics import (
    BrokerCollector,
    BrokerMetrics,
    TopicMetrics,
    broker_ready,
)
from broker.replica.state import FollowerState
from broker.request_metrics import ErrorCounter
from client.config.types import parse_http_listener
from client.protocol.api_keys import ApiKey
from controller.metrics import MetricsServer, QuorumCollector, quorum_ready
from controller.raft.state import Role


def values(registry: CollectorRegistry) -> dict[tuple[str, tuple], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("", None),
        ("http://127.0.0.1:9404", ("127.0.0.1", 9404)),
        ("http://0.0.0.0:0/", ("0.0.0.0", 0)),
        ("http://[::1]:9404", ("::1", 9404)),
        ("http://broker-1:9404", ("broker-1", 9404)),
    ],
)
def test_listener_urls(text, want):
    assert parse_http_listener(text) == want


@pytest.mark.parametrize(
    "text",
    ["127.0.0.1:9404", "https://h:1", "http://h", "http://h:70000", "http://h:1/metrics", "x"],
)
def test_bad_listener_urls(text):
    with pytest.raises(ValueError, match="http://HOST:PORT"):
        parse_http_listener(text)


def part(topic, leader, replicas, isr, node_id=1, end=0, followers=None, partition=0):
    return SimpleNamespace(
        topic=topic,
        partition=partition,
        is_leader=leader == node_id,
        replicas=tuple(replicas),
        isr=tuple(isr),
        log=SimpleNamespace(end_offset=end, size_bytes=100),
        followers={r: FollowerState(log_end_offset=o) for r, o in (followers or {}).items()},
    )


def image(partitions=(), brokers=()):
    topics = {"t": SimpleNamespace(partitions=dict(enumerate(partitions)))}
    return SimpleNamespace(topics=topics, brokers=dict(brokers), offset=10)


def broker_node(partitions, image_=None, offline=(), open_files=3):
    log_dirs = ["/d1", "/d2"]
    return SimpleNamespace(
        node_id=1,
        replica_manager=SimpleNamespace(partitions=lambda: dict(enumerate(partitions))),
        _min_insync_for=lambda topic: 2,
        publisher=SimpleNamespace(latest_image=image_ or image(), image=image_ or image()),
        produce_purgatory=SimpleNamespace(watched=lambda: 4),
        fetch_purgatory=SimpleNamespace(watched=lambda: 7),
        log_manager=SimpleNamespace(
            open_segment_files=lambda: open_files,
            log_dirs=log_dirs,
            handles=lambda d: SimpleNamespace(capacity=100),
            offline_dirs=lambda: list(offline),
        ),
        lifecycle=SimpleNamespace(state=RUNNING),
    )


def test_broker_collector_counts_partitions_it_leads():
    parts = [
        part("a", 1, [1, 2, 3], [1, 2, 3]),  # led, healthy
        part("a", 1, [1, 2, 3], [1, 2], end=50, followers={2: 50, 3: 20}),  # led, lagging
        part("a", 1, [1, 2, 3], [1]),  # led, under-replicated and under min ISR (2)
        part("a", 1, [1, 2, 3], [1, 2, 3], end=9, followers={2: -1, 3: 9}),  # -1: not fetched
        part("b", 2, [1, 2, 3], [2], end=100, followers={1: 0}),  # a follower's view: not counted
    ]
    offline = image([SimpleNamespace(leader=-1), SimpleNamespace(leader=2)])
    registry = CollectorRegistry()
    network = SimpleNamespace(
        connection_count=12, memory_pool=SimpleNamespace(used=2048, capacity=1 << 20)
    )
    registry.register(
        BrokerCollector(broker_node(parts, offline), SimpleNamespace(size=5), network)
    )
    v = values(registry)
    assert v[("gregor_partitions_under_replicated", ())] == 2
    assert v[("gregor_partitions_under_min_isr", ())] == 1
    assert v[("gregor_partitions_leader", ())] == 4
    assert v[("gregor_partitions", ())] == 5
    assert sum(x for k, x in v.items() if k[0] == "gregor_topic_log_size_bytes") == 500
    assert v[("gregor_replica_max_lag_records", ())] == 30
    assert v[("gregor_partitions_offline", ())] == 1
    assert v[("gregor_request_queue_size", ())] == 5
    assert v[("gregor_purgatory_size", (("kind", "produce"),))] == 4
    assert v[("gregor_purgatory_size", (("kind", "fetch"),))] == 7
    assert v[("gregor_log_open_segment_files", ())] == 3
    assert v[("gregor_log_open_segment_files_max", ())] == 200
    assert v[("gregor_log_dirs_offline", ())] == 0
    assert v[("gregor_connections", ())] == 12
    assert v[("gregor_request_memory_bytes", ())] == 2048
    assert v[("gregor_request_memory_max_bytes", ())] == 1 << 20


def raft_log(role, leader, term=3, committed=42):
    return SimpleNamespace(
        node=SimpleNamespace(
            role=role, leader_id=leader, term=term, log=SimpleNamespace(committed=committed)
        ),
        leader_changes=2,
    )


@pytest.mark.parametrize(("role", "active"), [(Role.LEADER, 1), (Role.FOLLOWER, 0)])
def test_quorum_collector(role, active):
    brokers = {
        4: SimpleNamespace(fenced=False),
        5: SimpleNamespace(fenced=True),
        6: SimpleNamespace(fenced=False),
    }
    img = image(
        [
            SimpleNamespace(leader=-1, adding_replicas=(), removing_replicas=()),
            SimpleNamespace(leader=4, adding_replicas=(6,), removing_replicas=(5,)),
            SimpleNamespace(leader=4, adding_replicas=(6,), removing_replicas=()),
        ],
        brokers,
    )
    registry = CollectorRegistry()
    registry.register(QuorumCollector(raft_log(role, 2), lambda: img))
    v = values(registry)
    assert v[("gregor_controller_active", ())] == active
    assert v[("gregor_raft_current_leader", ())] == 2
    assert v[("gregor_raft_current_epoch", ())] == 3
    assert v[("gregor_raft_high_watermark", ())] == 42
    assert v[("gregor_controller_fenced_brokers", ())] == 1
    assert v[("gregor_controller_active_brokers", ())] == 2
    assert v[("gregor_partitions_offline", ())] == 1
    assert v[("gregor_raft_leader_changes_total", ())] == 2
    assert v[("gregor_controller_reassigning_partitions", ())] == 2
    moving = "gregor_controller_reassigning_replicas"
    assert v[(moving, (("broker", "6"), ("kind", "adding")))] == 2
    assert v[(moving, (("broker", "5"), ("kind", "removing")))] == 1
    assert not [k for k in v if k[0] == moving and ("broker", "4") in k[1]]


def test_quorum_ready_needs_a_known_leader():
    img = image()
    assert quorum_ready(raft_log(Role.CANDIDATE, None), lambda: img) == (
        "no known leader of the metadata quorum"
    )
    assert quorum_ready(raft_log(Role.FOLLOWER, 1), lambda: img) is None


def test_broker_ready_needs_running_unfenced_and_dirs_online():
    registered = image(brokers={1: SimpleNamespace(fenced=False)})
    node = broker_node([], registered)
    assert broker_ready(node) is None
    node.lifecycle.state = REGISTERED
    assert broker_ready(node).startswith("broker lifecycle is registered, not running")
    node.lifecycle.state = RUNNING
    fenced = image(brokers={1: SimpleNamespace(fenced=True)})
    node.publisher = SimpleNamespace(image=fenced, latest_image=fenced)
    assert "fenced" in broker_ready(node)
    node = broker_node([], registered, offline=["/d2"])
    assert broker_ready(node) == "log dirs offline: /d2"


def http(address, path):
    try:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_listener_answers_health_and_metrics_and_stops():
    registry = CollectorRegistry()
    ErrorCounter(registry).count(ApiKey.METADATA, {"error_code": 3})
    reason: list[str | None] = ["not yet: catching up"]

    def ready():
        if reason[0] == "boom":
            raise RuntimeError("boom")
        return reason[0]

    server = MetricsServer(registry, ("127.0.0.1", 0), ready)
    address = server.start()
    try:
        assert http(address, "/health/live") == (200, "live\n")
        assert http(address, "/health/ready") == (503, "not yet: catching up\n")
        reason[0] = None
        assert http(address, "/health/ready") == (200, "ready\n")
        reason[0] = "boom"
        status, body = http(address, "/health/ready")
        assert status == 503 and "boom" in body
        status, body = http(address, "/metrics")
        assert status == 200
        assert (
            'gregor_request_errors_total{api="METADATA",error="UNKNOWN_TOPIC_OR_PARTITION"} 1.0'
            in body
        )
        assert http(address, "/other")[0] == 404
    finally:
        server.stop()
    assert server._thread is not None and not server._thread.is_alive()
    with pytest.raises(OSError):
        http(address, "/health/live")
    server.stop()  # idempotent


def test_a_deleted_topics_byte_series_go_and_come_back_fresh():
    registry = CollectorRegistry()
    t = TopicMetrics(registry)
    t.appended("a", 0, 10, 2)
    t.fetched("a", 0, 4, 2)
    t.appended("b", 0, 1, 1)
    deleted = SimpleNamespace(deleted_topics={"a": b"id"})
    t.on_metadata(SimpleNamespace(topics={"b": None}), deleted)
    v = values(registry)
    assert ("gregor_topic_bytes_in_total", (("topic", "a"),)) not in v
    assert ("gregor_topic_bytes_out_total", (("topic", "a"),)) not in v
    assert ("gregor_topic_records_in_total", (("topic", "a"),)) not in v
    assert ("gregor_topic_records_out_total", (("topic", "a"),)) not in v
    assert v[("gregor_topic_records_in_total", (("topic", "b"),))] == 1
    assert v[("gregor_topic_bytes_in_total", (("topic", "b"),))] == 1
    t.appended("a", 0, 3, 1)  # re-created under the same name: counts from 0
    assert values(registry)[("gregor_topic_bytes_in_total", (("topic", "a"),))] == 3
    # deleted and re-created in one delta: kept
    t.on_metadata(SimpleNamespace(topics={"a": None}), deleted)
    t.on_metadata(SimpleNamespace(topics={}), None)  # a full image: nothing to forget
    assert values(registry)[("gregor_topic_bytes_in_total", (("topic", "a"),))] == 3


def _ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_the_listener_binds_an_ipv6_literal():
    server = MetricsServer(CollectorRegistry(), parse_http_listener("http://[::1]:0"), lambda: None)
    host, port = server.start()
    try:
        assert host == "::1"
        with urllib.request.urlopen(f"http://[::1]:{port}/health/ready", timeout=5) as r:
            assert r.status == 200
    finally:
        server.stop()


def test_isr_changes_count_as_shrinks_or_expansions():
    m = BrokerMetrics(("127.0.0.1", 0))
    m.isr_changed(3, 2)
    m.isr_changed(2, 1)
    m.isr_changed(1, 3)
    v = values(m.registry)
    assert v[("gregor_isr_shrinks_total", ())] == 2
    assert v[("gregor_isr_expands_total", ())] == 1
