"""CreateTopics / DeleteTopics / Metadata / DescribeCluster / DescribeConfigs against an
in-process broker, and topics (with their records) surviving a restart."""

from __future__ import annotations

import pytest
from helpers import RawClient, wait_until
from replica_helpers import batch, create_topic, fetch, produce, values_of

from client.errors import ErrorCode
from client.protocol import ApiKey


def _metadata(c: RawClient, names: list[str] | None = None, auto: bool = False) -> dict:
    topics = None if names is None else [{"name": n} for n in names]
    return c.request(ApiKey.METADATA, 0, {"topics": topics, "allow_auto_topic_creation": auto})


def test_create_describe_delete(broker_server):
    with RawClient(broker_server.address) as c:
        r = create_topic(c, "orders", partitions=3, configs={"retention.ms": "60000"})
        assert r["error_code"] == 0 and r["num_partitions"] == 3
        again = create_topic(c, "orders")
        assert again["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
        meta = _metadata(c)
        assert meta["brokers"] == [
            {"node_id": 1, "host": broker_server.host, "port": broker_server.port, "rack": None}
        ]
        assert meta["controller_id"] == 1 and meta["cluster_id"]
        (t,) = meta["topics"]
        assert t["name"] == "orders" and t["error_code"] == 0
        assert [p["partition"] for p in t["partitions"]] == [0, 1, 2]
        assert all(p["leader_id"] == 1 and p["isr_nodes"] == [1] for p in t["partitions"])

        cluster = c.request(ApiKey.DESCRIBE_CLUSTER, 0, {})
        assert cluster["error_code"] == 0 and cluster["cluster_id"] == meta["cluster_id"]
        assert [b["broker_id"] for b in cluster["brokers"]] == [1]

        cfg = c.request(
            ApiKey.DESCRIBE_CONFIGS,
            0,
            {
                "resources": [
                    {"resource_type": 2, "resource_name": "orders", "configuration_keys": None},
                    {
                        "resource_type": 4,
                        "resource_name": "1",
                        "configuration_keys": ["num.io.threads"],
                    },
                    {"resource_type": 2, "resource_name": "nope", "configuration_keys": None},
                ]
            },
        )
        topic_cfg = {e["name"]: e for e in cfg["results"][0]["configs"]}
        assert topic_cfg["retention.ms"]["value"] == "60000"
        assert topic_cfg["retention.ms"]["is_default"] is False
        assert topic_cfg["segment.bytes"]["is_default"] is True
        broker_cfg = cfg["results"][1]["configs"]
        assert [e["name"] for e in broker_cfg] == ["num.io.threads"]
        assert cfg["results"][2]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        assert produce(c, "orders", 1, batch([b"x"]))["error_code"] == 0
        log_dir = broker_server.server.services.log_manager.get("orders", 1).directory
        assert log_dir.exists()
        resp = c.request(ApiKey.DELETE_TOPICS, 0, {"topic_names": ["orders", "ghost"]})
        codes = {r["name"]: r["error_code"] for r in resp["responses"]}
        assert codes == {"orders": 0, "ghost": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        wait_until(lambda: not log_dir.exists(), 5, "the deleted topic's log dir is removed")
        assert _metadata(c)["topics"] == []
        assert produce(c, "orders", 1, batch([b"x"]), corr=2)["error_code"] == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "slash/name", "ünïcode"])
def test_invalid_topic_names(broker_server, name):
    with RawClient(broker_server.address) as c:
        assert create_topic(c, name)["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_legal_edge_names(broker_server):
    with RawClient(broker_server.address) as c:
        for name in ["a" * 249, "a.b_c-D9", "..."]:
            assert create_topic(c, name)["error_code"] == 0, name


def test_metadata_auto_creates_topics(broker_server):
    with RawClient(broker_server.address) as c:
        meta = _metadata(c, ["fresh"], auto=True)
        (t,) = meta["topics"]
        assert t["error_code"] == 0 and len(t["partitions"]) == 1
        assert t["partitions"][0]["leader_id"] == 1
        meta = _metadata(c, ["other"], auto=False)
        assert meta["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_topics_and_records_survive_restart(broker_factory, tmp_path):
    data = tmp_path / "restart"
    first = broker_factory(data_dir=data)
    with RawClient(first.address) as c:
        assert create_topic(c, "keep", partitions=2)["error_code"] == 0
        for i in range(3):
            assert produce(c, "keep", i % 2, batch([b"r%d" % i]), corr=i + 1)["error_code"] == 0
        cluster_id = _metadata(c)["cluster_id"]
    first.server.shutdown(timeout=10)
    second = broker_factory(data_dir=data)
    with RawClient(second.address) as c:
        meta = _metadata(c)
        assert meta["cluster_id"] == cluster_id
        assert [t["name"] for t in meta["topics"]] == ["keep"]
        assert all(p["leader_id"] == 1 for p in meta["topics"][0]["partitions"])
        assert [v for _, v in values_of(fetch(c, "keep", 0, 0)["records"])] == [b"r0", b"r2"]
        assert [v for _, v in values_of(fetch(c, "keep", 1, 0)["records"])] == [b"r1"]
        assert produce(c, "keep", 1, batch([b"after"]))["base_offset"] == 1


def test_topic_configs_reach_the_log_and_retention_runs(broker_factory):
    broker = broker_factory(**{"log.retention.check.interval.ms": 20})
    with RawClient(broker.address) as c:
        configs = {"segment.bytes": "300", "retention.bytes": "400", "max.message.bytes": "500"}
        assert create_topic(c, "ret", configs=configs)["error_code"] == 0
        log = broker.server.services.log_manager.get("ret", 0)
        assert log.config.segment_bytes == 300 and log.config.max_message_bytes == 500
        assert produce(c, "ret", 0, batch([b"x" * 600]))["error_code"] == (
            ErrorCode.MESSAGE_TOO_LARGE
        )
        for i in range(12):
            assert produce(c, "ret", 0, batch([b"%03d" % i * 40]), corr=i + 2)["error_code"] == 0
        assert len(log.segment_base_offsets) > 2
        # the broker's periodic retention task deletes whole old segments
        wait_until(lambda: log.log_start_offset > 0, 10, "retention deleted old segments")
        # then let it reach its fixed point (the periodic task may still be mid-way)
        wait_until(lambda: broker.server.node.run_retention() == 0, 10, "retention settles")
        assert log.size_bytes <= 400 + 300
        first = fetch(c, "ret", 0, log.log_start_offset)
        assert values_of(first["records"])[0][0] == log.log_start_offset
        assert fetch(c, "ret", 0, 0)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE


def test_metadata_log_location(broker_factory, tmp_path):
    default = broker_factory(data_dir=tmp_path / "d1")
    assert (tmp_path / "d1" / "__cluster_metadata").is_dir()
    assert default.server.services.log_manager.logs() == {}
    explicit = tmp_path / "meta-elsewhere"
    broker_factory(data_dir=tmp_path / "d2", **{"metadata.log.dir": str(explicit)})
    assert explicit.is_dir() and not (tmp_path / "d2" / "__cluster_metadata").exists()
