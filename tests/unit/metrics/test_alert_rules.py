"""config/prometheus/alerts.yml: valid for Prometheus (`promtool check rules`), firing and
resolving when it should (`promtool test rules` on alerts_test.yml), and naming only metrics
that docs/metrics.md lists. promtool comes with Debian's prometheus package (scripts/test.sh
installs it as root); without it the promtool tests skip with the reason."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "config" / "prometheus" / "alerts.yml"
CASES = Path(__file__).with_name("alerts_test.yml")
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool (Debian's prometheus package) is not installed; scripts/test.sh installs it",
)


@needs_promtool
def test_promtool_accepts_the_rules():
    r = subprocess.run(
        [PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr


@needs_promtool
def test_the_rules_fire_and_resolve_as_their_cases_say():
    r = subprocess.run(
        [PROMTOOL, "test", "rules", CASES.name],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=CASES.parent,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_rule_is_tested_and_names_documented_metrics():
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    cases = yaml.safe_load(CASES.read_text())["tests"]
    tested = {c["alertname"] for t in cases for c in t["alert_rule_test"]}
    assert {r["alert"] for r in rules} == tested
    doc = (ROOT / "docs" / "metrics.md").read_text()
    documented = set(re.findall(r"^\| `(gregor_[a-z_]+)` \|", doc, re.MULTILINE))
    for r in rules:
        for name in re.findall(r"\bgregor_[a-z_]+", r["expr"]):
            assert name in documented, (r["alert"], name)
