"""client/cli/top_sample.py's arithmetic on two scrapes: rates over the interval, counter
resets, p99 from bucket differences, group lag summed over topics, endpoints parsed."""

from __future__ import annotations

import pytest

from client.cli.top_sample import Scrape, endpoint_url, quantile, sample


def broker(node: int, **values: float) -> dict:
    s = {("gregor_broker_info", (("node_id", str(node)),)): 1.0}
    for key, v in values.items():
        name, _, label = key.partition("__")
        labels = tuple(sorted(tuple(kv.split("=", 1)) for kv in label.split(",") if kv))
        s[(name, labels)] = v
    return s


def hist(api: str, counts: dict[str, float]) -> dict:
    return {("gregor_request_duration_seconds_bucket", (("api", api), ("le", le))): c
            for le, c in counts.items()}  # fmt: skip


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("127.0.0.1:9404", "http://127.0.0.1:9404/metrics"),
        ("http://h:1/", "http://h:1/metrics"),
        ("http://h:1/metrics", "http://h:1/metrics"),
    ],
)
def test_endpoints(given, url):
    assert endpoint_url(given) == url


@pytest.mark.parametrize("bad", ["nohost", "h:", ":9", "h:x"])
def test_bad_endpoints_are_refused(bad):
    with pytest.raises(ValueError, match="HOST:PORT"):
        endpoint_url(bad)


def test_quantile_interpolates_within_the_bucket_as_prometheus_does():
    # 100 observations: 50 under 1 ms, 49 more under 10 ms, 1 under 100 ms
    b = {0.001: 50.0, 0.01: 99.0, 0.1: 100.0, float("inf"): 100.0}
    assert quantile(0.5, b) == pytest.approx(0.001)
    assert quantile(0.99, b) == pytest.approx(0.01)
    assert quantile(0.995, b) == pytest.approx(0.01 + 0.09 * 0.5)
    assert quantile(0.99, {0.1: 0.0, float("inf"): 0.0}) is None


def test_rates_p99_resets_and_groups_over_two_scrapes():
    a0 = broker(
        4,
        gregor_partitions_leader=3,
        gregor_partitions=6,
        **{"gregor_topic_bytes_in_total__topic=t": 1000.0,
           "gregor_topic_bytes_out_total__topic=t": 0.0,
           "gregor_requests_total__api=PRODUCE": 10.0},
    )  # fmt: skip
    a0.update(hist("PRODUCE", {"0.001": 10.0, "0.01": 10.0, "+Inf": 10.0}))
    a1 = broker(
        4,
        gregor_partitions_leader=3,
        gregor_partitions=6,
        gregor_partitions_under_replicated=1,
        **{"gregor_topic_bytes_in_total__topic=t": 3000.0,
           "gregor_topic_bytes_out_total__topic=t": 500.0,
           "gregor_topic_records_out_total__topic=t": 40.0,
           "gregor_replica_lag_records__topic=t": 12.0,
           "gregor_replica_lag_records__topic=u": 3.0,
           "gregor_replica_lag_seconds__topic=t": 0.25,
           "gregor_replica_lag_seconds__topic=u": 4.5,
           "gregor_requests_total__api=PRODUCE": 110.0,
           "gregor_group_members__group=g": 2.0,
           "gregor_group_state__group=g,state=stable": 1.0,
           "gregor_group_state__group=g,state=empty": 0.0,
           "gregor_group_lag_records__group=g,topic=t": 5.0,
           "gregor_group_lag_records__group=g,topic=u": 7.0},
    )  # fmt: skip
    # the 100 produces of the interval all took 1..10 ms: p99 in that bucket, not the earlier
    a1.update(hist("PRODUCE", {"0.001": 10.0, "0.01": 110.0, "+Inf": 110.0}))
    # a restarted broker: its counter went back, counted from 0; it has
    # metrics.partition.labels=true: its partitions' series add up per topic
    b0 = broker(5, **{"gregor_topic_bytes_in_total__partition=0,topic=t": 9000.0})
    b1 = broker(
        5,
        **{"gregor_topic_bytes_in_total__partition=0,topic=t": 300.0,
           "gregor_topic_bytes_in_total__partition=1,topic=t": 100.0},
    )  # fmt: skip
    # the active controller (2 reassignments in flight) and a standby (its image lags)
    c_active = {("gregor_controller_active", ()): 1.0,
                ("gregor_controller_reassigning_partitions", ()): 2.0}  # fmt: skip
    c_standby = {("gregor_controller_active", ()): 0.0,
                 ("gregor_controller_reassigning_partitions", ()): 5.0}  # fmt: skip
    prev = Scrape(10.0, 0.0, {"a": a0, "b": b0, "c": None, "k1": c_active, "k2": c_standby})
    cur = Scrape(
        12.0, 2.0, {"a": a1, "b": b1, "c": None, "k1": c_active, "k2": c_standby}, {"c": "refused"}
    )
    s = sample(prev, cur)
    by_node = {b.get("node_id"): b for b in s["brokers"]}
    assert by_node[4]["bytes_in_per_s"] == 1000.0
    assert by_node[4]["bytes_out_per_s"] == 250.0
    assert by_node[4]["requests_per_s"] == 50.0
    assert 1.0 < by_node[4]["request_p99_ms"] <= 10.0
    assert by_node[4]["leaders"] == 3 and by_node[4]["partitions"] == 6
    assert by_node[4]["follower_lag_records"] == 12 and by_node[4]["follower_lag_s"] == 4.5
    assert by_node[5]["follower_lag_records"] == 0
    assert by_node[5]["bytes_in_per_s"] == 200.0
    assert by_node[None] == {"endpoint": "c", "up": False, "error": "refused"}
    assert s["partitions"] == {
        "under_replicated": 1,
        "under_min_isr": 0,
        "offline": 0,
        "reassigning": 2,
    }
    assert [c["reassigning"] for c in s["controllers"]] == [2, 5]
    assert s["topics"] == [
        {"topic": "t", "bytes_in_per_s": 1200.0, "bytes_out_per_s": 250.0,
         "records_in_per_s": 0.0, "records_out_per_s": 20.0}
    ]  # fmt: skip
    assert s["groups"] == [
        {"group": "g", "state": "stable", "members": 2, "lag": 12, "lag_by_topic": {"t": 5, "u": 7}}
    ]
    # one scrape alone has no rates
    assert sample(None, cur)["brokers"][0]["bytes_in_per_s"] is None
