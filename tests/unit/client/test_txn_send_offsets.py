"""send_offsets_to_transaction in the transactional producer's state machine against a fake
cluster: AddOffsetsToTxn to the transaction coordinator, TxnOffsetCommit to the group's
(retried while it loads), EndTxn for a transaction holding only offsets, a refused member
making the transaction abortable and PRODUCER_FENCED making the producer fatal."""

from __future__ import annotations

import asyncio

import pytest
from test_txn_manager import FakeCoordinator, _manager

from client.aio.transactions import TxnState
from client.aio.types import ConsumerGroupMetadata, TopicPartition
from client.errors import ErrorCode, ProducerFencedError, UnknownMemberIdError
from client.protocol import ApiKey

GROUP_NODE = 2


class FakeWithGroups(FakeCoordinator):
    """Broker 1 coordinates the transaction, broker 2 the group."""

    async def send_any(self, api: int, body: dict) -> dict:
        assert api == ApiKey.FIND_COORDINATOR
        node = self.coordinator if body["key_type"] == 1 else GROUP_NODE
        return {"coordinators": [{"error_code": 0, "node_id": node}]}

    async def send(self, node: int, api: int, body: dict) -> dict:
        if api != ApiKey.TXN_OFFSET_COMMIT:
            return await super().send(node, api, body)
        self.sent.append((node, api, body))
        script = self.errors.get(api) or []
        code = script.pop(0) if script else 0
        return {"topics": [{"name": t["name"], "partitions": [
            {"partition": p["partition"], "error_code": code} for p in t["partitions"]]}
            for t in body["topics"]]}  # fmt: skip


META = ConsumerGroupMetadata("g", 4, "member-1")
OFFSETS = {TopicPartition("in", 0): 12}


def test_offsets_alone_make_a_transaction_that_is_committed() -> None:
    cluster = FakeWithGroups()
    cluster.errors[ApiKey.TXN_OFFSET_COMMIT] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
    txn, _ = _manager(cluster)

    async def run() -> None:
        await txn.init()
        txn.begin()
        await txn.send_offsets(OFFSETS, META)
        txn.begin_commit()
        await txn.end(commit=True)

    asyncio.run(run())
    sent = [(node, api) for node, api, _ in cluster.sent]
    assert sent == [
        (1, ApiKey.INIT_PRODUCER_ID),
        (1, ApiKey.ADD_OFFSETS_TO_TXN),
        (GROUP_NODE, ApiKey.TXN_OFFSET_COMMIT),  # COORDINATOR_LOAD_IN_PROGRESS: again
        (GROUP_NODE, ApiKey.TXN_OFFSET_COMMIT),
        (1, ApiKey.END_TXN),
    ]
    commit = cluster.sent[3][2]
    assert (commit["group_id"], commit["generation_id"], commit["member_id"]) == (
        "g",
        4,
        "member-1",
    )
    assert (commit["producer_id"], commit["producer_epoch"]) == (7, 3)
    assert commit["topics"] == [{"name": "in", "partitions": [
        {"partition": 0, "committed_offset": 12}]}]  # fmt: skip
    assert txn.state is TxnState.READY and not txn.offsets_added


def test_a_refused_member_is_abortable_and_fencing_is_fatal() -> None:
    cluster = FakeWithGroups()
    cluster.errors[ApiKey.TXN_OFFSET_COMMIT] = [ErrorCode.UNKNOWN_MEMBER_ID,
                                                ErrorCode.PRODUCER_FENCED]  # fmt: skip
    txn, _ = _manager(cluster)

    async def run() -> None:
        await txn.init()
        txn.begin()
        with pytest.raises(UnknownMemberIdError):
            await txn.send_offsets(OFFSETS, META)
        assert txn.state is TxnState.ABORTABLE_ERROR
        txn.begin_abort()
        await txn.end(commit=False)  # EndTxn(abort): the offsets partition was added
        assert cluster.apis()[-1] == ApiKey.END_TXN and not cluster.sent[-1][2]["committed"]
        txn.begin()
        with pytest.raises(ProducerFencedError):
            await txn.send_offsets(OFFSETS, META)
        assert txn.state is TxnState.FATAL_ERROR

    asyncio.run(run())
