"""The files of a `gregor cluster up` directory (broker/cluster_cmd.py, issue 22 item 3): the
configs of a new cluster (one cluster.id, the replication defaults of multi-broker
quickstarts), reading them back for a resume, and pid files that count only while their
process is that node."""

from __future__ import annotations

import subprocess
import sys
from argparse import Namespace

import pytest
from helpers import wait_until

from broker.cluster_cmd import _resume_mismatch
from broker.cluster_nodes import load_nodes, node_pid, write_configs
from client.config import load_config


@pytest.mark.parametrize(("brokers", "rf", "min_isr"), [(1, 1, 1), (2, 2, 1), (3, 3, 2), (5, 3, 2)])
def test_a_new_cluster_gets_quickstart_replication_defaults(tmp_path, brokers, rf, min_isr):
    nodes = write_configs(tmp_path, 3, brokers, 9092)
    ids = set()
    for n in nodes:
        cfg = load_config(n.role, str(n.config), {}, {})
        ids.add(cfg.cluster_id)
        # the controllers too: a topic created with RF -1 (auto-created ones) takes theirs
        assert (cfg.default_replication_factor, cfg.min_insync_replicas) == (rf, min_isr)
        if n.role == "broker":
            assert cfg.offsets_topic_replication_factor == rf
    assert len(ids) == 1 and None not in ids  # one cluster id, in every file


def test_the_files_are_read_back_as_written(tmp_path):
    written = write_configs(tmp_path, 3, 3, 20000)
    (tmp_path / "notes.yaml").write_text("not a node\n")  # other files are no nodes
    read = load_nodes(tmp_path)
    assert [(n.name, n.role, n.node_id, n.port) for n in read] == [
        ("controller-1", "controller", 1, 20101),
        ("controller-2", "controller", 2, 20102),
        ("controller-3", "controller", 3, 20103),
        ("broker-1", "broker", 4, 20000),
        ("broker-2", "broker", 5, 20001),
        ("broker-3", "broker", 6, 20002),
    ]
    assert [n.config for n in read] == [n.config for n in written]
    assert read[3].log == tmp_path / "broker-1.log"
    assert read[3].pid_file == tmp_path / "broker-1.pid"
    assert load_nodes(tmp_path / "missing") == []


def test_a_flag_that_contradicts_the_cluster_is_named(tmp_path):
    nodes = write_configs(tmp_path, 3, 3, 20000)
    same = Namespace(controllers=None, brokers=3, base_port=20000, secure=False)
    assert _resume_mismatch(same, nodes) is None
    other = Namespace(controllers=None, brokers=None, base_port=9092, secure=False)
    assert _resume_mismatch(other, nodes) == (
        "--base-port 9092, but the cluster there has --base-port 20000"
    )
    secured = Namespace(controllers=None, brokers=None, base_port=None, secure=True)
    assert _resume_mismatch(secured, nodes) == "--secure, but the cluster there is not secured"


def test_a_pid_counts_only_while_its_process_is_that_node(tmp_path):
    node = write_configs(tmp_path, 1, 1, 20000)[1]
    assert node_pid(node) is None  # no pid file
    # a process whose command line names the node's config, as the nodes' do
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "--config", str(node.config)],
        stdin=subprocess.PIPE,
    )
    try:
        node.pid_file.write_text(f"{proc.pid}\n")
        assert node_pid(node) == proc.pid
        other = write_configs(tmp_path / "other", 1, 1, 20000)[1]
        other.pid_file.write_text(f"{proc.pid}\n")  # a reused pid: another node's config
        assert node_pid(other) is None
    finally:
        proc.communicate(b"")
    wait_until(lambda: proc.poll() is not None, 10, "helper process gone")
    assert node_pid(node) is None  # a stale pid file
    node.pid_file.write_text("garbage\n")
    assert node_pid(node) is None
