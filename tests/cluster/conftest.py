"""Fixtures of the multi-process tier (docs/architecture.md §13, tier 4).

- `controller_quorum`: `make(size=3, **dotted_config_overrides) -> ControllerQuorum`
  (tests/cluster/controller_quorum.py): real `gregor controller` processes on free loopback
  ports with tmp data dirs, with kill / pause / resume / restart helpers. Every process a quorum
  started is SIGKILLed (its own process group only) and reaped after the test, pass or fail.
- `broker_cluster`: `make(brokers=(4, 5, 6), session_ms=3000, kafka=False,
  **broker_overrides) -> (quorum, Brokers)`: a started 3-voter quorum plus `gregor broker` processes joining it
  (tests/cluster/broker_cluster.py), all killed and reaped after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_cluster import Brokers
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


@pytest.fixture
def brokers() -> Iterator[Callable[..., Brokers]]:
    """`brokers(tmp, voters, ids, overrides)`: a Brokers (its processes started by the test
    itself), every process of which is stopped after the test."""
    made: list[Brokers] = []

    def make(*args: Any, **kwargs: Any) -> Brokers:
        b = Brokers(*args, **kwargs)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


@pytest.fixture
def broker_cluster(controller_quorum, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    made: list[Brokers] = []

    def make(
        brokers: tuple[int, ...] = (4, 5, 6),
        session_ms: int = 3000,
        kafka: bool = False,
        **overrides: Any,
    ) -> tuple[ControllerQuorum, Brokers]:
        q = controller_quorum(**{"broker.session.timeout.ms": session_ms})
        q.start_all()
        q.wait_leader(10, "a controller leader")
        d = tmp_path / f"brokers-{len(made)}"
        d.mkdir()
        b = Brokers(
            d,
            q.voters,
            list(brokers),
            {k.replace("_", "."): v for k, v in overrides.items()},
            kafka=kafka,
        )
        made.append(b)
        b.start_all(brokers)
        return q, b

    yield make
    for b in made:
        b.close()
