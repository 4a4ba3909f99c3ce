"""AddRaftVoter / RemoveRaftVoter against in-process ControllerProcesses (real Raft logs, real
sockets): a second controller joins a one-voter quorum and leaves again; bad requests and
unreachable learners get clear answers; clients learn a new controller's address."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest
from helpers import wait_until

from client.errors import ErrorCode
from client.protocol.api_keys import ApiKey
from controller.quorum.leader_tracker import LeaderTracker
from controller.quorum.membership_service import own_address, parse_endpoint
from controller.quorum.network import request
from controller.quorum.process import ControllerProcess
from controller.raft.state import Role


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(tmp_path, node_id: int, voters: str, listener: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        node_id=node_id,
        controller_quorum_voters=voters,
        controller_quorum_listener=listener,
        metadata_log_dir=str(tmp_path / f"meta-{node_id}"),
        controller_quorum_election_timeout_ms=200,
        metadata_log_max_records_between_snapshots=3,
        broker_session_timeout_ms=60_000,
    )


@pytest.fixture
def one_voter(tmp_path):
    port = _free_port()
    proc = ControllerProcess(_config(tmp_path, 1, f"1@127.0.0.1:{port}"))
    proc.start()
    started = [proc]
    wait_until(lambda: proc.log is not None and proc.log.is_leader(), 10, "voter 1 leads")
    yield proc, port, started, tmp_path
    for p in started:
        p.stop()


def _call(port: int, key: int, body: dict) -> dict:
    return request("127.0.0.1", port, key, body, timeout=30)


def test_add_then_remove_a_second_controller(one_voter) -> None:
    proc1, port1, started, tmp_path = one_voter
    port2 = _free_port()
    proc2 = ControllerProcess(
        _config(tmp_path, 2, f"1@127.0.0.1:{port1}", listener=f"127.0.0.1:{port2}")
    )
    proc2.start()
    started.append(proc2)
    assert proc2.log is not None and proc2.log.node.role is Role.OBSERVER

    resp = _call(
        port1,
        ApiKey.ADD_RAFT_VOTER,
        {"voter_id": 2, "endpoint": f"127.0.0.1:{port2}", "timeout_ms": 20_000},
    )
    assert resp["error_code"] == 0, resp
    assert proc1.log is not None and proc1.log.node.voters == {1, 2}
    wait_until(lambda: proc2.log.node.voters == {1, 2}, 10, "2 learns it votes")
    assert proc2.log.node.config.voters[2] == f"127.0.0.1:{port2}"
    # repeating the call is harmless
    again = _call(
        port1,
        ApiKey.ADD_RAFT_VOTER,
        {"voter_id": 2, "endpoint": f"127.0.0.1:{port2}", "timeout_ms": 5_000},
    )
    assert again["error_code"] == 0, again
    # a follower answers NOT_CONTROLLER naming the leader and its endpoint
    if not proc2.log.is_leader():
        nc = _call(port2, ApiKey.REMOVE_RAFT_VOTER, {"voter_id": 2, "timeout_ms": 1_000})
        assert nc["error_code"] == ErrorCode.NOT_CONTROLLER, nc
        assert nc["leader_endpoint"] == f"127.0.0.1:{port1}"

    resp = _call(port1, ApiKey.REMOVE_RAFT_VOTER, {"voter_id": 2, "timeout_ms": 20_000})
    assert resp["error_code"] == 0, resp
    assert proc1.log.node.voters == {1} and not proc1.log.node.config.learners
    last = _call(port1, ApiKey.REMOVE_RAFT_VOTER, {"voter_id": 1, "timeout_ms": 5_000})
    assert last["error_code"] == ErrorCode.INVALID_REQUEST
    assert "only voter" in last["error_message"]


def test_bad_and_unfinished_additions_get_clear_answers(one_voter) -> None:
    _proc1, port1, _started, _tmp = one_voter
    bad = _call(
        port1, ApiKey.ADD_RAFT_VOTER, {"voter_id": 5, "endpoint": "nohost", "timeout_ms": 1}
    )
    assert bad["error_code"] == ErrorCode.INVALID_REQUEST and "HOST:PORT" in bad["error_message"]
    neg = _call(port1, ApiKey.ADD_RAFT_VOTER, {"voter_id": -1, "endpoint": "h:1", "timeout_ms": 1})
    assert neg["error_code"] == ErrorCode.INVALID_REQUEST
    # nothing listens there: the learner never catches up
    resp = _call(
        port1,
        ApiKey.ADD_RAFT_VOTER,
        {"voter_id": 7, "endpoint": f"127.0.0.1:{_free_port()}", "timeout_ms": 1_000},
    )
    assert resp["error_code"] == ErrorCode.REQUEST_TIMED_OUT, resp
    assert "learner catching up" in resp["error_message"]


def test_own_address_and_endpoints() -> None:
    voters = {1: ("h1", 9001), 2: ("h2", 9002)}
    assert own_address(1, voters, None) == ("h1", 9001)
    assert own_address(1, voters, "h1:9001") == ("h1", 9001)
    assert own_address(4, voters, "h4:9004") == ("h4", 9004)
    with pytest.raises(ValueError, match="needs controller.quorum.listener"):
        own_address(4, voters, None)
    with pytest.raises(ValueError, match="differs from node 1's entry"):
        own_address(1, voters, "h9:1")
    assert parse_endpoint("[::1]:80") == ("::1", 80)
    for bad in ("h", "h:", ":1", "h:0", "h:70000", "h:x"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_endpoint(bad)


def test_clients_learn_the_address_of_a_controller_added_since() -> None:
    t = LeaderTracker({1: ("h1", 1), 2: ("h2", 2)})
    t.set_leader(4)
    assert t.leader is None  # unknown and no address: ask the known ones
    t.set_leader(4, "h4:4")
    assert t.leader == 4 and t.target() == (4, ("h4", 4))
    assert t.known()[4] == ("h4", 4)


def test_cli_refuses_incomplete_arguments_and_reports_an_unreachable_quorum(capsys) -> None:  # type: ignore[no-untyped-def]
    import argparse

    from controller import membership_cli

    args = argparse.Namespace(
        bootstrap_controller=f"127.0.0.1:{_free_port()}",
        timeout_ms=300,
        config=None,
        controller_id=4,
        endpoint=None,
    )
    assert membership_cli.run_add(args) == 2
    assert "give --config FILE, or --controller-id and --endpoint" in capsys.readouterr().err
    args.endpoint = "127.0.0.1:1"
    assert membership_cli.run_add(args) == 1
    err = capsys.readouterr().err
    assert "timed out" in err and "Connection refused" in err
