"""ACLs in a real multi-process cluster: 3 `gregor controller` voters and 3 `gregor broker`
processes with the authorizer on, SASL_PLAINTEXT listeners only. CreateAcls goes from a broker
to the active controller over the network (controller/quorum/remote.py), the ACL reaches every
broker's image, and replication works only because the brokers' own principal (User:broker,
their sasl.inter.broker.username) is a super user: acks=all with min.insync.replicas=3 needs
both followers of each partition to be allowed to fetch (CLUSTER_ACTION)."""

from __future__ import annotations

import pytest
from broker_cluster import Brokers
from controller_quorum import ControllerQuorum
from helpers import wait_until

from client import Admin, Producer
from client.errors import TopicAuthorizationFailedError
from client.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


@pytest.mark.long  # the ACL matrix and CLI tests (tests/integration) cover one broker
def test_acls_across_a_cluster(tmp_path) -> None:
    users = tmp_path / "users.txt"
    users.write_text(
        "SCRAM-SHA-512=[name=broker,password=broker-pw]\n"
        "SCRAM-SHA-512=[name=admin,password=admin-pw]\n"
        "SCRAM-SHA-512=[name=alice,password=alice-pw]\n"
    )
    q = ControllerQuorum(tmp_path / "quorum", 3, **{"sasl.scram.bootstrap.file": str(users)})
    brokers: Brokers | None = None
    try:
        q.start_all()
        q.wait_leader(30, "a controller leader")
        d = tmp_path / "brokers"
        d.mkdir()
        brokers = Brokers(
            d, q.voters, [4, 5, 6],
            {
                "broker.session.timeout.ms": 3000,
                "sasl.inter.broker.username": "broker",
                "sasl.inter.broker.password": "broker-pw",
                "authorizer.class.name": "StandardAuthorizer",
                "super.users": '"User:admin;User:broker"',
            },
        )  # fmt: skip
        for path in brokers.configs.values():
            text = path.read_text().replace(
                "listeners: PLAINTEXT://", "listeners: SASL_PLAINTEXT://"
            )
            path.write_text(text)
        brokers.start_all((4, 5, 6))
        bootstrap = brokers.bootstrap_all()
        sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512"}
        admin_cfg = {**sasl, "sasl_username": "admin", "sasl_password": "admin-pw"}
        alice_cfg = {**sasl, "sasl_username": "alice", "sasl_password": "alice-pw"}
        with Admin(bootstrap_servers=bootstrap, **admin_cfg) as admin:
            wait_until(lambda: len(admin.describe_cluster().brokers) == 3, 60, "3 brokers")
            admin.create_topic(
                "t", partitions=3, replication_factor=3, config={"min.insync.replicas": "3"}
            )
            with Producer(bootstrap_servers=bootstrap, linger_ms=0, **alice_cfg) as p:
                try:
                    p.send("t", b"no", partition=0).result(30)
                    raise AssertionError("alice wrote without an ACL")
                except TopicAuthorizationFailedError as exc:
                    assert "User:alice" in str(exc) or "TOPIC_AUTHORIZATION" in str(exc), exc
            binding = AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice",
                                 "*", AclOperation.WRITE, AclPermissionType.ALLOW)  # fmt: skip
            assert admin.create_acls([binding]) == {binding: None}
            for n in (4, 5, 6):  # every broker's image has it
                with Admin(bootstrap_servers=brokers.bootstrap(n), **admin_cfg) as one:
                    wait_until(lambda o=one: o.describe_acls() == [binding], 30, f"ACL on {n}")
            with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, **alice_cfg) as p:
                for f in [p.send("t", b"v%d" % i, partition=i % 3) for i in range(30)]:
                    f.result(60)  # only when both followers of each partition fetched
            assert admin.delete_acls([AclBindingFilter(principal="User:alice")]) == [[binding]]
    finally:
        if brokers is not None:
            brokers.close()
        q.close()
