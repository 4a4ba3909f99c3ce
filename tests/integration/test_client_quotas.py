"""Client quotas over a real broker (docs/security.md, "Quotas"): AlterClientQuotas and
DescribeClientQuotas round trips (Admin and `gregor quotas`), a producer over its byte rate
slowed to about its quota with throttle_time_ms reported and nothing refused or lost, a
consumer over its fetch byte rate likewise, entity resolution deciding which client is
throttled, and the broker's throttle metric."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request

import pytest
from helpers import gregor_command, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.aio.admin_quotas import (
    ClientQuotaAlteration,
    ClientQuotaEntity,
    ClientQuotaFilterComponent,
    Op,
)
from client.errors import InvalidRequestError

# short windows keep the first burst (num - 1 windows' worth of quota) small next to the run
WINDOWS = {"quota.window.num": 3, "quota.window.size.seconds": 1}


def entity(**kw: str | None) -> ClientQuotaEntity:
    return ClientQuotaEntity.of({k.replace("_", "-"): v for k, v in kw.items()})


def set_quota(admin: Admin, ent: ClientQuotaEntity, **values: float | None) -> None:
    ops = [Op(k, v) for k, v in values.items()]
    assert admin.alter_client_quotas([ClientQuotaAlteration(ent, ops)]) == {ent: None}


def wait_applied(broker, ent: ClientQuotaEntity, key: str) -> None:
    """The broker's image has the quota (alter answers once committed; applying follows)."""
    wait_until(
        lambda: key in broker.server.node.services.metadata.client_quotas.get(ent.entries, {}),
        10,
        f"{key} of {ent} applied on the broker",
    )


def test_alter_and_describe_round_trip(broker_factory) -> None:
    b = broker_factory()
    alice, dflt = entity(user="alice"), entity(user=None, client_id="etl")
    with Admin(bootstrap_servers=b.bootstrap) as admin:
        assert admin.describe_client_quotas() == {}
        set_quota(admin, alice, producer_byte_rate=1024, request_percentage=25.5)
        set_quota(admin, dflt, consumer_byte_rate=4096)
        assert admin.describe_client_quotas() == {
            alice: {"producer_byte_rate": 1024.0, "request_percentage": 25.5},
            dflt: {"consumer_byte_rate": 4096.0},
        }
        F = ClientQuotaFilterComponent
        assert admin.describe_client_quotas([F.of_entity("user", "alice")]) == {
            alice: {"producer_byte_rate": 1024.0, "request_percentage": 25.5}
        }
        assert list(admin.describe_client_quotas([F.of_default_entity("user")])) == [dflt]
        assert admin.describe_client_quotas([F.of_default_entity("user")], strict=True) == {}
        assert list(admin.describe_client_quotas([F.of_entity_type("client-id")])) == [dflt]
        with pytest.raises(InvalidRequestError, match="filtered twice"):
            admin.describe_client_quotas([F.of_entity_type("user"), F.of_default_entity("user")])
        # a bad entry is refused whole and says why; the good one next to it goes through
        bob = entity(user="bob")
        r = admin.alter_client_quotas(
            [
                ClientQuotaAlteration(bob, [Op("producer_byte_rate", 10), Op("nope", 1)]),
                ClientQuotaAlteration(alice, [Op("producer_byte_rate", None)]),
            ]
        )
        assert isinstance(r[bob], InvalidRequestError) and "unknown quota key" in str(r[bob])
        assert r[alice] is None
        # validate_only checks and changes nothing
        r = admin.alter_client_quotas(
            [ClientQuotaAlteration(bob, [Op("producer_byte_rate", 10)])], validate_only=True
        )
        assert r == {bob: None}
        assert admin.describe_client_quotas() == {
            alice: {"request_percentage": 25.5},
            dflt: {"consumer_byte_rate": 4096.0},
        }
    with pytest.raises(ValueError, match="unknown quota entity type"):
        ClientQuotaEntity.of({"ip": "1.2.3.4"})


def gregor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), *args], capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")},
    )  # fmt: skip


