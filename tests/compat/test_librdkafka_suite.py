"""The short tier of librdkafka's own test suite: a handful of its fast tests (produce and
consume, offsets, groups, headers, timestamps, idempotence) against a broker's KAFKA listener
in the suite's default scenario (auto-created topics of 4 partitions), with the test runner scripts/compat/librdkafka_tests.sh builds (cached in
.compat-cache/librdkafka/). Without a built runner the test skips with the reason; the
script runs the whole suite on a 3-broker cluster (docs/kafka-compat.md)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("GREGOR_COMPAT_CACHE", ROOT / ".compat-cache")) / "librdkafka"
TESTS_DIR = CACHE / "librdkafka-2.0.2" / "tests"
RUNNER = TESTS_DIR / "test-runner"
# fast ones (a few seconds each on a loaded machine), one per area the listener serves
FAST = {
    "0012": "produce and consume",
    "0015": "offsets and seek",
    "0031": "get offsets (ListOffsets)",
    "0054": "offsets for times",
    "0073": "headers",
    "0030": "offset commit",
    "0090": "idempotence",
    "0056": "balanced group, classic protocol",
}
VERDICT = re.compile(r"=+ Test (\d{4})_\w+ (PASSED|FAILED|SKIPPED)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def kafka_address(runner: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from helpers import broker_config

    from broker.server import BrokerServer

    d = tmp_path_factory.mktemp("librdkafka-suite")
    cfg = broker_config(
        d / "data",
        listeners="GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0",
        **{"num.partitions": 4},
    )
    server = BrokerServer(cfg)
    server.start()
    try:
        yield f"127.0.0.1:{next(e.port for e in server.listeners.bind if e.name == 'KAFKA')}"
    finally:
        server.shutdown(timeout=10.0)


@pytest.fixture(scope="module")
def runner() -> Path:
    if not RUNNER.is_file():
        pytest.skip(
            f"librdkafka's test runner is not built ({RUNNER}): run"
            " scripts/compat/librdkafka_tests.sh --build-only once (as root)"
        )
    return RUNNER


@pytest.mark.parametrize("number", sorted(FAST), ids=lambda n: f"{n}-{FAST[n]}")
def test_librdkafka_suite_fast_tier(
    number: str, runner: Path, kafka_address: str, tmp_path: Path
) -> None:
    conf = tmp_path / "test.conf"
    conf.write_text(f"metadata.broker.list={kafka_address}\ntest.timeout.multiplier=4\n")
    env = {
        **os.environ,
        "TESTS": number,
        "TEST_KAFKA_VERSION": "3.1.0",
        "RDKAFKA_TEST_CONF": str(conf),
        "LD_LIBRARY_PATH": f"{TESTS_DIR.parent / 'src'}:{TESTS_DIR.parent / 'src-cpp'}",
    }
    p = subprocess.run(
        [str(runner), "-Q", "-E"], cwd=tmp_path, env=env, capture_output=True, timeout=600
    )
    out = ANSI.sub("", (p.stdout + p.stderr).decode(errors="replace"))
    verdicts = {state for n, state in VERDICT.findall(out) if n == number}
    assert p.returncode == 0 and verdicts == {"PASSED"}, out[-6000:]
