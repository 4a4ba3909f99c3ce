"""Changing the controller quorum of real `gregor controller` processes: a fourth controller
joins a running three-voter quorum (`gregor quorum add-controller`: learner, catch-up, voter),
then the active controller itself is removed (`gregor quorum remove-controller`) and stopped,
while a client keeps writing metadata; every write acknowledged is in the final committed log,
and clients configured with the original three voters still find the (possibly new) leader.
Also: a controller whose disk is lost is replaced (removed, restarted empty, added back), and
the add/remove runs under an acks=all idempotent produce load on three real brokers with the
history checked (nothing acknowledged lost, nothing duplicated, offsets in order)."""

from __future__ import annotations

import shutil
import subprocess
import threading

import pytest
from cluster_history import Load, check_history
from controller_quorum import HOST
from helpers import gregor_command, known_partitions, wait_until

from client import Admin
from client.protocol.api_keys import ApiKey
from controller.quorum.remote import RemoteController

pytestmark = pytest.mark.slow


def new_controller_config(q, n: int) -> None:  # type: ignore[no-untyped-def]
    """Config of controller n joining `q`, which runs it with q.start(n)."""
    q.configure_new(n)
    q.ids.append(n)


def quorum_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), "quorum", *args], capture_output=True, text=True, timeout=120
    )


class MetadataLoad:
    """A client (configured with the original voters, like a broker) registering fake brokers
    one after another; remembers each registration the quorum acknowledged."""

    def __init__(self, voters: str) -> None:
        self.rc = RemoteController(voters, request_timeout_ms=20_000)
        self.acked: dict[int, int] = {}  # broker id -> broker epoch
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metadata-load", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        bid = 1000
        while not self._stop.is_set():
            bid += 1
            try:
                r = self.rc.register_broker(bid, HOST, bid, None, f"inc-{bid}").result(30)
            except Exception as e:  # noqa: BLE001 - a failed call is not acknowledged
                self.errors.append(f"{bid}: {e}")
                continue
            if r["error_code"] == 0:
                self.acked[bid] = r["broker_epoch"]
            self._stop.wait(0.05)  # a small, steady load

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.rc.close()


def test_add_a_fourth_controller_then_remove_the_leader_under_metadata_load(controller_quorum):
    q = controller_quorum()
    q.start_all()
    first = q.wait_leader(30, "a leader")
    q.add_brokers(101, 102, 103)  # fake brokers (unfenced, never fenced: long session timeout)
    q.create_topics(["before"], partitions=3, rf=3)
    original_voters = q.voters
    observer = q.start_observer(replica_id=100)  # a broker's view, from the original voters
    load = MetadataLoad(original_voters)
    load.start()

    new_controller_config(q, 4)
    q.start(4)
    d4 = q.describe(4)
    assert d4 is not None and d4["role"] == "observer", d4

    out = quorum_cli(
        "add-controller",
        "--bootstrap-controller",
        f"{HOST}:{q.ports[first]}",
        "--config",
        str(q.configs[4]),
    )
    assert out.returncode == 0, out.stderr + q.stderr()
    assert "voters [1, 2, 3, 4]" in out.stdout, out.stdout
    wait_until(lambda: (q.describe(4) or {}).get("role") == "follower", 10, "4 votes")
    lead = q.describe(q.wait_leader(10, "a leader of four"))
    assert lead is not None
    assert sorted(v["replica_id"] for v in lead["voters"]) == [1, 2, 3, 4]
    q.create_topics(["with-four"], partitions=1, rf=1)
    wait_until(lambda: "with-four" in q.image(4).topics, 10, "controller 4 has the log")

    # remove the active controller itself, then stop it
    victim = q.wait_leader(10, "the leader to remove")
    out = quorum_cli(
        "remove-controller",
        "--bootstrap-controller",
        f"{HOST}:{q.ports[4]}",
        "--controller-id",
        str(victim),
    )
    assert out.returncode == 0, out.stderr + q.stderr()
    rest = sorted({1, 2, 3, 4} - {victim})
    assert f"voters {rest}" in out.stdout, out.stdout
    q.terminate(victim)
    q.ids.remove(victim)
    new = q.wait_leader(30, "a leader among the remaining voters")
    assert new in rest
    removed_leader_successor = new
    d = q.describe(new)
    assert d is not None and sorted(v["replica_id"] for v in d["voters"]) == rest
    q.create_topics(["after-removal"], partitions=1, rf=1)

    # crash leaders until controller 4 (unknown to the original configuration) leads: clients
    # of the original voters must learn its address from the others' answers
    for _ in range(10):
        if q.wait_leader(30, "a leader") == 4:
            break
        q.restart(q.wait_leader(30, "a leader"))
    assert q.wait_leader(30, "controller 4 leading") == 4
    q.create_topics(["led-by-4"], partitions=1, rf=1)
    acked_before = len(load.acked)
    wait_until(lambda: len(load.acked) >= acked_before + 5, 30, "registrations via leader 4")
    wait_until(lambda: "led-by-4" in observer.image.topics, 20, "the observer follows 4")

    # the load ran across both changes; every acknowledged registration is committed
    wait_until(lambda: len(load.acked) >= 5, 30, "registrations after the changes")
    load.stop()
    new = q.wait_leader(30, "the leader")
    print(
        f"controllers: added 4, removed leader {victim}, then leader {removed_leader_successor};"
        f" {len(load.acked)} registrations acknowledged, {len(load.errors)} calls failed"
    )
    final = q.image(new)
    assert {"before", "with-four", "after-removal", "led-by-4"} <= set(final.topics)
    lost = {
        b
        for b, e in load.acked.items()
        if b not in final.brokers or final.brokers[b].broker_epoch != e
    }
    assert not lost, f"acknowledged registrations lost: {sorted(lost)}"
    for n in rest:
        wait_until(lambda n=n: q.image(n) == q.image(new), 10, f"controller {n} agrees")
    # a broker-side observer configured with the original voters follows the new quorum
    wait_until(lambda: "after-removal" in observer.image.topics, 20, "the observer follows")

    # the membership survives a restart of the whole remaining quorum
    for n in rest:
        q.kill(n)
    for n in rest:
        q.start(n)
    again = q.wait_leader(30, "a leader after restarting the quorum")
    d = q.describe(again)
    assert d is not None and sorted(v["replica_id"] for v in d["voters"]) == rest
    resp = q.call(ApiKey.DESCRIBE_QUORUM, {})
    assert resp["error_code"] == 0
    q.create_topics(["after-restart"], partitions=1, rf=1)


