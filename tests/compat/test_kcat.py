"""kcat (Debian's package, librdkafka inside) through the Kafka listener: metadata with the
Kafka listener's advertised addresses, idempotent produce and consume, and records crossing
protocols unchanged in both directions (keys, values, headers, timestamps, offsets)."""

from __future__ import annotations

import json
import subprocess

from helpers import wait_until

from client import Consumer, Producer, TopicPartition


def _kcat(kcat: str, broker: str, *args: str, stdin: bytes = b"", timeout: float = 60) -> str:
    out = subprocess.run(
        [kcat, "-b", broker, *args], input=stdin, capture_output=True, timeout=timeout
    )
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return out.stdout.decode()


def _kcat_read(kcat: str, broker: str, topic: str, n: int) -> list[dict]:
    out = _kcat(kcat, broker, "-C", "-t", topic, "-o", "beginning", "-c", str(n), "-J", "-e")
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _gregor_read(bootstrap: str, topic: str, n: int) -> list:
    got: list = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        c.seek_to_beginning()
        wait_until(lambda: got.extend(c.poll(0.5)) or len(got) >= n, 30, f"{n} records")
    return got


def test_metadata_gives_the_kafka_listeners_addresses(kafka_broker, kcat) -> None:
    md = json.loads(_kcat(kcat, kafka_broker.kafka, "-L", "-J"))
    port = int(kafka_broker.kafka.rsplit(":", 1)[1])
    assert [(b["id"], b["name"]) for b in md["brokers"]] == [(1, f"localhost:{port}")]


def test_kcat_produces_gregor_reads_the_same_records(kafka_broker, kcat) -> None:
    lines = b"".join(b"key-%d:value-%d\n" % (i, i) for i in range(50))
    _kcat(
        kcat, kafka_broker.kafka, "-P", "-t", "k2g", "-K:", "-H", "trace=abc", "-H", "n=1",
        "-X", "enable.idempotence=true", "-X", "acks=all", stdin=lines,
    )  # fmt: skip
    theirs = _kcat_read(kcat, kafka_broker.kafka, "k2g", 50)
    ours = _gregor_read(kafka_broker.gregor, "k2g", 50)
    assert len(theirs) == len(ours) == 50
    for t, r in zip(theirs, ours, strict=True):
        assert (r.offset, r.timestamp) == (t["offset"], t["ts"])
        assert (r.key, r.value) == (t["key"].encode(), t["payload"].encode())
        assert list(r.headers) == [("trace", b"abc"), ("n", b"1")]
        assert t["headers"] == ["trace", "abc", "n", "1"]
    assert [r.value for r in ours] == [b"value-%d" % i for i in range(50)]


def test_gregor_produces_kcat_reads_the_same_records(kafka_broker, kcat) -> None:
    sent = []
    with Producer(bootstrap_servers=kafka_broker.gregor, linger_ms=5, compression_type="gzip") as p:
        futures = []
        for i in range(30):
            rec = (b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], 1_700_000_000_000 + i)
            sent.append(rec)
            futures.append(
                p.send("g2k", rec[1], key=rec[0], headers=rec[2], timestamp_ms=rec[3], partition=0)
            )
        offsets = [f.result(30).offset for f in futures]
    theirs = _kcat_read(kcat, kafka_broker.kafka, "g2k", 30)
    assert [t["offset"] for t in theirs] == offsets == list(range(30))
    for t, (key, value, headers, ts) in zip(theirs, sent, strict=True):
        assert (t["key"], t["payload"], t["ts"]) == (key.decode(), value.decode(), ts)
        assert t["headers"] == [headers[0][0], headers[0][1].decode()]


def test_kcat_balanced_consumer_in_a_group(kafka_broker, kcat) -> None:
    lines = b"".join(b"g-%d\n" % i for i in range(20))
    _kcat(kcat, kafka_broker.kafka, "-P", "-t", "kgroup", "-p", "0", stdin=lines)
    out = _kcat(
        kcat, kafka_broker.kafka, "-G", "kcat-group", "-c", "20", "-f", "%o %s\\n",
        "-X", "auto.offset.reset=earliest", "kgroup",
    )  # fmt: skip
    assert out.splitlines() == [f"{i} g-{i}" for i in range(20)]
    # kcat's consumer commits on close (enable.auto.commit): Gregor's admin sees the offset
    from client import Admin

    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        group = admin.describe_group("kcat-group")
    assert [(p.topic, p.partition, p.committed_offset) for p in group.partitions] == [
        ("kgroup", 0, 20)
    ]


def test_metrics_count_kafka_requests(broker_factory, kcat) -> None:
    """With metrics.listener on, Kafka requests are counted like native ones (and an error
    code a Kafka answer carries shows in the error counter)."""
    import urllib.request

    b = broker_factory(
        listeners="GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0",
        **{"metrics.listener": "http://127.0.0.1:0"},
    )
    kafka = next(e for e in b.server.listeners.bind if e.name == "KAFKA")
    broker = f"127.0.0.1:{kafka.port}"
    _kcat(kcat, broker, "-P", "-t", "metered", "-p", "0", stdin=b"a\nb\n")
    assert len(_kcat_read(kcat, broker, "metered", 2)) == 2
    host, port = b.server.metrics_address
    text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    produced = [
        line for line in text.splitlines()
        if line.startswith("gregor_requests_total") and 'api="PRODUCE"' in line
    ]  # fmt: skip
    assert produced and float(produced[0].rsplit(" ", 1)[1]) >= 1, produced
