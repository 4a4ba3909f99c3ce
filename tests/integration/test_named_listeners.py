"""Two named listeners on one broker: each client is told the addresses advertised for the
listener it connected on (Metadata, DescribeCluster), and a producer and consumer that
bootstrap through either listener work end to end."""

from __future__ import annotations

from helpers import RawClient, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.protocol import ApiKey


def _two_listener_broker(broker_factory):
    # Both listeners on loopback; they advertise different host names (127.0.0.1 and
    # localhost) so the answer shows which listener it was computed for.
    return broker_factory(
        listeners="INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        advertised_listeners="INTERNAL://127.0.0.1:0,EXTERNAL://localhost:0",
        inter_broker_listener_name="INTERNAL",
    )


def test_metadata_answers_with_the_listener_the_request_came_in_on(broker_factory) -> None:
    b = _two_listener_broker(broker_factory)
    internal, external = b.server.listeners.bind
    assert (internal.name, external.name) == ("INTERNAL", "EXTERNAL")
    assert 0 not in (internal.port, external.port) and internal.port != external.port
    assert b.port == internal.port  # the first listener is the server's address
    answers = {}
    for e in (internal, external):
        with RawClient(("127.0.0.1", e.port)) as c:
            md = c.request(ApiKey.METADATA, 0, {"topics": None})  # (registered: start() waited)
            answers[e.name] = [(x["host"], x["port"]) for x in md["brokers"]]
            dc = c.request(ApiKey.DESCRIBE_CLUSTER, 0, {"include_fenced_brokers": True})
            assert [(x["host"], x["port"]) for x in dc["brokers"]] == answers[e.name]
    assert answers == {
        "INTERNAL": [("127.0.0.1", internal.port)],
        "EXTERNAL": [("localhost", external.port)],
    }
    reg = b.server.node.services.metadata.brokers[1]
    assert (reg.host, reg.port) == ("127.0.0.1", internal.port)  # inter-broker endpoint
    assert reg.endpoints == (
        ("INTERNAL", "127.0.0.1", internal.port),
        ("EXTERNAL", "localhost", external.port),
    )


def test_produce_through_one_listener_consume_through_the_other(broker_factory) -> None:
    b = _two_listener_broker(broker_factory)
    internal, external = b.server.listeners.bind
    with Admin(bootstrap_servers=f"127.0.0.1:{external.port}") as admin:
        admin.create_topic("t", partitions=2)
        brokers = admin.describe_cluster().brokers
        assert [(x.host, x.port) for x in brokers] == [("localhost", external.port)]
    with Producer(bootstrap_servers=f"127.0.0.1:{external.port}", linger_ms=0) as p:
        futures = [p.send("t", b"v%d" % i, partition=i % 2) for i in range(20)]
        for f in futures:
            f.result(30)
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    with Consumer(bootstrap_servers=f"127.0.0.1:{internal.port}") as c:
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got: list[bytes] = []

        def all_read() -> bool:
            got.extend(r.value for r in c.poll(500))
            return len(got) >= 20

        wait_until(all_read, 30, "20 records through the other listener")
    assert sorted(got) == sorted(b"v%d" % i for i in range(20))