def test_quotas_cli(broker_factory) -> None:
    b = broker_factory()
    bs = ("--bootstrap-server", b.bootstrap)
    r = gregor("quotas", "set", "--user", "alice", "--producer-byte-rate", "1048576",
               "--request-percentage", "50", *bs)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "quotas of user=alice: producer_byte_rate=1048576, request_percentage=50" in r.stdout
    r = gregor("quotas", "set", "--user-default", "--client-id", "etl",
               "--consumer-byte-rate", "2048", *bs)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = gregor("quotas", "describe", *bs)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "client-id=etl, user=<default>\tconsumer_byte_rate=2048",
        "user=alice\tproducer_byte_rate=1048576, request_percentage=50",
    ]
    r = gregor("quotas", "set", "--user", "alice", "--delete", "producer_byte_rate", *bs)
    assert r.returncode == 0, r.stderr
    r = gregor("quotas", "describe", "--user", "alice", *bs)
    assert r.stdout.splitlines() == ["user=alice\trequest_percentage=50"], r
    r = gregor("quotas", "set", "--user", "alice", "--producer-byte-rate", "0", *bs)
    assert r.returncode == 1 and "expected a positive number" in r.stderr, r
    r = gregor("quotas", "set", "--producer-byte-rate", "10", *bs)
    assert r.returncode == 1 and "name the entity" in r.stderr, r


