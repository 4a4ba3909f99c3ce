"""The fault scenarios of the cluster harness (CHECKER.md), each run once, short, on 3
`gregor controller` + 3 `gregor broker` processes (tests/cluster/fault_scenarios.py has the
scenarios and the run). The seed is printed (GREGOR_TEST_SEED replays the fault schedule); the
history, the node logs and the JSON report stay in the test's tmp dir; the summary table is
printed at the end of the session. `scripts/chaos.py --scenario NAME --duration S --seed N`
runs one long.
"""

from __future__ import annotations

import json
import os
import random

import pytest
from fault_scenarios import SCENARIOS, run_scenario

REPORTS: list[dict] = []  # for the summary table (tests/cluster/conftest.py)


# S12 (a reassignment under leader kills) runs in the long tier: CI's 25 minutes
LONG_SCENARIOS = {"S12"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.long) if n in LONG_SCENARIOS else n for n in SCENARIOS],
)
def test_fault_scenario(name: str, tmp_path) -> None:
    seed = int(os.environ.get("GREGOR_TEST_SEED", random.randrange(1 << 30)))
    print(f"{name} seed {seed}")
    report = run_scenario(name, tmp_path / name, seed)
    REPORTS.append(report)
    if "skipped" in report:
        pytest.skip(report["skipped"])
    print(json.dumps({k: v for k, v in report.items() if k != "anomalies"}))
    assert report["valid"], f"{name} seed {seed}: {json.dumps(report['anomalies'])[:4000]}"
    assert report["writes"]["ok"] > 300 and report["reads"] > 0, report["writes"]
    assert report["commits"] > 0  # the group committed: C5 had input
    assert report["elections"] >= 3  # every partition's first leader at least: C6 had input


@pytest.mark.slow
def test_fault_scenario_over_sasl_ssl(tmp_path) -> None:
    """S1 with security on every link (`chaos.py --secure`): clients and replication over
    SASL_SSL (SCRAM-SHA-512), brokers and controllers reaching the controllers over SSL with
    client certificates required. The checks hold as in plaintext."""
    seed = int(os.environ.get("GREGOR_TEST_SEED", random.randrange(1 << 30)))
    print(f"S1 over SASL_SSL seed {seed}")
    report = run_scenario("S1", tmp_path / "S1", seed, secure=True)
    REPORTS.append({**report, "scenario": "S1 (SASL_SSL)"})
    print(json.dumps({k: v for k, v in report.items() if k != "anomalies"}))
    assert report["security"] == "SASL_SSL"
    for n in (4, 5, 6):  # the only listener the brokers had
        config = (tmp_path / "S1" / "brokers" / f"broker-{n}.yaml").read_text()
        assert "listeners: SASL_SSL://" in config and "CONTROLLER:SSL" in config
    config = (tmp_path / "S1" / "quorum" / "controller-1.yaml").read_text()
    assert "CONTROLLER:SSL" in config and "ssl.client.auth: required" in config
    assert report["valid"], f"seed {seed}: {json.dumps(report['anomalies'])[:4000]}"
    assert report["writes"]["ok"] > 300 and report["reads"] > 0, report["writes"]
    assert report["commits"] > 0 and report["elections"] >= 3
