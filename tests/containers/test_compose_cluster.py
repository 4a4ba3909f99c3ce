"""docker-compose.yml's 3-controller, 3-broker cluster on a real Docker engine, used from the host
through the brokers' EXTERNAL listeners (localhost:19092-19094): produce and consume, cluster
status, a killed partition leader, a broker cut off the compose network for 15 s, and
`down` + `up` keeping the data, the single-node profile, and the monitoring profile's Prometheus
scraping every node. The tests run in this order on one cluster (module fixture);
each leaves the cluster whole again. Figures go to `timings` (printed at the end with -s).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

import pytest
import yaml
from compose_cluster import BROKERS, EXTERNAL, ROOT, ComposeCluster, run, wait_for

from client import Admin, Consumer, Producer, TopicPartition

pytestmark = [pytest.mark.containers, pytest.mark.slow, pytest.mark.timeout(900)]
SERVICE = {node: svc for svc, node in BROKERS.items()}
ALERTS = ROOT / "config" / "prometheus" / "alerts.yml"


def _create(topic: str, partitions: int) -> None:
    with Admin(bootstrap_servers=EXTERNAL[4]) as admin:
        admin.create_topic(
            topic, partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"}
        )
        wait_for(
            lambda: all(
                p.leader >= 0 and len(p.isr) == 3 for p in admin.describe_topic(topic).partitions
            ),
            60,
            f"{topic}: a leader and 3 in-sync replicas per partition",
        )


def _partition(topic: str, bootstrap: str = EXTERNAL[4]) -> Any:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return admin.describe_topic(topic).partitions[0]


def _read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every record of `topic` up to its end offsets, per partition, in offset order."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    with Consumer(bootstrap_servers=bootstrap) as c:
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)

        def done() -> bool:
            for r in c.poll(1000):
                got[r.partition].append(r.value)
            return all(len(got[tp.partition]) >= end[tp] for tp in tps)

        wait_for(done, 120, f"{sum(end.values())} records of {topic} via {bootstrap}", 0)
    return got


class Workload:
    """Produces b"%08d" % seq to partition 0 of `topic` (acks=all, idempotent), at most 500 in
    flight, paced on the stop event; records each acknowledgement's time."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer(bootstrap_servers=bootstrap, linger_ms=5)
        self.sent_at: dict[int, float] = {}
        self.acked: dict[int, float] = {}
        self.errors: list[str] = []
        self._window = threading.Semaphore(500)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            if not self._window.acquire(timeout=0.5):
                continue
            self.sent_at[seq] = time.monotonic()
            fut = self.producer.send(self.topic, b"%08d" % seq, partition=0)
            fut.add_done_callback(lambda f, s=seq: self._done(s, f))
            seq += 1
            self._stop.wait(0.002)  # ~300 records/s at most: pacing, not waiting for anything

    def _done(self, seq: int, fut: Any) -> None:
        self._window.release()
        exc = fut.exception()
        with self._lock:
            if exc is None:
                self.acked[seq] = time.monotonic()
            else:
                self.errors.append(f"{seq}: {exc!r}")

    def acked_after(self, t: float) -> int:
        with self._lock:
            return sum(1 for at in self.acked.values() if at > t)

    def first_ack_of_a_record_sent_after(self, t: float) -> float | None:
        with self._lock:
            times = [at for s, at in self.acked.items() if self.sent_at[s] > t]
        return min(times) - t if times else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(120)
        self.producer.close()

    def check_nothing_acked_lost(self, bootstrap: str) -> dict[str, int]:
        read = [int(v) for v in _read_all(bootstrap, self.topic, 1)[0]]
        missing = sorted(set(self.acked) - set(read))
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:10]}"
        assert read == sorted(read), "records out of order in the partition"
        assert not self.errors, f"{len(self.errors)} sends failed, e.g. {self.errors[:5]}"
        return {
            "acked": len(self.acked),
            "read": len(read),
            "duplicates": len(read) - len(set(read)),
        }


def test_produce_via_19092_consume_via_19094(compose_cluster: ComposeCluster, timings) -> None:
    _create("orders", 3)
    values = [b"order-%05d" % i for i in range(10_000)]
    t0 = time.monotonic()
    with Producer(bootstrap_servers="localhost:19092", acks="all", linger_ms=5) as p:
        # keyed, so the records spread over the 3 partitions (and so over the 3 leaders)
        pairs = [(b"k%d" % i, v) for i, v in enumerate(values)]
        assert p.send_many("orders", pairs).result(180) == 10_000
    timings["produce_10000_acks_all_s"] = round(time.monotonic() - t0, 1)
    got = _read_all("localhost:19094", "orders", 3)
    assert sorted(v for vs in got.values() for v in vs) == values
    assert all(got.values()), {p: len(vs) for p, vs in got.items()}


