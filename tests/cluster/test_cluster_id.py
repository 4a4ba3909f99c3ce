"""One cluster id, owned by the controller quorum (issue 23, must-have 1): 3 `gregor controller`
and 3 `gregor broker` processes started without `cluster.id` agree on the id the first active
controller wrote into the metadata log, and each stores it; a broker or a controller whose own id
differs is refused with INCONSISTENT_CLUSTER_ID naming both ids and where its own comes from."""

from __future__ import annotations

import signal
from pathlib import Path

import msgpack
import pytest
from controller_quorum import HOST
from helpers import spawn_gregor, wait_until

from client import Admin
from client.errors import ErrorCode
from client.protocol.api_keys import ApiKey
from controller.quorum.network import request


def _describe(bootstrap: str) -> tuple[str, set[int]]:
    with Admin(bootstrap_servers=bootstrap) as admin:
        d = admin.describe_cluster()
        return d.cluster_id, {b.node_id for b in d.brokers}


def _stored(directory: Path) -> str | None:
    path = directory / "cluster.id"
    return path.read_text().strip() if path.exists() else None


def _run_to_exit(args: list[str], data_dir: Path, stderr: Path) -> tuple[int, str]:
    """Run `gregor ARGS`, which must exit by itself; its exit code and stderr."""
    gp = spawn_gregor(args, data_dir, stderr)
    try:
        code = gp.proc.wait(60)
    finally:
        if gp.proc.poll() is None:
            gp.proc.send_signal(signal.SIGKILL)
            gp.proc.wait(15)
        text = gp.stderr()
        gp.close()
    return code, text


@pytest.mark.slow
def test_one_cluster_id_stored_everywhere_and_mismatches_refused(broker_cluster) -> None:
    q, b = broker_cluster()
    wait_until(lambda: _describe(b.bootstrap(4))[1] == {4, 5, 6}, 30, "3 unfenced brokers")
    answers = {n: _describe(b.bootstrap(n))[0] for n in (4, 5, 6)}
    ids = set(answers.values())
    assert len(ids) == 1, answers
    [cid] = ids
    assert cid
    for n in (4, 5, 6):
        assert _stored(b.data_dirs[n]) == cid, f"broker {n}"
    for n in q.ids:
        wait_until(
            lambda n=n: _stored(q.data_root / f"controller-{n}") == cid, 20, f"controller {n}"
        )

    # a Raft message of another cluster is refused; one of this cluster is taken (here: judged
    # malformed, past the cluster check)
    def raft_message(sender: str) -> int:
        body = {"cluster_id": sender, "payload": msgpack.packb({"type": "not-a-message"})}
        return request(HOST, q.ports[1], ApiKey.RAFT_MESSAGE, body)["error_code"]

    assert raft_message("foreign-id") == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert raft_message(cid) == ErrorCode.INVALID_REQUEST

    # broker 6 restarted with another cluster.id configured: refused, names both ids and the file
    assert b.stop(6, signal.SIGTERM) == 0
    b.configs[6].write_text(b.configs[6].read_text() + "cluster.id: another-cluster\n")
    code, err = _run_to_exit(
        ["broker", "--config", str(b.configs[6])], b.data_dirs[6], b.tmp / "broker-6.refused"
    )
    assert code != 0, err
    line = next(x for x in err.splitlines() if x.startswith("gregor broker:"))
    assert "INCONSISTENT_CLUSTER_ID" in line and "'another-cluster'" in line and repr(cid) in line
    assert str(b.data_dirs[6] / "cluster.id") in line
    assert _stored(b.data_dirs[6]) == cid  # its file is left alone

    # a new broker configured with another id: the controller refuses its registration
    cfg7 = b.tmp / "broker-7.yaml"
    cfg7.write_text(
        b.configs[6]
        .read_text()
        .replace("node.id: 6", "node.id: 7")
        .replace(str(b.data_dirs[6]), str(b.tmp / "broker-7"))
    )
    code, err = _run_to_exit(
        ["broker", "--config", str(cfg7)], b.tmp / "broker-7", b.tmp / "broker-7.refused"
    )
    assert code != 0, err
    line = next(x for x in err.splitlines() if x.startswith("gregor broker:"))
    assert "INCONSISTENT_CLUSTER_ID" in line and "broker 7" in line
    assert "'another-cluster'" in line and repr(cid) in line and "cluster.id config key" in line
    assert _stored(b.tmp / "broker-7") is None

    # controller 3 whose data dir's id was edited refuses to start
    q.terminate(3)
    id_file = q.data_root / "controller-3" / "cluster.id"
    id_file.write_text("edited-id\n")
    gp = q.spawn(3)
    code = q.reap(3, 60)
    err = gp.stderr_path.read_text()
    assert code != 0, err
    line = next(x for x in err.splitlines() if x.startswith("gregor controller:"))
    assert "INCONSISTENT_CLUSTER_ID" in line and "controller 3" in line
    assert "'edited-id'" in line and repr(cid) in line and str(id_file) in line

    # the rest of the cluster still answers one id
    assert {_describe(b.bootstrap(n))[0] for n in (4, 5)} == {cid}
