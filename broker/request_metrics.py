"""Request metrics of the broker (docs/metrics.md, "Requests"): the count, the latency per API
split into the stages of the request path, the errors by code, and how busy the threads are.

The stages (Kafka's RequestMetrics), from the timestamps a `Request` collects on its way:

    received_ns    frame read off the socket (network thread)       -> request_queue
    dequeued_ns    taken off the request channel (I/O thread)       -> local
    local_done_ns  its handler returned (or answered, if earlier)   -> remote (purgatory)
    responded_ns   the answer was handed on (any thread)            -> response_queue
    picked up by the network thread, or written directly (sent_ns)  -> response_send
    handed to the socket                                            (total: received..sent)

Recording is per network thread: each `Processor` owns a `StageRecorder` that only its thread
writes (plain integer arithmetic and one `bisect` per stage, no lock), and `RequestCollector`
sums them at scrape time into prometheus_client metric families (the exposition is still
prometheus_client's). A scrape may read a recorder between two increments of one request: the
next scrape has it; counts never go back.

Errors by code are counted on the answering thread from the response body (whole-request and
per-partition `error_code` fields), in a prometheus_client Counter: the walk is paid per
response, the lock only per error.

Threads: `StageRecorder.sent` on its network thread; `ErrorCounter.count` on any thread;
collectors on the scrape thread.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from client.errors import ErrorCode
from client.protocol.api_keys import ApiKey
from client.protocol.body import Body

if TYPE_CHECKING:
    from broker.network.request import Request

# request latency: 0.1 ms .. 10 s (a long-poll fetch waits up to fetch.max.wait.ms); also the
# stages', so that they add up bucket by bucket in a dashboard
LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)  # fmt: skip
_BOUNDS_NS = tuple(int(b * 1e9) for b in LATENCY_BUCKETS)
_NB = len(_BOUNDS_NS) + 1  # + the +Inf bucket

STAGES = ("request_queue", "local", "remote", "response_queue", "response_send")
_TOTAL = len(STAGES)  # index of the total in a recorder's rows


# API keys the protocol does not know share one label value, so a client sending made-up keys
# cannot grow the series without bound
_KNOWN = frozenset(int(k) for k in ApiKey)
UNKNOWN_API = -1


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return "UNKNOWN"


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class _ApiRows:
    """One API's histograms on one network thread: per stage (and the total) the bucket counts
    (not cumulative) and the sum in ns."""

    __slots__ = ("buckets", "sums")

    def __init__(self) -> None:
        self.buckets = [[0] * _NB for _ in range(_TOTAL + 1)]
        self.sums = [0] * (_TOTAL + 1)


class StageRecorder:
    """A network thread's request histograms. `sent` only from that thread."""

    def __init__(self) -> None:
        self.apis: dict[int, _ApiRows] = {}

    def sent(self, request: Any, picked_ns: int, end_ns: int) -> None:
        """`request` was answered and its answer handed to the socket at `end_ns` (picked up by
        the network thread at `picked_ns`; a request written directly by the answering thread
        has `sent_ns` set instead, and spent no time in the response queue)."""
        key = request.api_key
        rows = self.apis.get(key)
        if rows is None:
            if key not in _KNOWN:
                key = UNKNOWN_API
            rows = self.apis.get(key)
            if rows is None:
                rows = self.apis[key] = _ApiRows()
        queue_in, local, remote, queue, send, total = request_stages(request, picked_ns, end_ns)
        b, sums = rows.buckets, rows.sums
        # unrolled (a loop over the six cost ~1.5 µs more per request); a negative time is two
        # threads' clock reads a few ns apart: counted as 0 (bisect puts it in the first bucket)
        b[0][bisect_left(_BOUNDS_NS, queue_in)] += 1
        sums[0] += queue_in
        b[1][bisect_left(_BOUNDS_NS, local)] += 1
        sums[1] += local
        if remote > 0:
            sums[2] += remote
        b[2][bisect_left(_BOUNDS_NS, remote)] += 1
        b[3][bisect_left(_BOUNDS_NS, queue)] += 1
        if queue > 0:
            sums[3] += queue
        b[4][bisect_left(_BOUNDS_NS, send)] += 1
        if send > 0:
            sums[4] += send
        b[5][bisect_left(_BOUNDS_NS, total)] += 1
        sums[5] += total


def request_stages(
    request: Request, picked_ns: int, end_ns: int
) -> tuple[int, int, int, int, int, int]:
    """The stages of an answered request, ns: (request queue, local, remote, response queue,
    send, total), as `StageRecorder.sent` gets it (scripts/bench/broker_probe records them
    per request). The five add up to the total."""
    received = request.received_ns
    dequeued = request.dequeued_ns or received
    responded = request.responded_ns or picked_ns
    local = request.local_done_ns or responded
    direct = request.sent_ns
    if direct:
        queue, send, end_ns = 0, direct - responded, direct
    else:
        queue, send = picked_ns - responded, end_ns - picked_ns
    return (
        dequeued - received,
        local - dequeued,
        responded - local,
        queue,
        send,
        end_ns - received,
    )


