"""DescriptorMonitor: the broker's "cannot take new replicas" report, from the free
descriptors (soft limit minus open ones, with a reserve and hysteresis) and from
FileLimitErrors that hit replica creation."""

from __future__ import annotations

import os

import pytest

from broker.log.descriptors import (
    HOLD_S,
    DescriptorMonitor,
    open_descriptors,
    reserve_for,
)


class Fake:
    def __init__(self, limit: int = 1024, used: int | None = 100) -> None:
        self.limit, self.used, self.now = limit, used, 0.0

    def monitor(self) -> DescriptorMonitor:
        return DescriptorMonitor(lambda: self.limit, lambda: self.used, lambda: self.now)


def test_reserve_is_a_bounded_share_of_the_limit() -> None:
    assert reserve_for(256) == 16
    assert reserve_for(1024) == 16
    assert reserve_for(4096) == 64
    assert reserve_for(1 << 20) == 256


def test_reports_under_the_reserve_until_twice_it_is_free() -> None:
    f = Fake()
    m = f.monitor()
    assert m.reason() is None
    f.used = 1024 - 15  # 15 free < 16
    r = m.reason()
    assert r is not None
    assert "1009 open under open-files limit 1024 (15 free, 16 kept in reserve)" in r, r
    assert "ulimit -n" in r and "log.max.open.files" in r
    f.used = 1024 - 20  # above the reserve, under twice it: still reporting
    assert m.reason() is not None
    f.used = 1024 - 32
    assert m.reason() is None
    f.used = 1100  # more open than the limit (it was lowered under them): none free
    r = m.reason()
    assert r is not None and "1100 open under open-files limit 1024 (0 free" in r, r
    f.used = 100
    assert m.reason() is None
    f.used = 1024 - 20  # from fine, 20 free is fine
    assert m.reason() is None


def test_out_of_descriptors_while_counting_counts_as_none_free() -> None:
    f = Fake(used=-1)
    r = f.monitor().reason()
    assert r is not None and "ulimit -n" in r
    assert r is not None and "none free under open-files limit 1024" in r, r


def test_a_limit_hit_reports_once_when_descriptors_are_plenty() -> None:
    f = Fake()
    m = f.monitor()
    m.note_limit_hit()
    assert m.reason() is not None
    assert m.reason() is None


def test_without_a_count_a_hit_holds_for_a_while() -> None:
    f = Fake(used=None)
    m = f.monitor()
    assert m.reason() is None
    m.note_limit_hit()
    r = m.reason()
    assert r is not None and "recently (open-files limit 1024)" in r, r
    f.now += HOLD_S - 1
    assert m.reason() is not None
    f.now += 2
    assert m.reason() is None


def test_open_descriptors_counts_this_process() -> None:
    before = open_descriptors()
    if before is None:
        pytest.skip("no /proc/self/fd here")
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(10)]
    try:
        assert open_descriptors() == before + 10
    finally:
        for fd in fds:
            os.close(fd)
