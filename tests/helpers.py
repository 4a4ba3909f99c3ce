"""Helpers every test may import (`from helpers import wait_until`): tests/ is on sys.path
because tests/conftest.py lives there (pytest's default `prepend` import mode)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    cond: Callable[[], T], timeout: float = 10.0, msg: str = "condition", interval: float = 0.005
) -> T:
    """Poll `cond` until it returns a truthy value (returned) or `timeout` seconds pass
    (AssertionError naming `msg`). The poll interval backs off from `interval` to 50 ms."""
    deadline = time.monotonic() + timeout
    delay = interval
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {msg}")
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.05)
