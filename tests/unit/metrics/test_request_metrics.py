"""broker/request_metrics.py without a broker: the stage histograms a network thread records
from a request's timestamps, summed over threads at scrape time; error codes found at any depth
of a response; the threads' busy counters."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from helpers import wait_until
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.request_metrics import (
    ErrorCounter,
    RequestCollector,
    StageRecorder,
    thread_cpu_seconds,
)
from client.protocol.api_keys import ApiKey

MS = 1_000_000


def values(registry: CollectorRegistry) -> dict[tuple[str, tuple], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def request(api, received, dequeued, local_done, responded, sent=0):
    return SimpleNamespace(
        api_key=int(api),
        received_ns=received,
        dequeued_ns=dequeued,
        local_done_ns=local_done,
        responded_ns=responded,
        sent_ns=sent,
    )


def collector(recorders, io_busy=None):
    procs = [SimpleNamespace(recorder=r, native_thread_id=None) for r in recorders]
    pool = None if io_busy is None else SimpleNamespace(busy_ns=io_busy)
    registry = CollectorRegistry()
    registry.register(RequestCollector(lambda: procs, lambda: pool))
    return registry


def stage(v, api, name, suffix, le=None):
    labels = [("api", api), ("stage", name)]
    if le is not None:
        labels.append(("le", le))
    return v[(f"gregor_request_stage_duration_seconds_{suffix}", tuple(sorted(labels)))]


def test_each_stage_gets_its_own_time_and_threads_are_summed():
    a, b = StageRecorder(), StageRecorder()
    # a produce parked in purgatory: 1 ms queued, 2 ms local, 30 ms remote, then the network
    # thread picks it up 4 ms later and hands it to the socket 0.5 ms after that
    a.sent(request(ApiKey.PRODUCE, 0, 1 * MS, 3 * MS, 33 * MS), 37 * MS, 37 * MS + MS // 2)
    # answered on the I/O thread and written directly: no response queue
    b.sent(
        request(ApiKey.PRODUCE, 0, 2 * MS, 3 * MS, 3 * MS, sent=3 * MS + 100_000), 9 * MS, 9 * MS
    )
    b.sent(request(ApiKey.METADATA, 0, 0, 0, MS), MS, MS)
    v = values(collector([a, b]))
    assert v[("gregor_requests_total", (("api", "PRODUCE"),))] == 2
    assert v[("gregor_requests_total", (("api", "METADATA"),))] == 1
    assert stage(v, "PRODUCE", "request_queue", "sum") == 0.003
    assert stage(v, "PRODUCE", "local", "sum") == 0.003
    assert stage(v, "PRODUCE", "remote", "sum") == 0.030
    assert stage(v, "PRODUCE", "response_queue", "sum") == 0.004
    assert abs(stage(v, "PRODUCE", "response_send", "sum") - 0.0006) < 1e-12
    assert stage(v, "PRODUCE", "remote", "count") == 2
    # the 30 ms lands in the 50 ms bucket, the 0 ms remote of the direct one in the first
    assert stage(v, "PRODUCE", "remote", "bucket", "0.025") == 1
    assert stage(v, "PRODUCE", "remote", "bucket", "0.05") == 2
    assert stage(v, "PRODUCE", "remote", "bucket", "0.0001") == 1
    total = ("gregor_request_duration_seconds_sum", (("api", "PRODUCE"),))
    assert abs(v[total] - (0.0375 + 0.0031)) < 1e-12
    # the stages add up to the total
    stages = ("request_queue", "local", "remote", "response_queue", "response_send")
    assert abs(sum(stage(v, "PRODUCE", s, "sum") for s in stages) - v[total]) < 1e-12


def test_unset_timestamps_count_as_no_time_and_clock_skew_is_not_negative():
    r = StageRecorder()
    # never went through the I/O pool; local_done a hair after responded (two threads' clocks)
    r.sent(request(ApiKey.FETCH, 0, 0, 5 * MS + 10, 5 * MS), 6 * MS, 6 * MS)
    v = values(collector([r]))
    assert stage(v, "FETCH", "request_queue", "sum") == 0
    assert stage(v, "FETCH", "remote", "sum") == 0
    assert stage(v, "FETCH", "response_queue", "sum") == 0.001


def test_errors_are_counted_at_any_depth_by_code_name():
    registry = CollectorRegistry()
    errors = ErrorCounter(registry)
    errors.count(
        ApiKey.PRODUCE,
        {
            "responses": [
                {
                    "name": "t",
                    "partitions": [
                        {"index": 0, "error_code": 6},
                        {"index": 1, "error_code": 0},
                        {"index": 2, "error_code": 6},
                    ],
                }
            ]
        },
    )
    errors.count(ApiKey.METADATA, {"error_code": 0, "topics": []})
    errors.count(ApiKey.FETCH, {"error_code": 35, "records": b"\x00"})
    v = values(registry)
    assert (
        v[
            (
                "gregor_request_errors_total",
                (("api", "PRODUCE"), ("error", "NOT_LEADER_OR_FOLLOWER")),
            )
        ]
        == 2
    )
    assert (
        v[("gregor_request_errors_total", (("api", "FETCH"), ("error", "UNSUPPORTED_VERSION")))]
        == 1
    )
    assert not any(
        ("api", "METADATA") in k[1] for k in v if k[0].startswith("gregor_request_errors")
    )


def test_busy_counters_read_the_io_pool_and_thread_cpu_time():
    v = values(collector([], io_busy=[2 * 10**9, 10**9]))
    assert v[("gregor_io_thread_busy_seconds_total", ())] == 3.0
    assert v[("gregor_io_threads", ())] == 2
    # a thread that spins has CPU time; one that does not exist has none
    stop = threading.Event()
    t = threading.Thread(target=lambda: [None for _ in iter(stop.is_set, True)])
    t.start()
    try:
        wait_until(lambda: thread_cpu_seconds(t.native_id) > 0.01, 10, "spinning thread's CPU")
    finally:
        stop.set()
        t.join()
    assert thread_cpu_seconds(2**30) == 0.0


def test_metadata_answers_count_topic_codes_not_partition_codes():
    registry = CollectorRegistry()
    ErrorCounter(registry).count(
        ApiKey.METADATA,
        {
            "error_code": 0,
            "topics": [
                {"name": "gone", "error_code": 3, "partitions": []},
                {"name": "t", "error_code": 0, "partitions": [{"error_code": 5}]},
            ],
        },
    )
    v = values(registry)
    err = (
        "gregor_request_errors_total",
        (("api", "METADATA"), ("error", "UNKNOWN_TOPIC_OR_PARTITION")),
    )
    assert v[err] == 1
    assert not any("LEADER_NOT_AVAILABLE" in str(k) for k in v)


def test_made_up_api_keys_share_one_series():
    r = StageRecorder()
    for key in (999, 5000, 12345):
        r.sent(request(key, 0, 0, 0, MS), MS, MS)
    registry = CollectorRegistry()
    errors = ErrorCounter(registry)
    for key in (999, 5000):
        errors.count(key, {"error_code": 35})
    v = values(collector([r]))
    assert v[("gregor_requests_total", (("api", "UNKNOWN"),))] == 3
    assert len({k for k in v if k[0] == "gregor_requests_total"}) == 1
    err = values(registry)
    assert (
        err[("gregor_request_errors_total", (("api", "UNKNOWN"), ("error", "UNSUPPORTED_VERSION")))]
        == 2
    )