def test_cluster_status_shows_3_brokers_and_3_voters(compose_cluster: ComposeCluster) -> None:
    status = subprocess.run(
        [sys.executable, "-m", "broker.cli", "cluster", "status", "--json",
         "--bootstrap-server", "localhost:19093"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    st = json.loads(status.stdout)
    # Through the EXTERNAL listener: the addresses a client on the host can use.
    assert [(b["id"], b["address"], b["fenced"]) for b in st["brokers"]] == [
        (n, EXTERNAL[n], False) for n in (4, 5, 6)
    ]
    assert sorted(v["id"] for v in st["quorum"]["voters"]) == [1, 2, 3]
    assert st["quorum"]["leader_id"] in (1, 2, 3)
    assert not st["offline"] and not st["under_replicated"]
    # Inside the compose network, through INTERNAL: the brokers' compose host names.
    inside = json.loads(
        compose_cluster.compose(
            "exec", "-T", "broker-2", "gregor", "cluster", "status", "--json",
            "--bootstrap-server", "broker-2:9092",
        )
    )  # fmt: skip
    assert [b["address"] for b in inside["brokers"]] == [f"{s}:9092" for s in BROKERS]


def test_killed_leader_fails_over_and_rejoins_the_isr(compose_cluster, timings) -> None:
    _create("failover", 1)
    leader = _partition("failover").leader
    victim = SERVICE[leader]
    # Bootstrap through a broker that stays up.
    bootstrap = next(EXTERNAL[n] for n in EXTERNAL if n != leader)
    w = Workload(bootstrap, "failover")
    try:
        wait_for(lambda: len(w.acked) >= 300, 60, "300 acks before the kill")
        compose_cluster.compose("kill", victim)
        t_kill = time.monotonic()  # (the container is dead once `kill` returns)
        moved = wait_for(
            lambda: (p := _partition("failover", bootstrap)).leader not in (leader, -1) and p,
            60,
            "a new leader",
            interval=0.1,
        )
        timings["failover_leader_moved_s"] = round(time.monotonic() - t_kill, 1)
        assert leader not in moved.isr
        wait_for(lambda: w.acked_after(t_kill) >= 300, 90, "300 acks after the kill")
        failover = w.first_ack_of_a_record_sent_after(t_kill)
    finally:
        w.stop()
    assert failover is not None
    # from the kill to the first acknowledgement of a record sent after it
    timings["failover_first_ack_after_kill_s"] = round(failover, 1)
    t_start = time.monotonic()
    compose_cluster.compose("start", victim)
    wait_for(lambda: leader in _partition("failover", bootstrap).isr, 120, f"{victim} back in ISR")
    timings["killed_broker_rejoins_isr_s"] = round(time.monotonic() - t_start, 1)
    timings["failover_records"] = w.check_nothing_acked_lost(bootstrap)
    wait_for(lambda: compose_cluster.health()[victim] == "healthy", 90, f"{victim} healthy")


@pytest.mark.long  # (~30 s; network cuts in the default run: fault scenarios S4, S5, S6)
def test_network_cut_broker_leaves_and_rejoins_the_isr(compose_cluster, timings) -> None:
    _create("netcut", 1)
    part = _partition("netcut")
    victim_id = next(r for r in part.replicas if r != part.leader)  # a follower
    victim = SERVICE[victim_id]
    bootstrap = EXTERNAL[part.leader]
    network = compose_cluster.network()
    w = Workload(bootstrap, "netcut")
    try:
        wait_for(lambda: len(w.acked) >= 300, 60, "300 acks before the cut")
        t_cut = time.monotonic()
        compose_cluster.disconnect(victim)
        try:
            wait_for(
                lambda: victim_id not in _partition("netcut", bootstrap).isr,
                15,
                f"{victim} out of the ISR",
            )
            timings["cut_broker_leaves_isr_s"] = round(time.monotonic() - t_cut, 1)
            assert w.acked_after(t_cut) > 0, "producing goes on with 2 in-sync replicas"
            # Keep it cut for 15 s in all, then heal.
            wait_for(lambda: time.monotonic() - t_cut >= 15, 20, "15 s of cut")
        finally:
            compose_cluster.connect(victim, network)
        t_heal = time.monotonic()
        wait_for(
            lambda: victim_id in _partition("netcut", bootstrap).isr, 120, f"{victim} back in ISR"
        )
        timings["cut_broker_rejoins_isr_s"] = round(time.monotonic() - t_heal, 1)
    finally:
        w.stop()
    timings["netcut_records"] = w.check_nothing_acked_lost(EXTERNAL[victim_id])
    wait_for(lambda: compose_cluster.health()[victim] == "healthy", 90, f"{victim} healthy")


def test_down_then_up_keeps_the_data(compose_cluster: ComposeCluster, timings) -> None:
    _create("kept", 2)
    values = [b"kept-%04d" % i for i in range(1000)]
    with Producer(bootstrap_servers="localhost:19094", linger_ms=5) as p:
        assert p.send_many("kept", values).result(120) == 1000
    t0 = time.monotonic()
    compose_cluster.compose("down", timeout=300)  # no -v: the named volumes stay
    assert not compose_cluster.containers()
    timings["down_s"] = round(time.monotonic() - t0, 1)
    timings["up_wait_after_down_s"] = round(compose_cluster.up(), 1)
    got = _read_all("localhost:19092", "kept", 2)
    assert sorted(v for vs in got.values() for v in vs) == values
    orders = _read_all("localhost:19093", "orders", 3)
    assert sum(len(vs) for vs in orders.values()) == 10_000


def test_single_profile(compose_cluster: ComposeCluster, timings) -> None:
    """`--profile single`: one combined node on localhost:9092 (beside the cluster here, in the
    same compose project; a user runs one or the other)."""
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 9092)) == 0:
            pytest.skip("localhost:9092 is taken on this host")
    t0 = time.monotonic()
    compose_cluster.compose("--profile", "single", "up", "-d", "--no-build", "single")
    wait_for(lambda: compose_cluster.health().get("single") == "healthy", 120, "single healthy")
    timings["single_up_healthy_s"] = round(time.monotonic() - t0, 1)
    with Producer(bootstrap_servers="localhost:9092", linger_ms=0) as p:
        p.send("solo", b"one").result(60)
    with Admin(bootstrap_servers="localhost:9092") as admin:
        brokers = admin.describe_cluster().brokers
    assert [(b.node_id, b.host, b.port) for b in brokers] == [(1, "localhost", 9092)]
    assert _read_all("localhost:9092", "solo", 1) == {0: [b"one"]}
    compose_cluster.compose("--profile", "single", "rm", "-s", "-f", "-v", "single")


