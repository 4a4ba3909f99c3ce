"""What `gregor top` shows, computed from the nodes' metrics endpoints (docs/metrics.md):

    scrape(endpoints) -> Scrape                 # one GET /metrics per endpoint, parsed
    sample(previous, current) -> dict            # rates and p99 over the interval between two

Rates (bytes/s, requests/s) and the request p99 are over the interval between the two scrapes,
from counter and histogram-bucket differences (a counter that went back, a restarted node,
counts from 0); the counts (leaders, partitions, lag) are the current scrape's. The p99 is
interpolated within its bucket as Prometheus's histogram_quantile does.

`request_p99_ms` leaves out FETCH, whose latency is the consumer's own fetch.max.wait.ms by
design (followers long-poll all the time); it has a column of its own.
"""

from __future__ import annotations

import math
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass
class Scrape:
    """Each endpoint's samples (None: it did not answer, with the reason in `errors`)."""

    at: float  # monotonic seconds
    wall: float  # time.time()
    nodes: dict[str, Samples | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def endpoint_url(endpoint: str) -> str:
    """`HOST:PORT` or `http://HOST:PORT[/metrics]` -> the /metrics URL; ValueError otherwise."""
    e = endpoint.strip()
    if not e.startswith(("http://", "https://")):
        e = "http://" + e
    host_port = e.split("://", 1)[1].split("/", 1)[0]
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"not HOST:PORT or http://HOST:PORT: {endpoint!r}")
    return e if e.rstrip("/").endswith("/metrics") else e.rstrip("/") + "/metrics"


def scrape(endpoints: list[str], timeout: float = 2.0) -> Scrape:
    """GET every endpoint's /metrics at once (threads: one hung node costs `timeout`, not
    `timeout` per node)."""
    out = Scrape(time.monotonic(), time.time())
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(endpoints)))) as pool:
        got = list(pool.map(lambda e: _scrape_one(e, timeout), endpoints))
    for e, (samples, error) in zip(endpoints, got, strict=True):
        out.nodes[e] = samples
        if error is not None:
            out.errors[e] = error
    return out


def _scrape_one(endpoint: str, timeout: float) -> tuple[Samples | None, str | None]:
    try:
        with urllib.request.urlopen(endpoint_url(endpoint), timeout=timeout) as r:
            text = r.read().decode()
    except (OSError, urllib.error.URLError) as exc:
        return None, str(getattr(exc, "reason", exc))
    samples: Samples = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    except ValueError as exc:  # e.g. the port of something else
        return None, f"not Prometheus text: {exc}"
    return samples, None


def _get(s: Samples, name: str, **labels: str) -> float:
    return s.get((name, tuple(sorted(labels.items()))), 0.0)


def _by(s: Samples, name: str, label: str) -> dict[str, float]:
    """{label value: value} of the series of `name`, summed over their other labels (a node
    with metrics.partition.labels=true has a series per partition of each topic)."""
    out: dict[str, float] = {}
    for (n, lbl), v in s.items():
        if n == name:
            for k, x in lbl:
                if k == label:
                    out[x] = out.get(x, 0.0) + v
                    break
    return out


def _max(s: Samples, name: str) -> float:
    """The largest value among the series of `name` (0 without any)."""
    return max((v for (n, _), v in s.items() if n == name), default=0.0)


def _delta(cur: float, prev: float | None) -> float:
    return cur if prev is None or cur < prev else cur - prev  # reset: counted from 0


def _buckets(
    s: Samples, name: str, skip_api: str | None, only_api: str | None
) -> dict[float, float]:
    """Cumulative bucket counts of histogram `name` summed over its `api` series."""
    out: dict[float, float] = {}
    for (n, lbl), v in s.items():
        if n != name + "_bucket":
            continue
        labels = dict(lbl)
        api = labels.get("api")
        if (skip_api is not None and api == skip_api) or (only_api is not None and api != only_api):
            continue
        le = float(labels["le"])
        out[le] = out.get(le, 0.0) + v
    return out


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """histogram_quantile over cumulative `buckets` {upper bound: count}; None if empty."""
    if not buckets:
        return None
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for b in bounds:
        c = buckets[b]
        if c >= rank:
            if math.isinf(b):
                return prev_bound  # beyond the last finite bound: report that bound
            if c == prev_count:
                return b
            return prev_bound + (b - prev_bound) * (rank - prev_count) / (c - prev_count)
        prev_bound, prev_count = b, c
    return prev_bound


def _p99_ms(cur: Samples, prev: Samples | None, **which: str | None) -> float | None:
    name = "gregor_request_duration_seconds"
    now = _buckets(cur, name, which.get("skip"), which.get("only"))
    before = _buckets(prev, name, which.get("skip"), which.get("only")) if prev else {}
    diff = {le: _delta(c, before.get(le)) for le, c in now.items()}
    p = quantile(0.99, diff)
    return None if p is None else round(p * 1000, 3)


