"""The rate and throttle math of client quotas (broker/quota/rate.py) and the quota resolution
and sharing of QuotaManager, with time as an input: Kafka's sampled windows, its throttle
formula, and its entity order."""

from __future__ import annotations

import random

import pytest

from broker.quota.manager import QuotaManager, user_of
from broker.quota.rate import SampledRate, throttle_ms
from client.quotas import quota_for, resolution_order, sensor_tags


def test_rate_counts_at_least_num_minus_one_windows() -> None:
    r = SampledRate(11, 1000, now_ms=0)
    r.record(10_000, 0)
    # one burst at t=0 reads as spread over 10 windows, not as an infinite rate
    assert r.elapsed_ms(0) == 10_000
    assert r.measure(0) == pytest.approx(1000.0)
    r.record(10_000, 5_500)
    # 5.5 s elapsed: 5 whole windows, padded by the 5 missing to 10 → over 10.5 s
    assert r.measure(5_500) == pytest.approx(20_000 / 10.5)


def test_old_samples_roll_out() -> None:
    r = SampledRate(3, 1000, now_ms=0)
    r.record(3000, 0)
    r.record(1000, 1000)
    r.record(1000, 2000)
    assert r.measure(2000) == pytest.approx(5000 / 2.0)
    r.record(0, 3000)  # the fourth window reuses the first sample: its 3000 are gone
    assert r.measure(3000) == pytest.approx(2000 / 2.0)
    assert r.measure(100_000) == 0.0  # everything expired


def test_throttle_formula_is_kafkas() -> None:
    r = SampledRate(11, 1000, now_ms=0)
    r.record(20_000, 0)  # 2000/s measured over 10 s against a bound of 1000/s
    # (2000 - 1000) / 1000 * 10 s: the time for the rate to fall back to the bound
    assert throttle_ms(r, 1000.0, 0, 11_000) == 10_000
    assert throttle_ms(r, 2000.0, 0, 11_000) == 0
    assert throttle_ms(r, 100.0, 0, 11_000) == 11_000  # capped


def test_a_client_that_honours_throttle_converges_to_its_quota() -> None:
    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    quota = 100_000.0
    m = QuotaManager(lambda: {(("user", "alice"),): {"producer_byte_rate": quota}}, num_samples=11)
    now, sent = 0.0, 0
    while now < 120_000:
        size = rng.randint(1000, 30_000)
        sent += size
        wait = m.record("producer_byte_rate", "alice", "c1", size, now)
        now += wait + rng.uniform(0.5, 5)
    rate = sent / (now / 1000.0)
    assert quota * 0.8 < rate < quota * 1.15, rate


def test_resolution_order_is_kafkas() -> None:
    order = [e for e, _ in resolution_order("alice", "app")]
    assert order == [
        (("client-id", "app"), ("user", "alice")),
        (("client-id", None), ("user", "alice")),
        (("user", "alice"),),
        (("client-id", "app"), ("user", None)),
        (("client-id", None), ("user", None)),
        (("user", None),),
        (("client-id", "app"),),
        (("client-id", None),),
    ]


def test_most_specific_entity_per_key_wins() -> None:
    quotas = {
        (("client-id", None),): {"producer_byte_rate": 1.0, "consumer_byte_rate": 9.0},
        (("user", None),): {"producer_byte_rate": 2.0},
        (("user", "alice"),): {"producer_byte_rate": 3.0},
        (("client-id", "app"), ("user", "alice")): {"request_percentage": 50.0},
    }
    assert quota_for(quotas, "producer_byte_rate", "alice", "app") == (3.0, (("user", "alice"),))
    assert quota_for(quotas, "producer_byte_rate", "bob", "app") == (2.0, (("user", "bob"),))
    assert quota_for(quotas, "consumer_byte_rate", "bob", "x") == (9.0, (("client-id", "x"),))
    assert quota_for(quotas, "request_percentage", "alice", "other") is None
    assert quota_for(quotas, "request_percentage", "alice", "app") == (
        50.0,
        (("client-id", "app"), ("user", "alice")),
    )


def test_sharing_follows_the_entity() -> None:
    # a user's quota is shared by its client ids; a default user's is per user
    assert sensor_tags((("user", "alice"),), "alice", "a") == sensor_tags(
        (("user", "alice"),), "alice", "b"
    )
    q = {(("user", "alice"),): {"producer_byte_rate": 1000.0}}
    m = QuotaManager(lambda: q)
    m.record("producer_byte_rate", "alice", "a", 15_000, 0)
    assert m.record("producer_byte_rate", "alice", "b", 1, 0) > 0  # same rate as client a
    assert m.record("producer_byte_rate", "bob", "b", 1_000_000, 0) == 0  # no quota for bob
    d = {(("user", None),): {"producer_byte_rate": 1000.0}}
    m2 = QuotaManager(lambda: d)
    m2.record("producer_byte_rate", "alice", "a", 15_000, 0)
    assert m2.record("producer_byte_rate", "bob", "a", 1, 0) == 0  # bob has a rate of his own
    assert m2.rate_count() == 2


def test_no_quotas_records_nothing_and_principal_names() -> None:
    m = QuotaManager(dict)
    assert m.record("producer_byte_rate", "a", "b", 1e12, 0) == 0 and m.rate_count() == 0
    assert user_of("User:alice") == "alice" and user_of("User:ANONYMOUS") == "ANONYMOUS"


def test_followers_and_handshakes_are_exempt() -> None:
    from types import SimpleNamespace

    q = {(("client-id", None),): {"request_percentage": 1e-9, "consumer_byte_rate": 1.0}}
    m = QuotaManager(lambda: q)
    conn = SimpleNamespace(principal="User:ANONYMOUS")

    def req(api_key: int, body: dict) -> SimpleNamespace:
        return SimpleNamespace(api_key=api_key, connection=conn, client_id="c", size=100,
                               body=body, dequeued_ns=1, local_done_ns=1_000_000, quota_sent=None)  # fmt: skip

    assert m.throttle(req(1, {"replica_id": 4}), 10**9) == 0  # a follower's fetch
    assert m.throttle(req(23, {"replica_id": 4}), 10) == 0  # its OffsetForLeaderEpoch
    assert m.throttle(req(18, {}), 10) == 0  # ApiVersions
    assert m.rate_count() == 0
    r = req(1, {"replica_id": -1})
    assert m.throttle(r, 10**9) > 0 and r.quota_sent is not None  # a consumer's fetch