def metric(broker, name: str, quota: str) -> float:
    host, port = broker.server.metrics_address
    url = f"http://{host}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    for line in text.splitlines():
        if line.startswith(f'{name}{{quota="{quota}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_producer_over_its_byte_rate_is_slowed_to_about_the_quota(broker_factory) -> None:
    quota = 100_000  # bytes per second
    b = broker_factory(**WINDOWS, **{"metrics.listener": "http://127.0.0.1:0"})
    with Admin(bootstrap_servers=b.bootstrap) as admin:
        admin.create_topic("q-produce", 1, 1)
        set_quota(admin, entity(client_id="slow"), producer_byte_rate=quota)
        set_quota(admin, entity(client_id=None), producer_byte_rate=quota * 1000)
    wait_applied(b, entity(client_id="slow"), "producer_byte_rate")
    value = os.urandom(1000)
    n = 1200  # 12x the quota's bytes per second (and a few bytes of framing per record)
    # requests far smaller than the quota's windows hold (as Kafka's quotas assume): one
    # request of several windows' worth is let through whole, then throttled for long
    with Producer(
        bootstrap_servers=b.bootstrap, client_id="slow", linger_ms=5, max_request_size=20_000
    ) as prod:
        start = time.monotonic()
        futures = [prod.send("q-produce", value, partition=0) for _ in range(n)]
        prod.flush()
        offsets = [f.result(120).offset for f in futures]
        elapsed = time.monotonic() - start
        m = prod.metrics()["producer-metrics"]
    rate = m["byte-total"] / elapsed
    print(f"produced {m['byte-total']:.0f} bytes in {elapsed:.1f} s: {rate:.0f} B/s")
    assert rate < 1.5 * quota, rate
    assert m["produce-throttle-time-max"] > 0 and m["produce-throttle-time-avg"] > 0
    assert m["record-error-total"] == 0
    assert sorted(offsets) == list(range(n))  # nothing refused, nothing lost
    # the default client id's generous quota does not throttle another client
    with Producer(bootstrap_servers=b.bootstrap, client_id="fast", linger_ms=5) as prod:
        for f in [prod.send("q-produce", value, partition=0) for _ in range(200)]:
            f.result(60)
        assert prod.metrics()["producer-metrics"]["produce-throttle-time-max"] == 0
    assert metric(b, "gregor_quota_throttle_time_seconds_count", "producer_byte_rate") > 0


def test_consumer_over_its_fetch_rate_is_slowed_to_about_the_quota(broker_factory) -> None:
    quota = 200_000
    b = broker_factory(**WINDOWS)
    n, value = 2400, os.urandom(1000)
    with Admin(bootstrap_servers=b.bootstrap) as admin:
        admin.create_topic("q-fetch", 1, 1)
        with Producer(bootstrap_servers=b.bootstrap, linger_ms=5) as prod:
            for f in [prod.send("q-fetch", value, partition=0) for _ in range(n)]:
                f.result(60)
        set_quota(admin, entity(user="ANONYMOUS"), consumer_byte_rate=quota)
    wait_applied(b, entity(user="ANONYMOUS"), "consumer_byte_rate")
    consumer = Consumer(
        bootstrap_servers=b.bootstrap, client_id="reader", max_partition_fetch_bytes=64 * 1024
    )
    try:
        tp = TopicPartition("q-fetch", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got: list = []
        start = time.monotonic()

        def all_read() -> bool:
            got.extend(consumer.poll(200))
            return len(got) >= n

        wait_until(all_read, 120, "every record consumed")
        elapsed = time.monotonic() - start
        c = consumer.metrics()["consumer-fetch-manager-metrics"]
    finally:
        consumer.close()
    rate = c["bytes-consumed-total"] / elapsed
    print(f"consumed {c['bytes-consumed-total']:.0f} bytes in {elapsed:.1f} s: {rate:.0f} B/s")
    assert rate < 1.5 * quota, rate
    assert c["fetch-throttle-time-max"] > 0
    assert [r.offset for r in got] == list(range(n))


def test_request_percentage_throttles_and_the_broker_mutes_the_connection(
    broker_factory,
) -> None:
    from helpers import RawClient

    from client.protocol import ApiKey

    b = broker_factory()
    with Admin(bootstrap_servers=b.bootstrap) as admin:
        # 0.1% of one thread: 10 ms of request time over the 10 s measured
        set_quota(admin, entity(client_id="busy"), request_percentage=0.1)
    wait_applied(b, entity(client_id="busy"), "request_percentage")
    raw = RawClient(b.address)
    body = {"components": [], "strict": False}
    corr = 0

    def throttled() -> int:
        nonlocal corr
        corr += 1
        raw.send(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, corr, body, client_id="busy")
        got, resp = raw.recv()
        assert got == corr and resp["error_code"] == 0
        return resp["throttle_time_ms"]

    wait_ms = wait_until(throttled, 120, "a request answered with throttle_time_ms > 0")
    # the broker reads nothing more from the connection for that long (the answer came first)
    sent = time.monotonic()
    corr += 1
    raw.send(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, corr, body, client_id="busy")
    assert raw.recv(timeout=wait_ms / 1000 + 30)[0] == corr
    assert time.monotonic() - sent >= 0.5 * wait_ms / 1000
    raw.sock.close()
    # another client id is not throttled by it
    other = RawClient(b.address)
    other.send(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, body, client_id="calm")
    assert other.recv()[1]["throttle_time_ms"] == 0
    other.sock.close()


def test_entity_resolution_on_a_real_broker(broker_factory) -> None:
    """Kafka's order decides: a default-user quota (6th) beats a client-id quota (7th); a
    user + client-id quota (1st) beats both. Unauthenticated clients are user ANONYMOUS."""
    b = broker_factory()
    with Admin(bootstrap_servers=b.bootstrap) as admin:
        admin.create_topic("q-order", 1, 1)
        set_quota(admin, entity(user=None), producer_byte_rate=1000)
        set_quota(admin, entity(client_id="c1"), producer_byte_rate=1e9)
        set_quota(admin, entity(user="ANONYMOUS", client_id="c2"), producer_byte_rate=1e9)
    wait_applied(b, entity(user="ANONYMOUS", client_id="c2"), "producer_byte_rate")
    value = os.urandom(15_000)  # 1.5 s of 1000 B/s over the 10 s measured: throttled ~5 s

    def throttle_of(client_id: str) -> float:
        with Producer(bootstrap_servers=b.bootstrap, client_id=client_id) as prod:
            prod.send("q-order", value, partition=0).result(60)
            return prod.metrics()["producer-metrics"]["produce-throttle-time-max"]

    assert throttle_of("c1") > 0  # the default user's 1000 B/s, not client c1's own quota
    assert throttle_of("c2") == 0  # ANONYMOUS with c2: the most specific entity
