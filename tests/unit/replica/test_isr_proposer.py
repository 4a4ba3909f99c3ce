"""IsrProposer batches ISR changes: one AlterPartition in flight, what is proposed meanwhile goes
in the next request (all partitions together), each partition settled by its own answer."""

from __future__ import annotations

import concurrent.futures
import types

from broker.replica.isr import IsrProposer
from broker.replica.partition import Partition
from client.errors import ErrorCode


class FakeChannel:
    """Records AlterPartition calls; the test answers each future."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, list[dict], concurrent.futures.Future]] = []
        self.refuse: Exception | None = None

    def alter_partition(self, broker_id: int, broker_epoch: int, topics: list[dict]):
        if self.refuse is not None:
            raise self.refuse
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self.calls.append((broker_id, broker_epoch, topics, fut))
        return fut


def _leader(topic: str, p: int, isr=(1, 2)) -> Partition:
    # a refusal recomputes the HW, which reads only the log's ends
    log = types.SimpleNamespace(flushed_offset=0, end_offset=0)
    part = Partition(topic, p, 1, log=log)  # type: ignore[arg-type]
    part.leader_id, part.leader_epoch, part.partition_epoch = 1, 3, 7
    part.isr = isr
    part.pending_isr = ((*isr, 3), 0)  # as isr_to_expand leaves it
    return part


def _answer(topics: list[dict], codes: dict[tuple[str, int], int]) -> dict:
    return {
        "error_code": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition": p["partition"],
                        "error_code": codes.get((t["name"], p["partition"]), 0),
                    }
                    for p in t["partitions"]
                ],
            }
            for t in topics
        ],
    }


def test_changes_proposed_while_one_is_in_flight_go_together_in_the_next_request():
    ch = FakeChannel()
    prop = IsrProposer(ch, 1, lambda: 42)  # type: ignore[arg-type]
    a0, a1, b0 = _leader("a", 0), _leader("a", 1), _leader("b", 0)
    prop.propose(a0, (1, 2, 3))
    assert len(ch.calls) == 1
    assert ch.calls[0][:3] == (
        1,
        42,
        [{"name": "a", "partitions": [
            {"partition": 0, "leader_epoch": 3, "new_isr": [1, 2, 3], "partition_epoch": 7}
        ]}],
    )  # fmt: skip
    prop.propose(a1, (1, 2, 3))
    b0.partition_epoch = 8
    prop.propose(b0, (1, 2, 3))
    b0.partition_epoch = 9  # a later epoch is not sent for a change computed against 8
    assert len(ch.calls) == 1, "nothing more while a request is in flight"
    _, _, topics, fut = ch.calls[0]
    fut.set_result(_answer(topics, {}))
    assert len(ch.calls) == 2, "the queued changes went once the first was answered"
    second = {t["name"]: t["partitions"] for t in ch.calls[1][2]}
    assert second == {
        "a": [{"partition": 1, "leader_epoch": 3, "new_isr": [1, 2, 3], "partition_epoch": 7}],
        "b": [{"partition": 0, "leader_epoch": 3, "new_isr": [1, 2, 3], "partition_epoch": 8}],
    }
    _, _, topics, fut = ch.calls[1]
    fut.set_result(_answer(topics, {("b", 0): int(ErrorCode.INVALID_UPDATE_VERSION)}))
    assert a1.pending_isr is not None and a1.isr_retry_at_ms == 0, "accepted: waits for metadata"
    # a stale partition epoch does not prove the change was not made (an earlier send may have
    # been committed): it stays pending, counted towards the HW, and goes again after back-off
    assert b0.pending_isr is not None and b0.isr_unsettled and b0.isr_retry_at_ms > 0
    assert prop.requests == 2 and prop.proposed == 3 and prop.refused == 1
    prop.propose(a0, (1, 2, 3))
    assert len(ch.calls) == 3, "idle again: the next change goes at once"


def test_a_failed_request_or_a_refused_call_fails_every_change_it_carried():
    ch = FakeChannel()
    prop = IsrProposer(ch, 1, lambda: 42)  # type: ignore[arg-type]
    a0, a1 = _leader("a", 0), _leader("a", 1)
    prop.propose(a0, (1, 2, 3))
    prop.propose(a1, (1, 2, 3))
    ch.refuse = RuntimeError("1000 controller calls pending")
    ch.calls[0][3].set_exception(TimeoutError("no answer"))
    # no answer: the change may have been made; it stays pending and goes again after back-off
    assert a0.pending_isr is not None and a0.isr_unsettled and a0.isr_retry_at_ms > 0
    assert a1.pending_isr is not None and a1.isr_unsettled and a1.isr_retry_at_ms > 0
    ch.refuse = None
    b0 = _leader("b", 0)
    prop.propose(b0, (1, 2, 3))
    assert len(ch.calls) == 2, "not stuck in flight after failures"
    ch.calls[1][3].set_result({"error_code": int(ErrorCode.STALE_BROKER_EPOCH), "topics": []})
    assert b0.pending_isr is not None and b0.isr_unsettled and prop.refused == 3


def test_only_a_refusal_proving_the_change_was_not_made_drops_it():
    """INELIGIBLE_REPLICA and INVALID_REQUEST are checked against the current epochs: the change
    was not made, so it leaves the maximal ISR at once (issue 22's stall)."""
    ch = FakeChannel()
    prop = IsrProposer(ch, 1, lambda: 42)  # type: ignore[arg-type]
    a0, a1 = _leader("a", 0), _leader("a", 1)
    prop.propose(a0, (1, 2, 3))
    prop.propose(a1, (1, 2, 3))
    _, _, topics, fut = ch.calls[0]
    fut.set_result(_answer(topics, {("a", 0): int(ErrorCode.INELIGIBLE_REPLICA)}))
    _, _, topics, fut = ch.calls[1]
    fut.set_result(_answer(topics, {("a", 1): int(ErrorCode.INVALID_REQUEST)}))
    for part in (a0, a1):
        assert part.pending_isr is None and not part.isr_unsettled and part.isr_retry_at_ms > 0


def test_an_unsettled_change_is_sent_again_unchanged_after_the_back_off():
    """While a change's fate is unknown no other change is computed (it may have been made):
    the next check after the back-off returns the same change, once."""
    part = _leader("a", 0)
    part.followers = {}
    part.isr_change_unsettled(backoff_ms=0)
    now = part.isr_retry_at_ms
    assert part.isr_to_shrink(1, now_ms=now) == (1, 2, 3), "the pending change, not a shrink"
    assert part.isr_to_shrink(1, now_ms=now + 1) is None, "in flight again: nothing more"
