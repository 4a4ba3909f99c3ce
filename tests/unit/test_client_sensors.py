"""client/metrics.py's sensors on a hand-driven clock: totals, rates and averages over the
two-sample 30 s window, samples that age out, and the snapshot names kafka-python uses."""

from __future__ import annotations

import pytest

from client.metrics import ConsumerMetrics, ProducerMetrics, Sensor


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_rate_avg_max_over_the_window_and_totals_forever():
    c = Clock()
    s = Sensor(c)
    for v in (10, 20, 30):
        c.t += 2
        s.record(v)
    assert s.count == 3 and s.total == 60
    assert s.rate() == pytest.approx(60 / 6)  # 6 s since the sensor was made
    assert s.rate(of_counts=True) == pytest.approx(3 / 6)
    assert s.avg() == 20 and s.max() == 30
    c.t += 40  # into the next sample: the first is the previous one, still counted
    s.record(100)
    assert s.avg() == pytest.approx(160 / 4) and s.max() == 100
    c.t += 30  # the first sample leaves the window
    assert s.max() == 100 and s.avg() == 100
    c.t += 100  # idle for longer than the window: nothing in it
    assert s.rate() == 0 and s.avg() == 0 and s.max() == 0
    assert s.count == 4 and s.total == 160  # totals stay


def test_a_young_sensor_rates_over_at_least_a_second():
    c = Clock()
    s = Sensor(c)
    c.t += 0.001
    s.record(5)
    assert s.rate() == 5.0


def test_snapshots_use_kafka_python_names():
    c = Clock()
    p = ProducerMetrics(c)
    c.t += 10
    p.requests.record(0.002)
    p.batch_size.record(1000)
    p.batch_records.record(10)
    p.records.record(10)
    p.bytes.record(1000)
    m = p.snapshot()["producer-metrics"]
    assert m["record-send-total"] == 10 and m["record-send-rate"] == 1.0
    assert m["request-latency-avg"] == pytest.approx(2.0) and m["request-total"] == 1
    assert m["batch-size-avg"] == 1000 and m["records-per-request-avg"] == 10
    assert m["record-retry-total"] == 0 and m["record-error-rate"] == 0
    cm = ConsumerMetrics(c).snapshot({"t-0": 5, "t-1": 12})["consumer-fetch-manager-metrics"]
    assert cm["records-lag-max"] == 12 and cm["t-1.records-lag"] == 12
    assert cm["records-consumed-total"] == 0
