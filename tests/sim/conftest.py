"""Options for the simulations: `--seed N` replays one seed exactly (of every simulation
test), `GREGOR_SIM_SEEDS` sets how many seeds a run covers (the
default: 600 in CI, 2000 in the long tier, scripts/test-long.sh)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--seed",
        action="store",
        type=int,
        default=None,
        help="Raft and replication simulations: run only this seed (replays a failure exactly)",
    )


@pytest.fixture
def sim_seed(request: pytest.FixtureRequest) -> int | None:
    return request.config.getoption("--seed", default=None)