class ErrorCounter:
    """Error codes in responses, by API and code (Kafka: ErrorsPerSec). Any thread."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._errors = Counter(
            "gregor_request_errors",
            "error codes in responses, whole-request and per partition, by API and error"
            " (Kafka: ErrorsPerSec)",
            ["api", "error"],
            registry=registry,
        )

    def count(self, api_key: int, body: Body) -> None:
        found: dict[int, int] = {}
        _walk(body, found, 1 if api_key == _METADATA else 8)
        for code, n in found.items():
            self._errors.labels(api_name(api_key), error_name(code)).inc(n)


# Metadata answers are walked to their topics only: their per-partition entries are thousands
# of cached maps, sent without a walk (broker/handlers/metadata.py), and a partition's code there
# (LEADER_NOT_AVAILABLE) describes the cluster, not a failed request
_METADATA = int(ApiKey.METADATA)


def _walk(node: Body, found: dict[int, int], depth: int) -> None:
    """Count the non-zero `error_code` fields of a response body, `depth` levels down its
    nested lists of maps (records are bytes: not walked)."""
    code = node.get("error_code")
    if code:
        found[code] = found.get(code, 0) + 1
    if depth:
        for v in node.values():
            if type(v) is list and v and type(v[0]) is dict:
                for item in v:
                    _walk(item, found, depth - 1)


class RequestCollector(Collector):
    """Sums the network threads' recorders at scrape time; also the thread busy counters.
    `processors()` the network threads (each with `.recorder` and `.native_thread_id`),
    `io_pool()` the I/O pool (None before it starts)."""

    def __init__(self, processors: Callable[[], list[Any]], io_pool: Callable[[], Any]) -> None:
        self._processors = processors
        self._io_pool = io_pool

    def collect(self) -> Iterator[Any]:
        processors = self._processors()
        totals: dict[int, _ApiRows] = {}
        for p in processors:
            for key, rows in list(p.recorder.apis.items()):
                acc = totals.get(key)
                if acc is None:
                    acc = totals[key] = _ApiRows()
                for i in range(_TOTAL + 1):
                    acc.sums[i] += rows.sums[i]
                    row, arow = rows.buckets[i], acc.buckets[i]
                    for j in range(_NB):
                        arow[j] += row[j]
        requests = CounterMetricFamily(
            "gregor_requests",
            "requests answered (acks=0 produce: taken), by API (Kafka: RequestsPerSec)",
            labels=["api"],
        )
        total = HistogramMetricFamily(
            "gregor_request_duration_seconds",
            "from a request's frame read off the socket to its answer handed to the socket, by"
            " API (Kafka: TotalTimeMs)",
            labels=["api"],
        )
        stages = HistogramMetricFamily(
            "gregor_request_stage_duration_seconds",
            "the time a request spent in one stage of the request path, by API and stage:"
            " request_queue, local (I/O thread), remote (purgatory), response_queue,"
            " response_send (Kafka: RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs,"
            " ResponseQueueTimeMs, ResponseSendTimeMs)",
            labels=["api", "stage"],
        )
        for key in sorted(totals):
            rows = totals[key]
            name = api_name(key)
            requests.add_metric([name], sum(rows.buckets[_TOTAL]))
            total.add_metric([name], _cumulative(rows.buckets[_TOTAL]), rows.sums[_TOTAL] / 1e9)
            for i, stage in enumerate(STAGES):
                stages.add_metric([name, stage], _cumulative(rows.buckets[i]), rows.sums[i] / 1e9)
        yield requests
        yield total
        yield stages
        yield _thread_busy(
            "gregor_network_thread_cpu_seconds",
            "CPU time used by the network threads (rate over gregor_network_threads: their busy"
            " ratio) (Kafka: 1 - NetworkProcessorAvgIdlePercent)",
            [p.native_thread_id for p in processors],
        )
        yield GaugeMetricFamily(
            "gregor_network_threads", "network threads (num.network.threads)",
            value=len(processors),
        )  # fmt: skip
        pool = self._io_pool()
        busy = CounterMetricFamily(
            "gregor_io_thread_busy_seconds",
            "time the I/O threads spent handling requests, summed over the threads (rate over"
            " gregor_io_threads: their busy ratio) (Kafka: 1 - RequestHandlerAvgIdlePercent)",
        )
        busy.add_metric([], 0.0 if pool is None else sum(pool.busy_ns) / 1e9)
        yield busy
        yield GaugeMetricFamily(
            "gregor_io_threads", "I/O threads (num.io.threads)",
            value=0 if pool is None else len(pool.busy_ns),
        )  # fmt: skip


def _cumulative(counts: list[int]) -> list[tuple[str, float]]:
    out = []
    acc = 0
    for bound, n in zip(LATENCY_BUCKETS, counts, strict=False):
        acc += n
        out.append((repr(bound), float(acc)))
    acc += counts[-1]
    out.append(("+Inf", float(acc)))
    return out


_TICKS = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def _thread_busy(name: str, doc: str, tids: list[int | None]) -> CounterMetricFamily:
    """CPU seconds of the threads `tids` (native ids), from /proc (Linux). A thread that is
    gone or a platform without /proc adds nothing."""
    family = CounterMetricFamily(name, doc)
    seconds = 0.0
    for tid in tids:
        if tid is not None:
            seconds += thread_cpu_seconds(tid)
    family.add_metric([], seconds)
    return family


def thread_cpu_seconds(tid: int) -> float:
    """The CPU time of thread `tid` of this process (its scheduler run time, in ns, from
    /proc/self/task/TID/schedstat; else user+system ticks from .../stat); 0.0 if unreadable."""
    base = Path("/proc/self/task") / str(tid)
    try:
        return int((base / "schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        fields = (base / "stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, ValueError, IndexError):
        return 0.0


__all__ = [
    "LATENCY_BUCKETS",
    "STAGES",
    "ErrorCounter",
    "RequestCollector",
    "StageRecorder",
    "api_name",
    "error_name",
    "thread_cpu_seconds",
]
