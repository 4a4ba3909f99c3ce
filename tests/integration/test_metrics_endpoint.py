"""metrics.listener on an in-process combined broker: /metrics in Prometheus text format with
the request, topic, flush, partition and quorum series; /health/live and /health/ready; the
listener closes with the broker; a bad URL is a config error."""

from __future__ import annotations

import re
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers import RawClient, broker_config, spawn_gregor, wait_until
from prometheus_client.parser import text_string_to_metric_families
from replica_helpers import batch, create_topic, fetch, produce

from client import Admin, Consumer, Producer
from client.errors import ConfigError, ErrorCode
from client.protocol import ApiKey


def get(address: tuple[str, int], path: str) -> tuple[int, str]:
    url = f"http://{address[0]}:{address[1]}{path}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(address: tuple[str, int]) -> dict[tuple[str, tuple], float]:
    status, text = get(address, "/metrics")
    assert status == 200, text
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def metered(broker_factory):
    return broker_factory(**{"metrics.listener": "http://127.0.0.1:0"})


def test_metrics_and_health_of_a_combined_broker(metered):
    address = metered.server.metrics_address
    assert address is not None and address[1] > 0
    assert get(address, "/health/live") == (200, "live\n")
    wait_until(lambda: get(address, "/health/ready")[0] == 200, 30, "broker ready")
    with RawClient(metered.address) as c:
        assert create_topic(c, "m1")["error_code"] == 0
        sizes = []
        for i in range(3):
            records = batch([b"v%d" % i] * 4)
            sizes.append(len(records))
            assert produce(c, "m1", 0, records, acks=-1, corr=i + 1)["error_code"] == 0
        got = fetch(c, "m1", 0, 0)
        assert got["error_code"] == 0 and got["records"]
        # a whole-request error: a version the broker does not speak
        bad = c.request(ApiKey.PRODUCE, 99, {}, correlation_id=9)
        assert bad["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    # a request is counted once its answer is sent: the last one's count may come a moment
    # after the client read the answer
    produces = ("gregor_requests_total", (("api", "PRODUCE"),))
    wait_until(lambda: samples(address).get(produces, 0) >= 4, 10, "the 4 produces counted")
    m = samples(address)
    assert m[produces] >= 4
    assert m[("gregor_request_duration_seconds_count", (("api", "PRODUCE"),))] >= 4
    # the latency split by stage: every stage counts every request; the acks=-1 produces
    # waited in the purgatory for their flush (remote), and the stages add up to the total
    stages = ("request_queue", "local", "remote", "response_queue", "response_send")
    produce_stage = {
        s: (m[("gregor_request_stage_duration_seconds_count", (("api", "PRODUCE"), ("stage", s)))],
            m[("gregor_request_stage_duration_seconds_sum", (("api", "PRODUCE"), ("stage", s)))])
        for s in stages
    }  # fmt: skip
    total = m[("gregor_request_duration_seconds_sum", (("api", "PRODUCE"),))]
    assert {c for c, _ in produce_stage.values()} == {
        m[("gregor_requests_total", (("api", "PRODUCE"),))]
    }
    assert produce_stage["remote"][1] > 0
    assert abs(sum(s for _, s in produce_stage.values()) - total) < 1e-6
    assert m[("gregor_io_thread_busy_seconds_total", ())] > 0
    assert m[("gregor_io_threads", ())] == metered.server.settings.num_io_threads
    assert m[("gregor_network_threads", ())] == metered.server.settings.network.num_network_threads
    wait_until(
        lambda: samples(address)[("gregor_network_thread_cpu_seconds_total", ())] > 0,
        10,
        "network threads' CPU time",
    )
    assert m[("gregor_topic_bytes_in_total", (("topic", "m1"),))] == sum(sizes)
    assert m[("gregor_topic_records_in_total", (("topic", "m1"),))] == 12  # 3 batches of 4
    assert m[("gregor_topic_bytes_out_total", (("topic", "m1"),))] == len(got["records"])
    assert m[("gregor_topic_records_out_total", (("topic", "m1"),))] == 12
    # the acks=-1 produces waited for flusher rounds that made their bytes durable
    assert m[("gregor_log_flush_size_bytes_sum", ())] >= sum(sizes)
    assert (
        m[("gregor_log_flush_size_bytes_count", ())]
        == m[("gregor_log_flush_duration_seconds_count", ())]
    )
    # one replica: no follower lags
    assert m[("gregor_replica_lag_records", (("topic", "m1"),))] == 0
    assert m[("gregor_replica_lag_seconds", (("topic", "m1"),))] == 0
    assert m[("gregor_topic_log_size_bytes", (("topic", "m1"),))] == sum(sizes)
    key = ("gregor_request_errors_total", (("api", "PRODUCE"), ("error", "UNSUPPORTED_VERSION")))
    assert m[key] == 1
    assert m[("gregor_log_flush_duration_seconds_count", ())] >= 1
    assert m[("gregor_partitions", ())] >= 1
    assert m[("gregor_partitions_leader", ())] >= 1
    assert m[("gregor_partitions_under_replicated", ())] == 0
    assert m[("gregor_partitions_under_min_isr", ())] == 0
    assert m[("gregor_partitions_offline", ())] == 0
    assert m[("gregor_purgatory_size", (("kind", "produce"),))] == 0
    assert m[("gregor_request_queue_size", ())] == 0
    assert m[("gregor_request_memory_max_bytes", ())] == 100 * 1024 * 1024
    with RawClient(metered.address) as c:  # a connection counts while it is open
        c.request(ApiKey.API_VERSIONS, 0, {})
        assert samples(address)[("gregor_connections", ())] == 1
    wait_until(lambda: samples(address)[("gregor_connections", ())] == 0, 10, "the connection gone")
    wait_until(
        lambda: samples(address)[("gregor_request_memory_bytes", ())] == 0, 10, "memory freed"
    )
    assert m[("gregor_log_open_segment_files", ())] > 0
    assert m[("gregor_log_open_segment_files", ())] <= m[("gregor_log_open_segment_files_max", ())]
    # the combined server is its own one-voter quorum
    assert m[("gregor_controller_active", ())] == 1
    assert m[("gregor_raft_current_leader", ())] == metered.server.settings.node_id
    assert m[("gregor_raft_high_watermark", ())] > 0
    assert m[("gregor_controller_fenced_brokers", ())] == 0
    assert m[("gregor_controller_active_brokers", ())] == 1
    assert m[("gregor_raft_leader_changes_total", ())] == 1
    assert m[("gregor_raft_commit_latency_seconds_count", ())] >= 1  # (the topic's creation)
    assert m[("gregor_controller_reassigning_partitions", ())] == 0
    # no process/platform collectors: the node's own registry, not the global one
    assert not any(k[0].startswith("process_") or k[0].startswith("python_") for k in m)
    assert get(address, "/nope")[0] == 404


def test_partition_labels_on_request(broker_factory):
    """metrics.partition.labels=true: the per-topic series carry the partition too."""
    handle = broker_factory(
        **{"metrics.listener": "http://127.0.0.1:0", "metrics.partition.labels": "true"}
    )
    address = handle.server.metrics_address
    with RawClient(handle.address) as c:
        assert create_topic(c, "pl", partitions=2)["error_code"] == 0
        assert produce(c, "pl", 1, batch([b"a", b"b"]), acks=1)["error_code"] == 0
        assert fetch(c, "pl", 1, 0)["records"]
    m = samples(address)
    p1 = (("partition", "1"), ("topic", "pl"))
    assert m[("gregor_topic_records_in_total", p1)] == 2
    assert m[("gregor_topic_records_out_total", p1)] == 2
    assert m[("gregor_replica_lag_seconds", p1)] == 0
    assert m[("gregor_topic_log_size_bytes", (("partition", "0"), ("topic", "pl")))] == 0
    topic_labelled = [k for k in m if ("topic", "pl") in k[1]]
    assert topic_labelled and all(dict(k[1]).get("partition") for k in topic_labelled)


def test_a_deleted_topics_series_go(metered):
    address = metered.server.metrics_address
    with RawClient(metered.address) as c:
        assert create_topic(c, "gone")["error_code"] == 0
        assert produce(c, "gone", 0, batch([b"x"]), acks=1)["error_code"] == 0
    assert ("gregor_topic_bytes_in_total", (("topic", "gone"),)) in samples(address)
    with Admin(bootstrap_servers=metered.bootstrap) as admin:
        admin.delete_topic("gone")
    wait_until(
        lambda: ("gregor_topic_bytes_in_total", (("topic", "gone"),)) not in samples(address),
        15,
        "the deleted topic's series gone",
    )


def test_docs_list_every_metric_and_no_other(metered):
    """docs/metrics.md's tables and what a combined node serves name the same metrics (the
    combined node serves every broker and quorum metric)."""
    _, text = get(metered.server.metrics_address, "/metrics")
    served = {
        f.name + "_total" if f.type == "counter" else f.name
        for f in text_string_to_metric_families(text)
        if not f.name.endswith("_created")  # (prometheus_client's creation-time samples)
    }
    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    documented = set(re.findall(r"^\| `(gregor_[a-z_]+)` \|", doc, re.MULTILINE))
    assert served == documented


def test_group_members_state_and_lag_equal_groups_describe(metered):
    """The coordinator's group series: one member, stable, and a lag per topic equal to what
    `Admin.describe_group` (as `gregor groups describe`) computes, before and after more
    records arrive."""
    address = metered.server.metrics_address
    with Admin(bootstrap_servers=metered.bootstrap) as admin:
        admin.create_topic("lagged", 2, 1)
    with Producer(bootstrap_servers=metered.bootstrap, linger_ms=0) as prod:
        for i in range(10):
            prod.send("lagged", b"a%d" % i, partition=i % 2).result(30)
    consumer = Consumer(
        "lagged",
        bootstrap_servers=metered.bootstrap,
        group_id="g-lag",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        got: list = []
        wait_until(lambda: got.extend(consumer.poll(200)) or len(got) >= 10, 30, "10 records")
        consumer.commit()
        with Producer(bootstrap_servers=metered.bootstrap, linger_ms=0) as prod:
            for i in range(7):
                prod.send("lagged", b"b%d" % i, partition=i % 2).result(30)
        lag_key = ("gregor_group_lag_records", (("group", "g-lag"), ("topic", "lagged")))
        wait_until(lambda: samples(address).get(lag_key) == 7, 15, "lag of 7 in /metrics")
        with Admin(bootstrap_servers=metered.bootstrap) as admin:
            assert admin.describe_group("g-lag").total_lag == 7
        m = samples(address)
        assert m[("gregor_group_members", (("group", "g-lag"),))] == 1
        stable = ("gregor_group_state", (("group", "g-lag"), ("state", "stable")))
        assert m[stable] == 1
        assert m[("gregor_group_state", (("group", "g-lag"), ("state", "empty")))] == 0
        assert m[("gregor_group_lag_unknown_partitions", ())] == 0
    finally:
        consumer.close()
    wait_until(
        lambda: samples(address)[("gregor_group_members", (("group", "g-lag"),))] == 0,
        30,
        "the member gone after close",
    )


def test_the_listener_closes_with_the_broker(broker_factory):
    handle = broker_factory(**{"metrics.listener": "http://127.0.0.1:0"})
    address = handle.server.metrics_address
    assert get(address, "/health/live")[0] == 200
    handle.server.shutdown(timeout=10.0)
    with pytest.raises(OSError), socket.create_connection(address, timeout=5):
        pass


def test_off_by_default(broker_server):
    assert broker_server.server.metrics_address is None
    assert broker_server.server.services.metrics is None


def _bound_port() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_a_controller_serves_metrics_and_refuses_a_port_in_use(tmp_path):
    """`gregor controller` with metrics.listener: live, ready once it leads its one-voter
    quorum, the quorum gauges; a second one whose metrics port is taken exits 1 saying why."""
    with _bound_port() as raft, _bound_port() as taken:
        raft_port = raft.getsockname()[1]
        metrics_port = _bound_port()
        free = metrics_port.getsockname()[1]
        metrics_port.close()

        def config(name: str, port: int) -> Path:
            path = tmp_path / f"{name}.yaml"
            path.write_text(
                "process.roles: controller\nnode.id: 1\n"
                f'controller.quorum.voters: "1@127.0.0.1:{raft_port}"\n'
                f"metadata.log.dir: {tmp_path / name}\n"
                f"metrics.listener: http://127.0.0.1:{port}\n"
            )
            return path

        raft.close()
        good = spawn_gregor(
            ["controller", "--config", str(config("c1", free))],
            tmp_path / "c1",
            tmp_path / "c1.err",
        )
        try:
            good.wait_ready(15)
            address = ("127.0.0.1", free)
            assert get(address, "/health/live")[0] == 200
            wait_until(lambda: get(address, "/health/ready")[0] == 200, 15, "controller ready")
            m = samples(address)
            assert m[("gregor_controller_active", ())] == 1
            assert m[("gregor_raft_current_leader", ())] == 1
            assert m[("gregor_partitions_offline", ())] == 0
            assert not any(k[0] == "gregor_requests_total" for k in m)  # (broker metrics)
        finally:
            good.proc.terminate()
            assert good.proc.wait(15) == 0
            good.close()
        bad = spawn_gregor(
            ["controller", "--config", str(config("c2", taken.getsockname()[1]))],
            tmp_path / "c2",
            tmp_path / "c2.err",
        )
        try:
            assert bad.proc.wait(30) == 1
            assert "cannot start" in bad.stderr() and "in use" in bad.stderr(), bad.stderr()
        finally:
            if bad.proc.poll() is None:
                bad.proc.kill()
                bad.proc.wait(10)
            bad.close()


@pytest.mark.parametrize(
    "value", ["127.0.0.1:9404", "https://127.0.0.1:9404", "http://127.0.0.1", "http://h:99999"]
)
def test_a_bad_listener_is_a_config_error(tmp_path, value):
    with pytest.raises(ConfigError, match="metrics.listener"):
        broker_config(tmp_path, **{"metrics.listener": value})