def sample(prev: Scrape | None, cur: Scrape, top_topics: int = 10) -> dict[str, Any]:
    """One view of the cluster (see the module docstring); `prev` None: rates over nothing
    (the counters' totals are not rates: every rate is None)."""
    seconds = None if prev is None else max(cur.at - prev.at, 1e-9)
    brokers = []
    controllers = []
    topics: dict[str, dict[str, float]] = {}
    groups: dict[str, dict[str, Any]] = {}
    under_replicated = under_min_isr = offline = 0.0
    reassigning: int | None = None  # from the active controller's endpoint, if given

    def rate(cur_v: float, prev_v: float | None) -> float | None:
        return None if seconds is None else round(_delta(cur_v, prev_v) / seconds, 3)

    for endpoint, s in cur.nodes.items():
        before = None if prev is None else prev.nodes.get(endpoint)
        if s is None:
            brokers.append({"endpoint": endpoint, "up": False, "error": cur.errors.get(endpoint)})
            continue
        offline = max(offline, _get(s, "gregor_partitions_offline"))
        if _get(s, "gregor_controller_active") == 1:  # a controller, or a combined server
            reassigning = int(_get(s, "gregor_controller_reassigning_partitions"))
        info = _by(s, "gregor_broker_info", "node_id")
        if not info:  # a controller's endpoint
            controllers.append({
                "endpoint": endpoint,
                "up": True,
                "active": _get(s, "gregor_controller_active") == 1,
                "leader": int(_get(s, "gregor_raft_current_leader")),
                "epoch": int(_get(s, "gregor_raft_current_epoch")),
                "reassigning": int(_get(s, "gregor_controller_reassigning_partitions")),
            })  # fmt: skip
            continue
        ur = _get(s, "gregor_partitions_under_replicated")
        under_replicated += ur
        under_min_isr += _get(s, "gregor_partitions_under_min_isr")
        b_in = _by(s, "gregor_topic_bytes_in_total", "topic")
        b_out = _by(s, "gregor_topic_bytes_out_total", "topic")
        r_in = _by(s, "gregor_topic_records_in_total", "topic")
        r_out = _by(s, "gregor_topic_records_out_total", "topic")
        p_in = _by(before, "gregor_topic_bytes_in_total", "topic") if before else {}
        p_out = _by(before, "gregor_topic_bytes_out_total", "topic") if before else {}
        p_rin = _by(before, "gregor_topic_records_in_total", "topic") if before else {}
        p_rout = _by(before, "gregor_topic_records_out_total", "topic") if before else {}
        reqs = sum(_by(s, "gregor_requests_total", "api").values())
        p_reqs = sum(_by(before, "gregor_requests_total", "api").values()) if before else None
        brokers.append({
            "endpoint": endpoint,
            "up": True,
            "node_id": int(next(iter(info))),
            "leaders": int(_get(s, "gregor_partitions_leader")),
            "partitions": int(_get(s, "gregor_partitions")),
            "under_replicated": int(ur),
            "follower_lag_records": int(_max(s, "gregor_replica_lag_records")),
            "follower_lag_s": round(_max(s, "gregor_replica_lag_seconds"), 3),
            "bytes_in_per_s": rate(sum(b_in.values()), sum(p_in.values()) if before else None),
            "bytes_out_per_s": rate(sum(b_out.values()), sum(p_out.values()) if before else None),
            "requests_per_s": rate(reqs, p_reqs),
            "request_p99_ms": _p99_ms(s, before, skip="FETCH") if before else None,
            "fetch_p99_ms": _p99_ms(s, before, only="FETCH") if before else None,
        })  # fmt: skip
        for t in set(b_in) | set(b_out):
            acc = topics.setdefault(
                t,
                {"bytes_in_per_s": 0.0, "bytes_out_per_s": 0.0, "records_in_per_s": 0.0,
                 "records_out_per_s": 0.0},
            )  # fmt: skip
            if seconds is not None:
                acc["bytes_in_per_s"] += _delta(b_in.get(t, 0.0), p_in.get(t)) / seconds
                acc["bytes_out_per_s"] += _delta(b_out.get(t, 0.0), p_out.get(t)) / seconds
                acc["records_in_per_s"] += _delta(r_in.get(t, 0.0), p_rin.get(t)) / seconds
                acc["records_out_per_s"] += _delta(r_out.get(t, 0.0), p_rout.get(t)) / seconds

        def group(g: str) -> dict[str, Any]:
            return groups.setdefault(
                g, {"group": g, "state": "", "members": 0, "lag": 0, "lag_by_topic": {}}
            )

        for g, count in _by(s, "gregor_group_members", "group").items():
            group(g)["members"] += int(count)
        for (n, lbl), v in s.items():
            labels = dict(lbl)
            if n == "gregor_group_state" and v == 1:
                group(labels["group"])["state"] = labels["state"]
            elif n == "gregor_group_lag_records":
                entry = group(labels["group"])
                entry["lag"] += int(v)
                by_topic = entry["lag_by_topic"]
                by_topic[labels["topic"]] = by_topic.get(labels["topic"], 0) + int(v)
    ranked = sorted(
        topics.items(),
        key=lambda kv: (-(kv[1]["bytes_in_per_s"] + kv[1]["bytes_out_per_s"]), kv[0]),
    )
    busiest: list[dict[str, Any]] = [
        {"topic": t, **{k: round(x, 3) for k, x in r.items()}} for t, r in ranked[:top_topics]
    ]
    return {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(cur.wall)),
        "interval_s": None if seconds is None else round(seconds, 3),
        "brokers": sorted(brokers, key=lambda b: (b.get("node_id", 1 << 30), b["endpoint"])),
        "controllers": controllers,
        "partitions": {
            "under_replicated": int(under_replicated),
            "under_min_isr": int(under_min_isr),
            "offline": int(offline),
            # from the active controller's endpoint (None when none of those given is active)
            "reassigning": reassigning,
        },
        "topics": busiest,
        "groups": sorted(groups.values(), key=lambda g: (-g["lag"], g["group"])),
    }
