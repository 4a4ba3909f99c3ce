"""Fixtures of the multi-process tier (docs/architecture.md §13, tier 4).

- `controller_quorum`: `make(size=3, **dotted_config_overrides) -> ControllerQuorum`
  (tests/cluster/controller_quorum.py): real `gregor controller` processes on free loopback
  ports with tmp data dirs, with kill / pause / resume / restart helpers. Every process a quorum
  started is SIGKILLed (its own process group only) and reaped after the test, pass or fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from controller_quorum import ControllerQuorum


@pytest.fixture
def controller_quorum(tmp_path: Path) -> Iterator[Callable[..., ControllerQuorum]]:
    made: list[ControllerQuorum] = []

    def make(size: int = 3, **overrides: Any) -> ControllerQuorum:
        q = ControllerQuorum(tmp_path / f"quorum-{len(made)}", size, **overrides)
        made.append(q)
        return q

    yield make
    for q in made:
        q.close()
