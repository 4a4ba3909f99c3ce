"""Admin.describe_quorum() against real `gregor controller` processes: asked of a follower it
follows the leader endpoint; it reports the leader, term, high watermark, every voter's and an
observing broker's log end offset and lag; after the leader is SIGKILLed it reports the new
leader in a higher term (asking again while the election runs)."""

from __future__ import annotations

import asyncio

import pytest
from controller_quorum import HOST
from helpers import wait_until

from client import Admin
from client import aio as client_aio
from client.aio.admin_quorum import QuorumDescription

pytestmark = pytest.mark.slow


def _caught_up(d: QuorumDescription, observer: int) -> bool:
    return all(v.lag == 0 and v.log_end_offset >= d.high_watermark for v in d.voters) and any(
        o.replica_id == observer and o.lag == 0 for o in d.observers
    )


def test_describe_quorum_via_follower_and_after_failover(controller_quorum) -> None:
    q = controller_quorum()
    q.start_all()
    lid, term = q.wait_leader_term(5, "a leader")
    follower = next(n for n in q.ids if n != lid)
    q.add_brokers(7)
    q.create_topics(["a", "b"], partitions=2, rf=1)
    observer = q.start_observer(replica_id=7)
    hw = q.high_watermark(lid)
    wait_until(lambda: observer.image.offset >= hw - 1, 5, "the observer to catch up")

    with Admin(bootstrap_servers=f"{HOST}:{q.ports[follower]}") as admin:
        d = admin.describe_quorum()
        assert isinstance(d, QuorumDescription)
        assert (d.leader_id, d.leader_epoch) == (lid, term)
        assert d.high_watermark >= hw
        assert sorted(v.replica_id for v in d.voters) == q.ids
        leader = next(v for v in d.voters if v.replica_id == lid)
        assert leader.log_end_offset >= d.high_watermark and leader.lag == 0
        # followers and the observer report caught up once the next heartbeat round is done
        seen: list[QuorumDescription] = []

        def caught_up() -> QuorumDescription | None:
            seen.append(admin.describe_quorum())
            return seen[-1] if _caught_up(seen[-1], 7) else None

        try:
            d = wait_until(caught_up, 5, "voters and observer 7 caught up")
        except AssertionError as e:
            raise AssertionError(f"{e}: last {seen[-1]}") from None
        assert all(v.last_contact_ms >= 0 for v in d.voters + d.observers)

        q.kill(lid)
        # asked while the election runs: a survivor without a leader -> ask again
        d2 = admin.describe_quorum(timeout_ms=10_000)
        assert d2.leader_id in q.ids and d2.leader_id != lid and d2.leader_epoch > term
        assert d2.high_watermark >= d.high_watermark
        dead = next(v for v in d2.voters if v.replica_id == lid)
        assert dead.lag >= 0

    async def via_aio() -> QuorumDescription:
        survivor = next(n for n in q.ids if n != lid)
        async with client_aio.Admin(bootstrap_servers=f"{HOST}:{q.ports[survivor]}") as a:
            return await a.describe_quorum()

    d3 = asyncio.run(via_aio())
    assert (d3.leader_id, d3.leader_epoch) == (d2.leader_id, d2.leader_epoch)
