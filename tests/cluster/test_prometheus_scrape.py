"""A real Prometheus (Debian's `prometheus` package, installed by scripts/test.sh; skipped with
the reason without it) scrapes 3 `gregor controller` and 3 `gregor broker` processes, each with
its own `metrics.listener`, and its HTTP API answers (issue 26):

- every target is up, exactly one controller is active, every node is live and ready;
- after a broker is killed the under-replicated gauge rises above 0 (the shipped alert goes
  pending), and returns to 0 once it is restarted and back in the ISR, the leader having
  counted an ISR shrink and an expansion;
- a produce load shows in the request-rate and request-latency series, and its purgatory time
  in the "remote" stage;
- a group's lag in Prometheus equals `gregor groups describe`'s total lag, and `gregor top
  --once --json` over the six endpoints shows the same lag, every node and one active
  controller.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from broker_cluster import Brokers
from controller_quorum import HOST, free_ports
from helpers import gregor_command, wait_until

from client import Admin, Consumer, Producer

pytestmark = pytest.mark.slow

PROMETHEUS = shutil.which("prometheus")
ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "config" / "prometheus" / "alerts.yml"


def _add_metrics_listener(config: Path, port: int) -> None:
    with config.open("a") as f:
        f.write(f"metrics.listener: http://{HOST}:{port}\n")


def _http(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Prometheus:
    """A prometheus process on a loopback port with its own data dir and scrape config."""

    def __init__(self, tmp: Path, targets: dict[str, list[str]]) -> None:
        assert PROMETHEUS is not None
        tmp.mkdir()
        self.port = free_ports(1)[0]
        scrape = "".join(
            f"  - job_name: {job}\n    static_configs:\n      - targets: {json.dumps(ts)}\n"
            for job, ts in targets.items()
        )
        config = tmp / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
            "  evaluation_interval: 1s\n"
            f"rule_files:\n  - {ALERTS}\n"
            f"scrape_configs:\n{scrape}"
        )
        self.log_path = tmp / "prometheus.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address={HOST}:{self.port}",
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def query(self, expr: str) -> list[dict]:
        """/api/v1/query: the instant vector's samples ([] on any failure, retried by callers)."""
        url = f"http://{HOST}:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            status, body = _http(url)
        except OSError:
            return []
        if status != 200:
            return []
        answer = json.loads(body)
        return list(answer["data"]["result"]) if answer.get("status") == "success" else []

    def alert_state(self, name: str) -> str | None:
        """/api/v1/alerts: the state of alert `name` (pending, firing), None when inactive."""
        try:
            status, body = _http(f"http://{HOST}:{self.port}/api/v1/alerts")
        except OSError:
            return None
        if status != 200:
            return None
        for a in json.loads(body)["data"]["alerts"]:
            if a["labels"].get("alertname") == name:
                return str(a["state"])
        return None

    def rules_health(self) -> list[str]:
        status, body = _http(f"http://{HOST}:{self.port}/api/v1/rules")
        assert status == 200, body
        groups = json.loads(body)["data"]["groups"]
        return [r["health"] for g in groups for r in g["rules"]]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if len(result) == 1 else None

    def wait(self, expr: str, check, timeout: float, msg: str) -> float:
        def ok() -> tuple[float] | None:  # (a tuple: 0.0 is an answer too)
            v = self.value(expr)
            return (v,) if v is not None and check(v) else None

        try:
            return wait_until(ok, timeout, msg)[0]
        except AssertionError:
            raise AssertionError(
                f"{msg}: {expr} = {self.query(expr)}; prometheus log:\n"
                + self.log_path.read_text(errors="replace")[-3000:]
            ) from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@pytest.mark.skipif(
    PROMETHEUS is None,
    reason="Debian's prometheus package is not installed (scripts/test.sh installs it as root)",
)
def test_prometheus_scrapes_the_cluster(controller_quorum, tmp_path):
    q = controller_quorum(**{"broker.session.timeout.ms": 3000})
    controller_ports = dict(zip(q.ids, free_ports(len(q.ids)), strict=True))
    for n, port in controller_ports.items():
        _add_metrics_listener(q.configs[n], port)
    q.start_all()
    q.wait_leader(10, "a controller leader")
    for n, port in controller_ports.items():
        assert _http(f"http://{HOST}:{port}/health/live") == (200, "live\n")
        wait_until(
            lambda port=port: _http(f"http://{HOST}:{port}/health/ready")[0] == 200,
            15,
            f"controller {n} ready",
        )
    (tmp_path / "brokers").mkdir()
    ids = [4, 5, 6]
    b = Brokers(
        tmp_path / "brokers",
        q.voters,
        ids,
        {"replica.lag.time.max.ms": 2000, "replica.fetch.backoff.ms": 200},
    )
    broker_ports = dict(zip(ids, free_ports(len(ids)), strict=True))
    for n, port in broker_ports.items():
        _add_metrics_listener(b.configs[n], port)
    prom = None
    try:
        b.start_all(ids)
        prom = Prometheus(
            tmp_path / "prometheus",
            {
                "controller": [f"{HOST}:{p}" for p in controller_ports.values()],
                "broker": [f"{HOST}:{p}" for p in broker_ports.values()],
            },
        )
        for n, port in broker_ports.items():
            wait_until(
                lambda port=port: _http(f"http://{HOST}:{port}/health/ready")[0] == 200,
                30,
                f"broker {n} ready",
            )
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            admin.create_topic("m", 1, 3, {"min.insync.replicas": "2"})
            leader = wait_until(
                lambda: (lambda p: p.leader if p.leader >= 0 and len(p.isr) == 3 else None)(
                    admin.describe_topic("m").partitions[0]
                ),
                30,
                "m-0 with a leader and a full ISR",
            )
        prom.wait("count(up == 1)", lambda v: v == 6, 30, "every target up")
        # the shipped alert rules load and evaluate against real series
        wait_until(
            lambda: (lambda h: h and all(x == "ok" for x in h))(prom.rules_health()),
            15,
            "every alert rule evaluated ok",
        )
        assert prom.alert_state("GregorUnderReplicatedPartitions") is None
        prom.wait(
            'sum(gregor_controller_active{job="controller"})', lambda v: v == 1, 15,
            "one active controller",
        )  # fmt: skip
        prom.wait('sum(gregor_partitions{job="broker"})', lambda v: v == 3, 15, "3 replicas of m-0")
        prom.wait(
            "sum(gregor_partitions_under_replicated)", lambda v: v == 0, 15, "fully replicated"
        )

        # a follower dies: the leader's ISR shrinks, the gauge rises
        victim = next(n for n in ids if n != leader)
        b.stop(victim, signal.SIGKILL)
        prom.wait(
            "sum(gregor_partitions_under_replicated)", lambda v: v > 0, 30, "under-replicated"
        )
        # the leader sees its follower behind for longer than replica.lag.time.max.ms (2 s)
        prom.wait(
            'max(gregor_replica_lag_seconds{topic="m"})', lambda v: v > 2, 15, "follower lag in s"
        )
        # the shipped rule sees it (pending: it fires after 5 minutes)
        wait_until(
            lambda: prom.alert_state("GregorUnderReplicatedPartitions") == "pending",
            15,
            "GregorUnderReplicatedPartitions pending",
        )
        prom.wait(
            'sum(gregor_controller_fenced_brokers{job="controller"} * on(instance)'
            ' group_left gregor_controller_active{job="controller"})',
            lambda v: v == 1,
            20,
            "the dead broker fenced",
        )
        # ... and falls back to 0 once it is back in the ISR
        b.start(victim)
        prom.wait(
            "sum(gregor_partitions_under_replicated)", lambda v: v == 0, 30, "replicated again"
        )
        # the leader counted the victim leaving and rejoining its ISR
        prom.wait("sum(gregor_isr_shrinks_total)", lambda v: v >= 1, 10, "an ISR shrink counted")
        prom.wait("sum(gregor_isr_expands_total)", lambda v: v >= 1, 10, "an ISR expansion counted")
        prom.wait(
            'max(gregor_replica_lag_seconds{topic="m"})', lambda v: v < 2, 15, "caught up again"
        )
        # every controller learned of a leader; the active one timed its commits
        prom.wait(
            'min(gregor_raft_leader_changes_total{job="controller"})', lambda v: v >= 1, 10,
            "leader changes counted",
        )  # fmt: skip
        prom.wait(
            'sum(gregor_raft_commit_latency_seconds_count{job="controller"})', lambda v: v > 0, 10,
            "commit latency timed",
        )  # fmt: skip

        # a produce load (sustained: rate() needs two scrapes that saw the counter move) shows
        # in the request rate and latency series
        stop = threading.Event()
        sent: list[int] = []

        def load() -> None:
            with Producer(bootstrap_servers=b.bootstrap_all(), acks="all", linger_ms=0) as prod:
                while not stop.is_set():
                    prod.send("m", b"v%d" % len(sent), partition=0).result(30)
                    sent.append(1)

        loader = threading.Thread(target=load, name="produce-load", daemon=True)
        loader.start()
        try:
            prom.wait(
                'sum(rate(gregor_requests_total{api="PRODUCE"}[5s]))',
                lambda v: v > 0,
                30,
                "produce request rate",
            )
            prom.wait(
                "histogram_quantile(0.99, sum by (le)"
                ' (rate(gregor_request_duration_seconds_bucket{api="PRODUCE"}[5s])))',
                lambda v: v > 0,
                20,
                "produce p99 latency",
            )
            # acks=all waits for the followers: the time shows in the remote (purgatory) stage
            prom.wait(
                'sum(rate(gregor_request_stage_duration_seconds_sum{api="PRODUCE",'
                'stage="remote"}[5s]))',
                lambda v: v > 0,
                20,
                "produce remote (purgatory) time",
            )
            prom.wait(
                "sum(rate(gregor_io_thread_busy_seconds_total[5s]))", lambda v: v > 0, 20,
                "I/O threads busy",
            )  # fmt: skip
        finally:
            stop.set()
            loader.join(60)
        assert sent
        prom.wait('sum(gregor_topic_bytes_in_total{topic="m"})', lambda v: v > 0, 10, "bytes in")
        # the followers fetched what was produced; the leader flushed it
        prom.wait(
            'sum(gregor_topic_records_out_total{topic="m"})', lambda v: v >= len(sent), 10,
            "records out",
        )  # fmt: skip
        prom.wait("sum(gregor_log_flush_size_bytes_sum)", lambda v: v > 0, 10, "bytes flushed")

        # a group that consumed part of m and committed: its lag in Prometheus (reported by its
        # coordinator) equals what `gregor groups describe` prints
        consumer = Consumer(
            "m",
            bootstrap_servers=b.bootstrap_all(),
            group_id="g-prom",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            max_poll_records=max(1, len(sent) // 2),
        )
        try:
            wait_until(lambda: consumer.poll(500), 30, "records for g-prom")
            consumer.commit()
        finally:
            consumer.close()
        r = subprocess.run(
            [*gregor_command(), "groups", "describe", "g-prom", "--json",
             "--bootstrap-server", b.bootstrap_all()],
            capture_output=True, text=True, timeout=60, cwd=ROOT,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        described = json.loads(r.stdout)["total_lag"]
        assert 0 < described < len(sent)
        prom.wait(
            'sum(gregor_group_lag_records{group="g-prom",topic="m"})',
            lambda v: v == described,
            20,
            f"group lag {described} as gregor groups describe says",
        )
        assert prom.value('count(gregor_group_members{group="g-prom"})') == 1  # one coordinator

        # gregor top over the same six endpoints: every node, one active controller, the lag
        endpoints = [f"{HOST}:{p}" for p in (*controller_ports.values(), *broker_ports.values())]
        r = subprocess.run(
            [*gregor_command(), "top", "--once", "--json", "--interval", "0.5",
             "--metrics", ",".join(endpoints)],
            capture_output=True, text=True, timeout=60, cwd=ROOT,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        top = json.loads(r.stdout)
        assert [b["node_id"] for b in top["brokers"]] == ids
        assert sum(b["partitions"] for b in top["brokers"]) >= 3
        assert [c["active"] for c in top["controllers"]].count(True) == 1
        assert top["partitions"] == {
            "under_replicated": 0,
            "under_min_isr": 0,
            "offline": 0,
            "reassigning": 0,
        }
        assert {g["group"]: g["lag"] for g in top["groups"]}["g-prom"] == described
    finally:
        if prom is not None:
            prom.stop()
        b.close()
