"""Reassignment benchmark (issue 23): moving partition data to a new broker, throttled and not,
producer latency before and during the moves, and decommissioning a broker of many partitions.
Prints JSON.

    .venv/bin/python scripts/bench/reassign_bench.py [--size-mib 1024] [--throttle-mb 50]
        [--decommission-partitions 1000]

A local cluster of 3 controllers and brokers 4, 5, 6 (scripts/bench/_cluster.py), then broker 7
started against it. Steps:

1. `move` (1 partition, RF 1, on broker 4) is filled with --size-mib of 10 kB records;
2. idle: an acks=all producer sends --latency-rate records/s of 100 B to `lat` (RF 3 on 4, 5, 6,
   min.insync.replicas 2) for --idle-s seconds: p50/p99 latency;
3. unthrottled: `move` is reassigned to [7]; the time until the move completed gives MB/s
   (the partition's log bytes on disk / time), with the producer's latency meanwhile;
4. throttled: follower.replication.throttled.rate = --throttle-mb, `move` reassigned back to
   [4]; achieved rate and its deviation from the throttle, the producer's latency meanwhile;
5. decommission: a topic of --decommission-partitions partitions (RF 1) placed on broker 7, then
   `gregor broker decommission 7` timed end to end (0 skips this step).

Goals (issue 23): unthrottled >= 100 MB/s on loopback; producer p99 during a throttled move
<= 2x its idle p99; the throttle holds within 10 % (the copy's rate: until the target's log
holds the partition; the rate to the move's completion, which adds an ISR change and a
metadata round, is reported beside it). `cpu_ms_per_MB` (CPU of the leader's and the
follower's process per MB moved) is the figure to compare across runs on a loaded machine;
MB/s depends on the load average printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts" / "bench")]

from _proc import cpu_seconds  # noqa: E402
from _stats import percentile  # noqa: E402


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    return round(percentile(sorted(xs), q) * 1000, 2)


class LatencyProbe:
    """acks=all sends at a fixed rate on its own thread; latencies tagged with the phase."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        from client import Producer

        self.producer = Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        self.topic, self.rate = topic, rate
        self.phase = "idle"
        self.samples: dict[str, list[float]] = {}
        self.sent: dict[str, list[float]] = {}  # when each sample's record was sent
        self.started: dict[str, float] = {}  # when each phase began
        self.errors = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        interval = 1.0 / self.rate
        nxt = time.monotonic()
        while not self._stop.is_set():
            sent, phase = time.monotonic(), self.phase

            def done(f, sent=sent, phase=phase) -> None:
                if f.exception() is not None:
                    self.errors += 1
                    return
                with self._lock:
                    self.samples.setdefault(phase, []).append(time.monotonic() - sent)
                    self.sent.setdefault(phase, []).append(sent)

            self.producer.send(self.topic, b"x" * 100).add_done_callback(done)
            nxt += interval
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def set_phase(self, phase: str) -> None:
        self.started[phase] = time.monotonic()
        self.phase = phase

    def stats(self, phase: str) -> dict:
        with self._lock:
            xs = list(self.samples.get(phase, []))
            sent = list(self.sent.get(phase, []))
        t0 = self.started.get(phase, sent[0] if sent else 0.0)
        worst = sorted(zip(xs, sent, strict=True), reverse=True)[:10]
        return {
            "records": len(xs),
            "p50_ms": _pct(xs, 0.5),
            "p99_ms": _pct(xs, 0.99),
            # the ten slowest: [s into the phase when sent, ms]; spikes clustered at one
            # time (a move's start or end) read differently from ones spread evenly
            "worst": [[round(t - t0, 2), round(x * 1000, 1)] for x, t in worst],
        }

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.close()


def _log_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in d.glob("*.log")) if d.is_dir() else 0


