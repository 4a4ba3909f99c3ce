"""The connector on a real standalone Spark cluster: a master and two workers, each its own
process started from pyspark's `bin/spark-class`, jobs sent with `bin/spark-submit`, against a
real loopback broker. Executors are children of the worker processes, so these runs prove the
source and sink work when the driver's process is not where the reading and writing happen.

The batch read runs in the default tier; the streaming word count (scripts/pipeline_wordcount.py
submitted as is, with a checkpoint, restarted) and the exactly-once sink (tests/spark/
eos_stream_job.py, its transactions opened and committed by tasks on the executors) are in the
long tier (scripts/test-long.sh).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_helpers import WORKERS, SparkStandalone, start_standalone
from spark_helpers import consume_all, create_topic, produce, read_committed

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]

HERE = Path(__file__).resolve().parent
WORDCOUNT = HERE.parents[1] / "scripts" / "pipeline_wordcount.py"


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    cluster = start_standalone(tmp_path_factory.mktemp("spark-standalone"))
    yield cluster
    cluster.stop()


def _submitted(cluster: SparkStandalone, script: Path, *args: str) -> str:
    proc = cluster.submit(script, *args)
    lines = proc.stderr.splitlines()
    tb = [i for i, line in enumerate(lines) if line.startswith("Traceback")]
    tail = "\n".join(lines[tb[-1] : tb[-1] + 40] if tb else lines[-40:])
    assert proc.returncode == 0, f"spark-submit {script.name} exited {proc.returncode}:\n{tail}"
    return proc.stdout


def test_batch_read_on_standalone_cluster(
    spark_cluster: SparkStandalone, broker_server: Any, tmp_path: Path
) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "cl", 3)
    data = {p: [(f"k{p}-{i}".encode(), f"v{p}-{i}".encode()) for i in range(400)] for p in range(3)}
    produce(bs, "cl", data)
    out = tmp_path / "batch.json"
    _submitted(spark_cluster, HERE / "cluster_batch_job.py", bs, "cl", str(out))
    got = json.loads(out.read_text())

    assert got["master"] == spark_cluster.master_url
    want = {
        (p, off, k.decode(), v.decode())
        for p, pairs in data.items()
        for off, (k, v) in enumerate(pairs)
    }
    rows = got["rows"]
    assert len(rows) == len(want)
    assert {(p, off, k, v) for p, off, k, v, _ in rows} == want

    # Every row was handled by a Python process descended from one of the worker processes
    # (worker JVM -> executor JVM -> Python worker), never by the driver; both workers took part.
    workers = {w.pid for w in spark_cluster.workers}
    assert got["block_managers"] == WORKERS + 1  # one per executor, and the driver's
    used: set[int] = set()
    for *_, chain in rows:
        pids = [int(x) for x in chain.split(",")]
        assert got["driver_pid"] not in pids
        under = workers.intersection(pids)
        assert len(under) == 1, f"row handled outside the workers: {pids} (workers {workers})"
        used |= under
    assert used == workers
    apps = spark_cluster.state()["completedapps"]
    assert [a["name"] for a in apps][-1:] == ["gregor-cluster-batch"]


@pytest.mark.long
def test_wordcount_on_standalone_cluster(
    spark_cluster: SparkStandalone, broker_server: Any, tmp_path: Path
) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "lines", 2)
    create_topic(bs, "counts", 2)
    produce(
        bs, "lines", {0: [(None, b"the quick brown fox")], 1: [(None, b"The lazy dog; the END")]}
    )
    args = ("--bootstrap", bs, "--input", "lines", "--output", "counts",
            "--checkpoint", str(tmp_path / "ck"), "--available-now")  # fmt: skip
    _submitted(spark_cluster, WORDCOUNT, *args)
    produce(bs, "lines", {0: [(None, b"fox and dog")]})
    _submitted(spark_cluster, WORDCOUNT, *args)  # resumes from the checkpoint: only the new line
    latest: dict[str, int] = {}
    for r in sorted(consume_all(bs, "counts", 2), key=lambda r: (r.timestamp, r.offset)):
        latest[r.key.decode()] = max(latest.get(r.key.decode(), 0), int(r.value))
    assert latest == {
        "the": 3, "quick": 1, "brown": 1, "fox": 2, "lazy": 1, "dog": 2, "end": 1, "and": 1,
    }  # fmt: skip
    names = [a["name"] for a in spark_cluster.state()["completedapps"]]
    assert names.count("gregor-wordcount") == 2


@pytest.mark.long
def test_exactly_once_sink_on_standalone_cluster(
    spark_cluster: SparkStandalone, broker_server: Any, tmp_path: Path
) -> None:
    """The exactly-once sink with its tasks on the cluster's executors: a query drains its
    input, then again from its checkpoint after more input arrived. Read read_committed, the
    output holds each input record exactly once, and the coordinator knows the tasks'
    transactional ids (gregor-spark-<query>-<partition>)."""
    from client import Admin

    bs = broker_server.bootstrap
    create_topic(bs, "eos-in", 2)
    create_topic(bs, "eos-out", 2)
    ck = str(tmp_path / "ck")
    sent: Counter[bytes] = Counter()
    for run in range(2):
        vals = {p: [(None, f"c{run}-{p}-{i}".encode()) for i in range(200)] for p in range(2)}
        produce(bs, "eos-in", vals)
        sent.update(v for pairs in vals.values() for _, v in pairs)
        _submitted(spark_cluster, HERE / "eos_stream_job.py", bs, "eos-in", "eos-out", ck, "drain")
    got = Counter(read_committed(bs, "eos-out", 2))
    assert got == sent, f"missing {len(sent - got)}, extra {len(got - sent)}"
    with Admin(bootstrap_servers=bs) as admin:
        ids = {t.transactional_id for t in admin.list_transactions()}
    assert any(i.startswith("gregor-spark-") for i in ids), ids
    names = [a["name"] for a in spark_cluster.state()["completedapps"]]
    assert names.count("gregor-eos-kill") == 2
