"""PartitionTable: the partitions a broker serves, shared by the ReplicaManager's parts."""

from __future__ import annotations

import pytest
from test_replica_manager import h  # noqa: F401  (fixture)

from broker.replica.partition_table import PartitionTable
from broker.replica.specs import FetchPartitionSpec, ReplicaError
from client.errors import ErrorCode


def test_missing_says_why():
    table = PartitionTable(7)
    assert table.missing(("t", 0)).code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    table.failed[("t", 0)] = "OSError: Too many open files"
    err = table.missing(("t", 0))
    assert err.code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # retriable: a later image applies it
    assert "broker 7" in err.message and "Too many open files" in err.message
    with pytest.raises(ReplicaError) as info:
        table.leader(("t", 0))
    assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_one_table_shared_by_the_parts(h):  # noqa: F811
    rm = h.rm
    assert rm.applier.table is rm.table
    assert rm.offsets.table is rm.table
    assert rm.session_fetches.table is rm.table
    part = rm.table.get(("t", 0))
    assert part is not None and rm.get_partition("t", 0) is part
    assert rm.table.leader(("t", 0)) is part
    with pytest.raises(ReplicaError) as info:
        rm.table.fetchable(FetchPartitionSpec("t", 0, 0, 1, part.leader_epoch + 1))
    assert info.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH
