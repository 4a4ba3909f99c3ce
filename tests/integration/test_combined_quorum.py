"""Combined mode runs its controller as a one-voter Raft quorum (controller/quorum/combined.py):
the Raft log lives in `<log.dirs[0]>/__cluster_metadata/raft`, an old single-file
LocalMetadataLog there is migrated once, and restarts keep everything."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import RawClient, gregor_command, wait_until
from replica_helpers import batch, fetch, produce, values_of

from client import Admin
from client.errors import ErrorCode, GregorError
from client.protocol import ApiKey
from controller.quorum.combined import (
    MIGRATED_DIR,
    MIGRATION_MARKER,
    RAFT_DIR,
    CombinedController,
)
from controller.quorum.local import LocalController
from controller.raft.state import Role


def test_controller_is_a_one_voter_raft_quorum(broker_factory, tmp_path) -> None:
    data = tmp_path / "one"
    broker = broker_factory(data_dir=data)
    cc = broker.server.node.quorum.controller
    assert cc.log.node.role is Role.LEADER and cc.log.node.voters == {1}
    assert (data / "__cluster_metadata" / RAFT_DIR).is_dir()
    assert not (data / "__cluster_metadata" / "metadata.log").exists()
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic("q", partitions=2)
    with RawClient(broker.address) as c:
        q = c.request(ApiKey.DESCRIBE_QUORUM, 0, {})
    assert q["error_code"] == 0 and q["role"] == "leader" and q["leader_id"] == 1
    assert q["leader_endpoint"] == broker.bootstrap
    assert [v["replica_id"] for v in q["voters"]] == [1] and q["observers"] == []
    assert q["voters"][0]["log_end_offset"] >= q["high_watermark"] > 0
    term = cc.log.node.term
    broker.server.shutdown(timeout=10)
    again = broker_factory(data_dir=data)
    node = again.server.node.quorum.controller.log.node
    assert node.role is Role.LEADER and node.term > term
    with Admin(bootstrap_servers=again.bootstrap) as admin:
        assert [p.leader for p in admin.describe_topic("q").partitions] == [1, 1]


def _old_metadata_log(data) -> tuple:
    """What Gregor wrote before the one-voter quorum: a LocalMetadataLog with a registered,
    unfenced broker, a topic with a config, and a producer-id block handed out."""
    meta = data / "__cluster_metadata"
    data.mkdir()
    (data / "broker.incarnation").write_text("old-incarnation\n")  # as the old broker kept it
    lc = LocalController(str(meta), None)
    lc.start()
    reg = lc.submit(
        lambda c: c.cluster.register_broker(1, "127.0.0.1", 1, None, "old-incarnation")
    ).result(5)
    offset = lc.image.offset
    hb = lc.submit(lambda c: c.cluster.broker_heartbeat(1, reg["broker_epoch"], offset)).result(5)
    assert not hb["is_fenced"]
    legacy = {
        "name": "legacy",
        "num_partitions": 2,
        "replication_factor": 1,
        "configs": [{"name": "retention.ms", "value": "123456"}],
    }
    res = lc.submit(lambda c: c.replication.create_topics([legacy])).result(5)
    assert res[0]["error_code"] == 0
    epoch = reg["broker_epoch"]
    pids = lc.submit(lambda c: c.cluster.allocate_producer_ids(1, epoch)).result(5)
    old = lc.image
    lc.stop()
    assert (meta / "metadata.log").exists()
    return meta, old, pids


def test_migrates_an_old_local_metadata_log(broker_factory, tmp_path) -> None:
    data = tmp_path / "old"
    meta, old, pids = _old_metadata_log(data)
    broker = broker_factory(data_dir=data)
    image = broker.server.node.quorum.controller.image
    assert image.topics["legacy"].topic_id == old.topics["legacy"].topic_id
    assert image.topic_config("legacy") == {"retention.ms": "123456"}
    assert image.next_producer_id >= pids["producer_id_start"] + pids["producer_id_len"]
    assert not (meta / "metadata.log").exists()
    assert (meta / MIGRATED_DIR / "metadata.log").exists() and (meta / MIGRATION_MARKER).exists()
    with RawClient(broker.address) as c:
        for p in range(2):
            assert produce(c, "legacy", p, batch([b"m%d" % p]), corr=p + 1)["error_code"] == 0
    broker.server.shutdown(timeout=10)

    # A second start does not migrate again; records and topics are all there.
    again = broker_factory(data_dir=data)
    assert again.server.node.quorum.controller.image.topics.keys() == {"legacy"}
    with RawClient(again.address) as c:
        for p in range(2):
            got = fetch(c, "legacy", p, 0)
            assert got["error_code"] == ErrorCode.NONE
            assert [v for _, v in values_of(got["records"])] == [b"m%d" % p]


def test_unfinished_migration_is_redone_from_the_old_log(tmp_path) -> None:
    data = tmp_path / "crashed"
    meta, old, _ = _old_metadata_log(data)
    # A first start crashed mid-migration: a Raft dir holding some other record, no marker.
    junk = CombinedController(1, str(tmp_path / "elsewhere"))
    junk.start()
    junk.channel.register_broker(9, "h", 1).result(5)
    junk.stop()
    (tmp_path / "elsewhere" / RAFT_DIR).rename(meta / RAFT_DIR)
    cc = CombinedController(1, str(meta))
    try:
        image = cc.start()
        assert set(image.brokers) == {1} and set(image.topics) == {"legacy"}
        assert image.topics["legacy"].partitions == old.topics["legacy"].partitions
    finally:
        cc.stop()
    # Crashed after the marker, before moving the old files: they are only moved.
    (meta / MIGRATED_DIR / "metadata.log").rename(meta / "metadata.log")
    cc = CombinedController(1, str(meta))
    try:
        image = cc.start()
        assert set(image.brokers) == {1} and set(image.topics) == {"legacy"}
        assert not (meta / "metadata.log").exists()
    finally:
        cc.stop()


@pytest.mark.slow
def test_gregor_quorum_describe_against_a_combined_server(gregor_process) -> None:
    server = gregor_process()
    r = subprocess.run(
        [*gregor_command(), "quorum", "describe", "--bootstrap-controller", server.bootstrap,
         "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    q = json.loads(r.stdout)
    assert q["leader_id"] == 1 and q["role"] == "leader" and q["leader_epoch"] >= 1
    assert [v["replica_id"] for v in q["voters"]] == [1]


def _traced_by(pid: int) -> set[int]:
    """The TracerPid of every thread of `pid` (0: not traced)."""
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        out.add(int(re.search(r"^TracerPid:\s*(\d+)", status, re.M)[1]))
    return out


@pytest.mark.slow
def test_raft_storage_failure_shuts_the_server_down_with_exit_1(gregor_process) -> None:
    """fsync of the one-voter quorum's Raft log fails with EIO (strace fault injection on the
    running `gregor server`): the controller stops, the server shuts down gracefully, says why,
    and exits 1; restarted without the fault it serves its data again."""
    if shutil.which("strace") is None:
        pytest.skip("strace not installed (apt install strace)")
    server = gregor_process()
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("before", partitions=1)
    raft = server.data_dir / "__cluster_metadata" / RAFT_DIR
    segments = sorted(raft.glob("log-*.seg"))
    assert segments, list(raft.iterdir())
    paths = [arg for seg in segments for arg in ("-P", str(seg))]
    tracer = subprocess.Popen(
        ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync",
         "-e", "inject=fsync:error=EIO", *paths, "-p", str(server.proc.pid)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        try:
            wait_until(
                lambda: _traced_by(server.proc.pid) == {tracer.pid} or tracer.poll() is not None,
                10,
                "strace attached to every thread",
            )
        except AssertionError:
            pytest.fail(f"strace did not attach: {_traced_by(server.proc.pid)}")
        if tracer.poll() is not None:
            pytest.skip(f"strace cannot attach here: {tracer.stderr.read().decode()[:200]}")
        with Admin(bootstrap_servers=server.bootstrap, request_timeout_ms=5000) as admin:
            with pytest.raises(GregorError):  # its records can no longer be made durable
                admin.create_topic("after", partitions=1, timeout_ms=3000)
        code = server.proc.wait(30)
    finally:
        if tracer.poll() is None:
            tracer.kill()
        tracer.wait(10)
        tracer.stderr.close()
    err = server.stderr()
    assert code == 1, err[-3000:]
    assert "raft storage failed" in err and "Input/output error" in err
    assert "fatal error: metadata quorum storage failed" in err
    assert "broker shut down" in err  # the graceful path: logs flushed, clean-shutdown marker
    assert "gregor server: stopped after a fatal error: metadata quorum storage failed" in err

    again = gregor_process(data_dir=server.data_dir)
    with Admin(bootstrap_servers=again.bootstrap) as admin:
        assert "before" in admin.list_topics()
        assert [p.leader for p in admin.describe_topic("before").partitions] == [1]
