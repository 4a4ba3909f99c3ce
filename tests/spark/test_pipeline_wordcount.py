"""scripts/pipeline_wordcount.py end to end: lines topic -> streaming word count -> counts topic."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import consume_all, create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pipeline_wordcount.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("pipeline_wordcount", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_wordcount_pipeline(spark: Any, broker_server: Any, tmp_path: Path) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "lines", 2)
    create_topic(bs, "counts", 2)
    produce(
        bs,
        "lines",
        {0: [(None, b"the quick brown fox")], 1: [(None, b"The lazy dog; the END")]},
    )
    wc = _load()
    args = wc.parse_args(
        ["--bootstrap", bs, "--input", "lines", "--output", "counts",
         "--checkpoint", str(tmp_path / "ck"), "--available-now"]
    )  # fmt: skip
    q = wc.build_query(spark, args)
    assert q.awaitTermination(120)
    assert q.exception() is None
    produce(bs, "lines", {0: [(None, b"fox and dog")]})
    q = wc.build_query(spark, args)  # restart from the checkpoint: only the new line counts
    assert q.awaitTermination(120)
    assert q.exception() is None
    latest: dict[str, int] = {}
    for r in sorted(consume_all(bs, "counts", 2), key=lambda r: (r.timestamp, r.offset)):
        latest[r.key.decode()] = max(latest.get(r.key.decode(), 0), int(r.value))
    assert latest == {
        "the": 3, "quick": 1, "brown": 1, "fox": 2, "lazy": 1, "dog": 2, "end": 1, "and": 1,
    }  # fmt: skip


def test_wordcount_without_pyspark_names_the_install_command(tmp_path: Path) -> None:
    """A Python without pyspark (simulated: the import is blocked) gets the command to run."""
    code = (
        "import sys, runpy; sys.modules['pyspark'] = None; "  # `import pyspark` -> ImportError
        f"sys.argv = [{str(SCRIPT)!r}, '--bootstrap', 'h:1', '--input', 'i', '--output', 'o', "
        f"'--checkpoint', {str(tmp_path)!r}]; runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("pipeline_wordcount: pyspark is not installed")
    assert "scripts/run.sh --with spark" in proc.stderr
    assert "Traceback" not in proc.stderr