@pytest.mark.long  # (builds a second image; Prometheus itself: tests/cluster/test_prometheus_scrape.py)
def test_monitoring_profile(compose_cluster: ComposeCluster, timings) -> None:
    """`--profile monitoring`: Prometheus (Debian's package on the local base image, built by
    scripts/docker/build-prometheus.sh) scrapes all six nodes over the compose network and
    evaluates Gregor's alert rules; its API is on the host's loopback."""
    image = f"gregor-prometheus:test-{compose_cluster.project}"
    compose_cluster.extra_images.append(image)
    t0 = time.monotonic()
    run(
        ["bash", "scripts/docker/build-prometheus.sh"],
        timeout=600,
        env={**compose_cluster.env, "DOCKER_GREGOR_PROMETHEUS_IMAGE": image},
    )
    timings["prometheus_image_build_s"] = round(time.monotonic() - t0, 1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    compose_cluster.env["DOCKER_GREGOR_PROMETHEUS_IMAGE"] = image
    compose_cluster.env["DOCKER_GREGOR_PROMETHEUS_PORT"] = str(port)
    t1 = time.monotonic()
    try:
        compose_cluster.compose("--profile", "monitoring", "up", "-d", "--no-build", "prometheus")
        wait_for(
            lambda: compose_cluster.health().get("prometheus") == "healthy", 120,
            "prometheus healthy",
        )  # fmt: skip

        def query(expr: str) -> list:
            url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            with urllib.request.urlopen(url, timeout=5) as r:
                return json.loads(r.read())["data"]["result"]

        wait_for(
            lambda: (r := query('count(up{job=~"gregor-.*"} == 1)')) and r[0]["value"][1] == "6",
            120,
            "all six nodes scraped and up",
        )
        timings["prometheus_all_up_s"] = round(time.monotonic() - t1, 1)
        wait_for(
            lambda: (r := query("sum(gregor_controller_active)")) and r[0]["value"][1] == "1",
            60,
            "one active controller",
        )
        # the shipped rules are loaded (every one of alerts.yml) and evaluate against real series
        shipped = {
            r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]
        }
        assert {x["name"] for x in _rules(port)} == shipped
        wait_for(
            lambda: all(x["health"] == "ok" for x in _rules(port)), 60, "every rule evaluated ok"
        )
    finally:
        compose_cluster.compose(
            "--profile", "monitoring", "rm", "-s", "-f", "-v", "prometheus"
        )  # fmt: skip


def _rules(port: int) -> list[dict]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/rules", timeout=5) as r:
        return [x for g in json.loads(r.read())["data"]["groups"] for x in g["rules"]]
