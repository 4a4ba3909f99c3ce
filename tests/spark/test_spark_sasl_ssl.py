"""The Spark source and sink over SASL_SSL on a real broker (docs/spark.md, "Security"), through
a real local[2] SparkSession: Spark-Kafka security options (kafka.security.protocol,
kafka.sasl.mechanism, kafka.sasl.jaas.config or kafka.sasl.username/password, a PEM
truststore or kafka.ssl.cafile) reach every client the connector opens, on the driver and in
the tasks; a wrong password fails the query with the broker's refusal as the first line; a
JKS truststore is refused at load(), before anything connects.

The broker's only other listener is a PLAINTEXT one the test uses to create the user (docs/
security.md, "The first user"); Spark is given the SASL_SSL listener only."""

from __future__ import annotations

from typing import Any

import pytest
from tls_certs import Pki

from client import Admin, Consumer, Producer, TopicPartition

# long tier: the SASL_SSL options are checked without Spark in test_spark_security_options.py
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.long, pytest.mark.timeout(900)]

USER, PASSWORD = "spark-job", "spark-secret-5521"


@pytest.fixture
def sasl_ssl_broker(broker_factory, tmp_path):
    pki = Pki(tmp_path / "pki")
    node = pki.issue("broker-1")
    b = broker_factory(
        listeners="INTERNAL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        inter_broker_listener_name="INTERNAL",
        **{
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
            "ssl.certfile": node.cert,
            "ssl.keyfile": node.key,
            "connection.failed.authentication.delay.ms": 50,
        },
    )
    ports = {e.name: e.port for e in b.server.listeners.bind}
    with Admin(bootstrap_servers=f"127.0.0.1:{ports['INTERNAL']}") as admin:
        admin.create_user(USER, PASSWORD, mechanism="SCRAM-SHA-512")
    b.secure_bootstrap, b.ca = f"127.0.0.1:{ports['SASL_SSL']}", pki.ca
    return b


def _client(b: Any) -> dict[str, str]:
    return {
        "bootstrap_servers": b.secure_bootstrap,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": USER,
        "sasl_password": PASSWORD,
        "ssl_cafile": b.ca,
    }


def _jaas(user: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required"
        f' username="{user}" password="{password}";'
    )


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0]


def test_read_and_write_a_topic_over_sasl_ssl(spark: Any, sasl_ssl_broker: Any) -> None:
    b = sasl_ssl_broker
    with Admin(**_client(b)) as admin:
        admin.create_topic("in", partitions=2)
        admin.create_topic("out", partitions=2)
    with Producer(acks="all", **_client(b)) as p:
        for f in [p.send("in", b"v%d" % i, key=b"k%d" % i, partition=i % 2) for i in range(20)]:
            f.result(30)
    # Spark's Kafka spelling: JAAS and a PEM truststore
    df = (
        spark.read.format("gregor")
        .option("kafka.bootstrap.servers", b.secure_bootstrap)
        .option("kafka.security.protocol", "SASL_SSL")
        .option("kafka.sasl.mechanism", "SCRAM-SHA-512")
        .option("kafka.sasl.jaas.config", _jaas(USER, PASSWORD))
        .option("kafka.ssl.truststore.type", "PEM")
        .option("kafka.ssl.truststore.location", b.ca)
        .option("subscribe", "in")
        .load()
    )
    rows = df.collect()
    assert sorted(r.value for r in rows) == sorted(b"v%d" % i for i in range(20))
    # Gregor's own keys for the sink: every row lands in "out"
    (
        df.selectExpr("key", "value")
        .write.format("gregor")
        .option("bootstrap.servers", b.secure_bootstrap)
        .option("kafka.security.protocol", "SASL_SSL")
        .option("kafka.sasl.mechanism", "SCRAM-SHA-512")
        .option("kafka.sasl.username", USER)
        .option("kafka.sasl.password", PASSWORD)
        .option("kafka.ssl.cafile", b.ca)
        .option("topic", "out")
        .mode("append")
        .save()
    )
    with Consumer(**_client(b)) as c:
        tps = [TopicPartition("out", p) for p in range(2)]
        c.assign(tps)
        ends = c.end_offsets(tps)
        assert sum(ends.values()) == 20
        for tp in tps:
            c.seek(tp, 0)
        got: list[bytes] = []
        while any(c.position(tp) < ends[tp] for tp in tps):
            got.extend(r.value for r in c.poll(timeout_ms=500))
    assert sorted(got) == sorted(b"v%d" % i for i in range(20))


def test_a_wrong_password_fails_clearly(spark: Any, sasl_ssl_broker: Any) -> None:
    b = sasl_ssl_broker
    with Admin(**_client(b)) as admin:
        admin.create_topic("locked", partitions=1)
    with pytest.raises(Exception) as ei:  # noqa: PT011 - PySpark's wrapper of the driver error
        (
            spark.read.format("gregor")
            .option("kafka.bootstrap.servers", b.secure_bootstrap)
            .option("kafka.security.protocol", "SASL_SSL")
            .option("kafka.sasl.mechanism", "SCRAM-SHA-512")
            .option("kafka.sasl.jaas.config", _jaas(USER, "not-the-password"))
            .option("kafka.ssl.cafile", b.ca)
            .option("subscribe", "locked")
            .load()
            .collect()
        )
    first = _first_line(ei.value)
    assert "GregorSparkError: [SASL_AUTHENTICATION_FAILED] authentication as 'spark-job'" in first
    assert "with SCRAM-SHA-512" in first and "invalid credentials" in first, first
    assert "not-the-password" not in str(ei.value)  # the password is never echoed
    with pytest.raises(Exception) as ei:  # noqa: PT011
        (
            spark.read.format("gregor")
            .option("kafka.bootstrap.servers", b.secure_bootstrap)
            .option("kafka.security.protocol", "SASL_SSL")
            .option("kafka.ssl.truststore.location", "/etc/kafka/truststore.jks")
            .option("subscribe", "locked")
            .load()
        )
    first = _first_line(ei.value)
    assert "option 'kafka.ssl.truststore.location': a JKS store is not supported" in first
    assert "kafka.ssl.cafile" in first
