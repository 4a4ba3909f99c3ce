"""Client quotas across real processes: AlterClientQuotas sent to one broker is forwarded to
the remote controller quorum, committed, and applied by every broker from the metadata log; the
quotas survive the active controller's failover and a broker's restart."""

from __future__ import annotations

import signal

import pytest
from helpers import wait_until

from client import Admin
from client.aio.admin_quotas import ClientQuotaAlteration, ClientQuotaEntity, Op


def _quotas(bootstrap: str) -> dict:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return admin.describe_client_quotas()


@pytest.mark.slow
@pytest.mark.long  # the single-broker quota tests (tests/integration) cover the rest
def test_quotas_forwarded_applied_everywhere_and_kept(broker_cluster) -> None:
    q, b = broker_cluster(brokers=(4, 5))
    alice = ClientQuotaEntity.of({"user": "alice"})
    etl = ClientQuotaEntity.of({"user": None, "client-id": "etl"})
    with Admin(bootstrap_servers=b.bootstrap(4)) as admin:
        r = admin.alter_client_quotas(
            [
                ClientQuotaAlteration(alice, [Op("producer_byte_rate", 1024)]),
                ClientQuotaAlteration(etl, [Op("request_percentage", 12.5)]),
            ]
        )
    assert r == {alice: None, etl: None}
    want = {alice: {"producer_byte_rate": 1024.0}, etl: {"request_percentage": 12.5}}
    wait_until(lambda: _quotas(b.bootstrap(5)) == want, 30, "broker 5 applied the quotas")
    leader = q.wait_leader(10, "the active controller")
    q.kill(leader)
    q.wait_leader(30, "a new active controller")
    with Admin(bootstrap_servers=b.bootstrap(5)) as admin:

        def altered() -> bool:
            r = admin.alter_client_quotas(
                [
                    ClientQuotaAlteration(
                        alice, [Op("producer_byte_rate", None), Op("consumer_byte_rate", 2048)]
                    )
                ]
            )
            return r[alice] is None

        wait_until(altered, 60, "an alteration through the new active controller")
    want = {alice: {"consumer_byte_rate": 2048.0}, etl: {"request_percentage": 12.5}}
    b.stop(4, signal.SIGTERM)
    b.start(4)
    wait_until(lambda: _quotas(b.bootstrap(4)) == want, 60, "the restarted broker's quotas")
    assert _quotas(b.bootstrap(5)) == want