def test_replace_a_controller_whose_disk_is_lost(controller_quorum):
    """Controller 3 loses its disk: remove it (while it is down), start it on an empty disk,
    add it back; it catches up from the leader (snapshot included) and votes again."""
    q = controller_quorum(**{"metadata.log.max.records.between.snapshots": 5})
    q.start_all()
    q.wait_leader(30, "a leader")
    q.add_brokers(101, 102, 103)
    q.create_topics([f"t{i}" for i in range(4)], partitions=1, rf=3)
    q.kill(3)
    shutil.rmtree(q.data_root / "controller-3")
    lid = q.wait_leader(30, "a leader of the two survivors")
    out = quorum_cli(
        "remove-controller",
        "--bootstrap-controller",
        f"{HOST}:{q.ports[lid]}",
        "--controller-id",
        "3",
    )
    assert out.returncode == 0, out.stderr + q.stderr()
    assert "voters [1, 2]" in out.stdout, out.stdout
    q.create_topics(["while-3-is-out"], partitions=1, rf=2)

    q.start(3)  # empty disk: no vote to remember, not a member of the quorum's membership
    out = quorum_cli(
        "add-controller",
        "--bootstrap-controller",
        f"{HOST}:{q.ports[1]}",
        "--controller-id",
        "3",
        "--endpoint",
        f"{HOST}:{q.ports[3]}",
    )
    assert out.returncode == 0, out.stderr + q.stderr()
    assert "voters [1, 2, 3]" in out.stdout, out.stdout
    lid = q.wait_leader(30, "a leader")
    wait_until(lambda: q.image(3) == q.image(lid), 15, "controller 3 caught up")
    assert "while-3-is-out" in q.image(3).topics
    # it counts again: with 1 or 2 down, the other and 3 still commit
    other = next(n for n in (1, 2) if n != lid)
    q.kill(other)
    q.create_topics(["with-3-voting"], partitions=1, rf=2)
    wait_until(lambda: "with-3-voting" in q.image(3).topics, 10, "3 holds the new commit")


def test_controller_added_and_removed_under_produce_load(broker_cluster) -> None:
    """Three brokers under an acks=all idempotent produce load while controller 4 joins and
    the active controller is removed and stopped: no send fails, every acknowledged value is
    read back at its offset, none twice."""
    q, b = broker_cluster(brokers=(11, 12, 13))
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        admin.create_topic("cq", 3, 3, {"min.insync.replicas": "2"})
    wait_until(
        lambda: (
            lambda ps: ps if ps and all(p.leader >= 0 and len(p.isr) == 3 for p in ps) else None
        )(known_partitions(b.bootstrap_all(), "cq")),
        30,
        "cq with full ISRs",
    )
    load = Load(b.bootstrap_all(), "cq", 3, batch=50)
    try:
        load.wait_acked(300)
        new_controller_config(q, 4)
        q.start(4)
        leader = q.wait_leader(10, "a leader")
        out = quorum_cli(
            "add-controller",
            "--bootstrap-controller",
            f"{HOST}:{q.ports[leader]}",
            "--controller-id",
            "4",
            "--endpoint",
            f"{HOST}:{q.ports[4]}",
        )
        assert out.returncode == 0, out.stderr + q.stderr()
        load.wait_acked(300)  # load after the addition
        victim = q.wait_leader(10, "the leader to remove")
        out = quorum_cli(
            "remove-controller",
            "--bootstrap-controller",
            f"{HOST}:{q.ports[4]}",
            "--controller-id",
            str(victim),
        )
        assert out.returncode == 0, out.stderr + q.stderr()
        q.terminate(victim)
        q.ids.remove(victim)
        q.wait_leader(30, "a leader of the new quorum")
        with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
            admin.create_topic("after-change", 1, 3)  # metadata still commits, via a broker
        load.wait_acked(300)  # load after the removal
    finally:
        load.stop()
    print(f"{len(load.acked)} records acknowledged across the quorum changes (removed {victim})")
    check_history(b.bootstrap_all(), load, every_send_acked=True)
