"""A real standalone Spark cluster for tests: one master and two workers, each its own JVM
process (in its own session) started from the pyspark package's own `bin/spark-class`, with
jobs sent to it by `bin/spark-submit` (the driver is a separate process too).

    cluster = start_standalone(tmp_dir)        # waits until both workers are ALIVE
    proc = cluster.submit(script, *args)       # spark-submit --master spark://127.0.0.1:PORT
    cluster.stop()                             # SIGTERM, then SIGKILL, of each process group

Every process listens on 127.0.0.1 with ports the OS picks (port 0; the master's log names
them). Executors run `sys.executable` (this venv's Python, where gregor is installed) through
PYSPARK_PYTHON and spark.pyspark.python. Each worker offers 1 core and 1 GiB, executors ask
for 512 MiB, so the whole cluster fits on a 2-core machine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import wait_until

WORKERS = 2
EXECUTOR_MEMORY = "512m"
WORKER_MEMORY = "1g"
# Short-lived test JVMs: C1 only and the serial collector cost far less CPU to start and run
# than the defaults (JIT and GC threads) on a 2-core machine; Spark behaves the same.
JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_DAEMON_JAVA_OPTS=JAVA_OPTS,  # the master and the workers
    )
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    return env


def submit_args(master_url: str) -> list[str]:
    """spark-submit options every test job uses (docs/spark.md shows the same command)."""
    return [
        "--master", master_url,
        "--driver-memory", EXECUTOR_MEMORY,
        "--executor-memory", EXECUTOR_MEMORY,
        "--total-executor-cores", str(WORKERS),
        "--conf", "spark.executor.cores=1",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--conf", f"spark.driver.extraJavaOptions={JAVA_OPTS}",
        "--conf", f"spark.executor.extraJavaOptions={JAVA_OPTS}",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        # start no job before every executor has registered, so tasks spread over both workers
        "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
        "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=600s",
    ]  # fmt: skip


@dataclass
class SparkStandalone:
    master_url: str
    ui_port: int
    master: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]
    work_dir: Path
    _logs: list[Any] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        """The master's JSON status page (workers, apps)."""
        url = f"http://127.0.0.1:{self.ui_port}/json/"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return dict(json.load(resp))

    def alive_workers(self) -> list[dict[str, Any]]:
        try:
            return [w for w in self.state()["workers"] if w["state"] == "ALIVE"]
        except OSError:
            return []

    def submit(
        self, script: Path, *args: str, timeout: float = 600.0
    ) -> subprocess.CompletedProcess[str]:
        """Run `script` as a driver with spark-submit against this cluster; returns the
        finished process (stdout, stderr as text) whatever its exit status."""
        cmd = [str(spark_home() / "bin" / "spark-submit"), *submit_args(self.master_url)]
        return subprocess.run(
            [*cmd, str(script), *args],
            env=spark_env(),
            cwd=self.work_dir,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def stop(self) -> None:
        for proc in [*self.workers, self.master]:
            _end_group(proc)
        for f in self._logs:
            f.close()


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 20.0)):
        try:
            os.killpg(proc.pid, sig)  # the session leader's pid is its process group id
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _spawn(cls: str, args: list[str], log: Path, logs: list[Any]) -> subprocess.Popen[bytes]:
    out = open(log, "wb")  # noqa: SIM115 - closed by SparkStandalone.stop
    logs.append(out)
    return subprocess.Popen(
        [str(spark_home() / "bin" / "spark-class"), cls, *args],
        env=spark_env(),
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _wait_log(proc: subprocess.Popen[bytes], log: Path, pattern: str, timeout: float) -> str:
    rx = re.compile(pattern)

    def found() -> str | None:
        m = rx.search(log.read_text(errors="replace"))
        if m:
            return m.group(1)
        if proc.poll() is not None:
            raise AssertionError(f"{log.name}: process exited ({proc.returncode}):\n{_tail(log)}")
        return None

    try:
        return wait_until(found, timeout, repr(pattern))
    except AssertionError as exc:
        raise AssertionError(f"{exc}:\n{_tail(log)}") from None


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-30:])


def start_standalone(work_dir: Path, timeout: float = 300.0) -> SparkStandalone:
    """Start a master and WORKERS workers; return once every worker is ALIVE on the master."""
    work_dir.mkdir(parents=True, exist_ok=True)
    logs: list[Any] = []
    master_log = work_dir / "master.log"
    master = _spawn(
        "org.apache.spark.deploy.master.Master",
        ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
        master_log,
        logs,
    )
    cluster = SparkStandalone("", 0, master, [], work_dir, logs)
    try:
        cluster.master_url = _wait_log(
            master, master_log, r"Starting Spark master at (spark://[\d.]+:\d+)", timeout
        )
        cluster.ui_port = int(
            _wait_log(master, master_log, r"MasterWebUI.*started at http://[^:\s]+:(\d+)", timeout)
        )
        for i in range(WORKERS):
            wdir = work_dir / f"worker-{i}"
            wdir.mkdir()
            args = ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                    "--cores", "1", "--memory", WORKER_MEMORY, "--work-dir", str(wdir),
                    cluster.master_url]  # fmt: skip
            worker = _spawn(
                "org.apache.spark.deploy.worker.Worker", args, work_dir / f"worker-{i}.log", logs
            )
            cluster.workers.append(worker)

        def all_alive() -> bool:
            for i, w in enumerate(cluster.workers):
                if w.poll() is not None:
                    raise AssertionError(
                        f"worker {i} exited:\n{_tail(work_dir / f'worker-{i}.log')}"
                    )
            return len(cluster.alive_workers()) >= WORKERS

        wait_until(all_alive, timeout, f"{WORKERS} workers alive", interval=0.2)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def ancestors(pid: int) -> list[int]:
    """`pid` and its parent chain up to init, read from /proc (Linux)."""
    chain = [pid]
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # field 4, after "(comm)" and the state
        chain.append(pid)
    return chain
