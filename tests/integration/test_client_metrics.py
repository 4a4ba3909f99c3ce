"""Producer.metrics() and Consumer.metrics() against a real broker: records, bytes, batches and
request latency of a producer; records consumed, fetch latency and per-partition lag of a
consumer (kafka-python's names)."""

from __future__ import annotations

from helpers import wait_until
from prometheus_client import CollectorRegistry, generate_latest

from client import Admin, Consumer, Producer, TopicPartition
from client.metrics import PrometheusCollector


def test_producer_and_consumer_metrics(broker_server):
    bootstrap = broker_server.bootstrap
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic("cm", 1, 1)
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as prod:
        assert prod.metrics()["producer-metrics"]["record-send-total"] == 0
        futures = [prod.send("cm", b"%05d" % i, partition=0) for i in range(100)]
        prod.flush()
        for f in futures:
            f.result(30)
        m = prod.metrics()["producer-metrics"]
        # registered in the application's own registry, read at scrape time
        registry = CollectorRegistry()
        registry.register(PrometheusCollector(prod.metrics, client_id="orders"))
        text = generate_latest(registry).decode()
    assert m["record-send-total"] == 100
    assert m["record-send-rate"] > 0
    assert m["request-total"] >= 1 and m["request-latency-avg"] > 0
    assert m["request-latency-max"] >= m["request-latency-avg"]
    assert 0 < m["batch-size-avg"] <= m["batch-size-max"]
    assert m["byte-total"] >= m["batch-size-avg"]
    assert 1 <= m["records-per-request-avg"] <= 100
    assert m["record-error-total"] == 0 and m["record-retry-total"] == 0
    assert (
        'gregor_client_record_send_total{client_id="orders",group="producer-metrics"} 100.0' in text
    )
    assert "# TYPE gregor_client_request_latency_avg gauge" in text

    consumer = Consumer(bootstrap_servers=bootstrap, max_poll_records=60)
    try:
        consumer.assign([TopicPartition("cm", 0)])
        consumer.seek_to_beginning(TopicPartition("cm", 0))
        got = wait_until(lambda: consumer.poll(500), 30, "the first poll's records")
        assert len(got) == 60
        c = consumer.metrics()["consumer-fetch-manager-metrics"]
        assert c["records-consumed-total"] == 60
        registry = CollectorRegistry()
        registry.register(PrometheusCollector(consumer.metrics))
        lag = registry.get_sample_value(
            "gregor_client_records_lag",
            {"group": "consumer-fetch-manager-metrics", "client_id": "", "partition": "cm-0"},
        )
        assert lag == 40
        assert c["cm-0.records-lag"] == 40 and c["records-lag-max"] == 40
        assert c["fetch-total"] >= 1 and c["fetch-latency-avg"] > 0
        assert c["bytes-consumed-total"] > 0
        wait_until(lambda: consumer.poll(500), 30, "the rest")
        c = consumer.metrics()["consumer-fetch-manager-metrics"]
        assert c["records-consumed-total"] == 100 and c["records-lag-max"] == 0
    finally:
        consumer.close()