def _py_spy(args: argparse.Namespace, pids: dict[int, int], phase: str) -> list:
    """py-spy recorders of the brokers `pids` for one phase (none without --py-spy)."""
    if not args.py_spy:
        return []
    Path(args.py_spy).mkdir(parents=True, exist_ok=True)
    ext = "svg" if args.py_spy_format == "flamegraph" else "txt"
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return [
        subprocess.Popen(
            [
                *(exe, "record", "--pid", str(pid), "--threads", "--nonblocking"),
                *("--rate", "100", "--format", args.py_spy_format),
                *("--output", str(Path(args.py_spy) / f"broker-{n}-{phase}.{ext}")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n, pid in pids.items()
    ]


def _stop_spies(spies: list) -> None:
    for spy in spies:
        spy.send_signal(2)  # py-spy writes its output on SIGINT
        spy.wait(60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=256, help="data in the moved partition")
    ap.add_argument("--throttle-mb", type=float, default=50.0, help="throttled move, MB/s")
    ap.add_argument("--latency-rate", type=int, default=200, help="probe records/s")
    ap.add_argument("--idle-s", type=float, default=10.0, help="idle latency window, s")
    ap.add_argument("--decommission-partitions", type=int, default=1000)
    ap.add_argument(
        "--py-spy",
        metavar="DIR",
        help="profile the leader and the follower during each move with py-spy"
        " (pip install py-spy): broker-N-PHASE.svg (or .txt with --py-spy-format raw) in DIR",
    )
    ap.add_argument(
        "--py-spy-format",
        choices=("flamegraph", "raw"),
        default="flamegraph",
        help="raw: collapsed stacks (text, one line per stack with its sample count)",
    )
    args = ap.parse_args()

    from _cluster import start, start_cluster, wait

    from broker.cluster_nodes import load_nodes, stop_nodes
    from client import Admin, Producer, TopicPartition

    base = Path(tempfile.mkdtemp(prefix="gregor-reassign-bench-"))
    nodes: list = []
    probe = None
    out: dict = {"load_before": round(os.getloadavg()[0], 2)}
    try:
        ctrl, brokers = start_cluster(base, 3, 3)
        nodes = [ctrl]
        # broker 7: broker 6's config with its own id, port and directory
        text = (base / "broker-3.yaml").read_text()
        port6 = brokers[6].port
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port7 = s.getsockname()[1]
        (base / "broker-4.yaml").write_text(
            text.replace("node.id: 6", "node.id: 7")
            .replace(f":{port6}", f":{port7}")
            .replace(str(base / "broker-3"), str(base / "broker-4"))
        )
        b7 = next(n for n in load_nodes(base) if n.name == "broker-4")
        start(b7)
        brokers[7] = b7
        nodes = [list(brokers.values()), ctrl]
        bootstrap = ",".join(n.address for n in brokers.values())
        data = {
            4: base / "broker-1",
            5: base / "broker-2",
            6: base / "broker-3",
            7: base / "broker-4",
        }
        admin = Admin(bootstrap_servers=bootstrap, request_timeout_ms=120_000)
        wait(lambda: len(admin.describe_cluster().brokers) == 4, 60, "4 brokers")
        admin.create_topic("lat", 1, 3, {"min.insync.replicas": "2"})
        admin.create_topic("move", 1, 1)
        tp = TopicPartition("move", 0)
        admin.alter_partition_reassignments({tp: [4]})
        admin.alter_partition_reassignments({TopicPartition("lat", 0): [4, 5, 6]})
        wait(lambda: not admin.list_partition_reassignments(), 120, "initial placement")
        wait(lambda: admin.describe_topic("move").partitions[0].leader == 4, 60, "move on 4")

        n = args.size_mib * 1024 * 1024 // 10_000
        t0 = time.monotonic()
        with Producer(bootstrap_servers=bootstrap, acks=1, linger_ms=20, batch_size=1 << 20) as p:
            value = os.urandom(10_000)
            futures = [p.send("move", value, partition=0) for _ in range(n)]
            p.flush(600)
            failed = sum(1 for f in futures if f.exception() is not None)
            if failed:
                raise RuntimeError(
                    f"{failed} of {n} fill records failed: {futures[-1].exception()}"
                )
        out["fill"] = {"records": n, "s": round(time.monotonic() - t0, 1)}
        size = _log_bytes(data[4] / "move-0")
        out["partition_bytes"] = size
        if size < n * 10_000:
            raise RuntimeError(f"the fill left {size} bytes in move-0 on broker 4: {out}")

        probe = LatencyProbe(bootstrap, "lat", args.latency_rate)
        time.sleep(args.idle_s)  # the idle window: a measurement period, not a wait on state
        out["idle"] = probe.stats("idle")

        copied: dict[str, float] = {}

        def move(target: int, phase: str) -> float:
            """Seconds until the move completed; copied[phase]: until the target's log held
            the partition's bytes (the copy alone, without the ISR and metadata round)."""
            probe.set_phase(phase)
            t = time.monotonic()
            assert admin.alter_partition_reassignments({tp: [target]}) == {tp: None}
            dest = data[target] / "move-0"

            def done() -> bool:
                if phase not in copied and _log_bytes(dest) >= size:
                    copied[phase] = time.monotonic() - t
                return not admin.list_partition_reassignments()

            wait(done, 3600, f"move to {target}")
            elapsed = time.monotonic() - t
            copied.setdefault(phase, elapsed)
            out.setdefault("phase_s", {})[phase] = {
                "copied": round(copied[phase], 2),
                "completed": round(elapsed, 2),
            }
            probe.set_phase("after")
            return elapsed

        pids = {4: brokers[4].proc.pid, 7: brokers[7].proc.pid}
        spies = _py_spy(args, pids, "unthrottled")
        cpu0 = {n: cpu_seconds(pid) for n, pid in pids.items()}
        s = move(7, "unthrottled")
        cpu = {n: cpu_seconds(pid) - cpu0[n] for n, pid in pids.items()}
        _stop_spies(spies)
        mb = size / 1e6
        out["unthrottled"] = {
            "s": round(s, 2),
            "MB_per_s": round(size / s / 1e6, 1),
            "copy_s": round(copied["unthrottled"], 2),
            "copy_MB_per_s": round(size / copied["unthrottled"] / 1e6, 1),
            # CPU per MB moved: insensitive to other load on the machine, unlike MB/s
            "cpu_ms_per_MB": {
                "leader_4": round(cpu[4] / mb * 1000, 2),
                "follower_7": round(cpu[7] / mb * 1000, 2),
            },
            "producer": probe.stats("unthrottled"),
        }
        rate = int(args.throttle_mb * 1e6)
        key = "follower.replication.throttled.rate"
        admin.incremental_alter_configs({("broker", ""): {key: rate}})
        size7 = _log_bytes(data[7] / "move-0")
        spies = _py_spy(args, pids, "throttled")
        s = move(4, "throttled")
        _stop_spies(spies)
        achieved = size7 / s
        # the throttle bounds the copy; the move's completion adds an ISR change and a
        # metadata round on top, which the copy rate leaves out
        copy_rate = size7 / copied["throttled"]
        out["throttled"] = {
            "throttle_MB_per_s": args.throttle_mb,
            "s": round(s, 2),
            "MB_per_s": round(achieved / 1e6, 1),
            "copy_s": round(copied["throttled"], 2),
            "copy_MB_per_s": round(copy_rate / 1e6, 1),
            "deviation_pct": round((copy_rate - rate) / rate * 100, 1),
            "deviation_to_completion_pct": round((achieved - rate) / rate * 100, 1),
            "producer": probe.stats("throttled"),
        }
        admin.incremental_alter_configs({("broker", ""): {key: None}})
        probe.close()
        probe = None
        idle99, thr99 = out["idle"]["p99_ms"], out["throttled"]["producer"]["p99_ms"]
        out["goals"] = {
            "unthrottled_ge_100_MB_s": out["unthrottled"]["MB_per_s"] >= 100,
            "throttled_p99_le_2x_idle": None if not idle99 or not thr99 else thr99 <= 2 * idle99,
            "throttle_within_10_pct": abs(out["throttled"]["deviation_pct"]) <= 10,
        }

        if args.decommission_partitions:
            k = args.decommission_partitions
            admin.create_topic("many", k, 1)
            plan = {TopicPartition("many", i): [7] for i in range(k)}
            admin.alter_partition_reassignments(plan)
            wait(lambda: not admin.list_partition_reassignments(), 600, "many on 7")
            t = time.monotonic()
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "broker.cli",
                    "broker",
                    "decommission",
                    "7",
                    "--bootstrap-server",
                    bootstrap,
                ],
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=3600,
            )
            out["decommission"] = {
                "partitions": k,
                "s": round(time.monotonic() - t, 1),
                "exit": r.returncode,
                "last_line": ((r.stdout + r.stderr).strip().splitlines() or [""])[-1][:200],
            }
        admin.close()
        out["load_after"] = round(os.getloadavg()[0], 2)
        print(json.dumps(out, indent=2))
    finally:
        if probe is not None:
            probe.close()
        for group in nodes:
            stop_nodes(group)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
