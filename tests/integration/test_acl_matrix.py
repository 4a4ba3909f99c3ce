"""Authorization matrix: every API the broker serves (the native handler table), sent by a real
SCRAM-authenticated principal over a real socket to a broker with the authorizer on, first
without the ACL it needs (the answer carries the API's *_AUTHORIZATION_FAILED code and nothing
was written or changed), then with exactly that ACL (the authorization code is gone and, for
the APIs that change something, the change happened).

The list of APIs comes from broker/handlers' registry: an API served without a row here fails
`test_every_served_api_has_a_row`.

The broker: an INTERNAL PLAINTEXT listener (its principal User:ANONYMOUS has no ACL, so it can
do nothing) and a SASL_PLAINTEXT one; `admin` (from sasl.scram.bootstrap.file) is the one
super user; `alice` is the principal under test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers import RawClient, broker_config, wait_until

from broker.handlers import HANDLERS
from broker.handlers.base import ACCESS
from client import Admin
from client.protocol import API_SPECS, ApiKey
from client.records.builder import build_batch
from client.security.acl import (
    CLUSTER_NAME,
    IMPLIED_BY,
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
)
from client.security.acl import (
    AclOperation as Op,
)
from client.security.acl import (
    ResourceType as RT,
)
from client.security.scram import ScramClient

ALICE = "User:alice"
AUTHZ_CODES = {29, 30, 31, 53}  # TOPIC/GROUP/CLUSTER/TRANSACTIONAL_ID_AUTHORIZATION_FAILED
EXEMPT = {  # served to every authenticated (or authenticating) connection, as in Kafka
    ApiKey.API_VERSIONS,
    ApiKey.SASL_HANDSHAKE,
    ApiKey.SASL_AUTHENTICATE,
}


@dataclass
class Env:
    server: Any
    sasl_port: int
    admin: Any

    @property
    def node(self) -> Any:
        return self.server.node

    @property
    def image(self) -> Any:
        return self.node.publisher.image

    def log(self, topic: str, partition: int = 0) -> Any:
        return self.node.log_manager.logs()[(topic, partition)]

    def committed(self, group: str, topic: str = "t") -> dict:
        rows = self.node.group_coordinator.fetch_offsets(
            group, [{"name": topic, "partitions": [0]}]
        )
        return {(t["name"], p["partition"]): p["committed_offset"] for t in rows for p in t["partitions"]}  # fmt: skip

    def groups(self) -> set[str]:
        return {g["group_id"] for g in self.node.group_coordinator.list_groups()}


def _alice(port: int) -> RawClient:
    raw = RawClient(("127.0.0.1", port))
    assert raw.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
    scram = ScramClient("SCRAM-SHA-256", "alice", "alice-pw-1")
    first = raw.request(ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": scram.first()}, 2)
    final = raw.request(
        ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": scram.final(bytes(first["auth_bytes"]))}, 3
    )
    assert final["error_code"] == 0, final
    return raw


def codes(obj: Any) -> set[int]:
    """Every error_code anywhere in a response."""
    out: set[int] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "error_code":
                out.add(int(v))
            else:
                out |= codes(v)
    elif isinstance(obj, list):
        for v in obj:
            out |= codes(v)
    return out


def refusal_messages(obj: Any) -> list[str]:
    """The error messages next to an authorization error code anywhere in a response."""
    out: list[str] = []
    if isinstance(obj, dict):
        if obj.get("error_code") in AUTHZ_CODES and obj.get("error_message"):
            out.append(obj["error_message"])
        for v in obj.values():
            out += refusal_messages(v)
    elif isinstance(obj, list):
        for v in obj:
            out += refusal_messages(v)
    return out


def acl(rtype: RT, name: str, op: Op) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, ALICE, "*", op, AclPermissionType.ALLOW)


def topic(name: str, op: Op) -> AclBinding:
    return acl(RT.TOPIC, name, op)


def group(name: str, op: Op) -> AclBinding:
    return acl(RT.GROUP, name, op)


def cluster(op: Op) -> AclBinding:
    return acl(RT.CLUSTER, CLUSTER_NAME, op)


def batch() -> bytes:
    return build_batch([(b"k", b"v")])


@dataclass
class Row:
    api: int
    body: Callable[[], dict]
    grants: list[AclBinding]
    denied_code: int  # expected somewhere in the refused answer
    state: Callable[[Env], Any] = lambda env: None  # what a refusal must leave unchanged
    changed: Callable[[Env, Any], bool] | None = None  # with the grant: did it happen?
    denied_check: Callable[[dict], bool] | None = None  # for answers that filter instead
    allowed_check: Callable[[dict], bool] | None = None
    name: str = ""
    held: list[AclBinding] = field(default_factory=list)  # ACLs held in both phases


def _consumer_fetch() -> dict:
    return {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0,
        "topics": [{"name": "t", "partitions": [{"partition": 0, "fetch_offset": 0}]}],
    }  # fmt: skip


def _txn_offset_commit() -> dict:
    return {
        "transactional_id": "tx", "group_id": "g", "producer_id": 1, "producer_epoch": 0,
        "topics": [{"name": "t", "partitions": [{"partition": 0, "committed_offset": 1}]}],
    }  # fmt: skip


def _listed(resp: dict, name: str) -> bool:
    return any(t["name"] == name and t["error_code"] == 0 for t in resp["topics"])


ROWS: list[Row] = [
    Row(ApiKey.PRODUCE,
        lambda: {"acks": 1, "timeout_ms": 10_000, "topics": [
            {"name": "t", "partitions": [{"partition": 0, "records": batch()}]}]},
        [topic("t", Op.WRITE)], 29,
        state=lambda e: e.log("t").end_offset,
        changed=lambda e, before: e.log("t").end_offset > before),
    Row(ApiKey.PRODUCE,
        lambda: {"transactional_id": "tx", "acks": 1, "timeout_ms": 10_000, "topics": [
            {"name": "t", "partitions": [{"partition": 0, "records": batch()}]}]},
        [acl(RT.TRANSACTIONAL_ID, "tx", Op.WRITE)], 53, name="transactional",
        held=[topic("t", Op.WRITE)],
        state=lambda e: e.log("t").end_offset,
        changed=lambda e, before: e.log("t").end_offset > before),
    Row(ApiKey.WRITE_TXN_MARKERS,
        lambda: {"markers": [{"producer_id": 4321, "producer_epoch": 0,
                              "transaction_result": True, "coordinator_epoch": 0,
                              "topics": [{"name": "t", "partition_indexes": [0]}]}]},
        [cluster(Op.CLUSTER_ACTION)], 31,
        state=lambda e: e.log("t").end_offset,
        changed=lambda e, before: e.log("t").end_offset > before),
    Row(ApiKey.FETCH, _consumer_fetch, [topic("t", Op.READ)], 29,
        allowed_check=lambda r: bool(r["topics"][0]["partitions"][0]["records"]),
        name="consumer"),
    Row(ApiKey.FETCH,
        lambda: {**_consumer_fetch(), "replica_id": 7}, [cluster(Op.CLUSTER_ACTION)], 31,
        name="follower"),
    Row(ApiKey.LIST_OFFSETS,
        lambda: {"topics": [{"name": "t", "partitions": [{"partition": 0, "timestamp": -1}]}]},
        [topic("t", Op.DESCRIBE)], 29),
    Row(ApiKey.DESCRIBE_PRODUCERS,
        lambda: {"topics": [{"name": "t", "partition_indexes": [0]}]}, [topic("t", Op.READ)], 29,
        allowed_check=lambda r: r["topics"][0]["partitions"][0]["error_code"] == 0),
    Row(ApiKey.METADATA, lambda: {"topics": [{"name": "t"}]}, [topic("t", Op.DESCRIBE)], 29,
        allowed_check=lambda r: _listed(r, "t"), name="named"),
    Row(ApiKey.METADATA, lambda: {"topics": None}, [topic("t", Op.READ)], 0,
        denied_check=lambda r: not any(t["name"] == "t" for t in r["topics"]),
        allowed_check=lambda r: _listed(r, "t") and not _listed(r, "other"), name="all"),
    Row(ApiKey.METADATA,
        lambda: {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True},
        [topic("auto", Op.CREATE), topic("auto", Op.DESCRIBE)], 29,
        state=lambda e: "auto" in e.image.topics,
        changed=lambda e, before: "auto" in e.image.topics, name="auto-create"),
    Row(ApiKey.OFFSET_COMMIT,
        lambda: {"group_id": "g", "topics": [
            {"name": "t", "partitions": [{"partition": 0, "committed_offset": 5}]}]},
        [group("g", Op.READ), topic("t", Op.READ)], 30,
        state=lambda e: e.committed("g"),
        changed=lambda e, before: e.committed("g")[("t", 0)] == 5),
    Row(ApiKey.OFFSET_COMMIT,
        lambda: {"group_id": "g", "topics": [
            {"name": "t", "partitions": [{"partition": 0, "committed_offset": 6}]}]},
        [topic("t", Op.READ)], 29, held=[group("g", Op.READ)], name="topic",
        state=lambda e: e.committed("g"),
        changed=lambda e, before: e.committed("g")[("t", 0)] == 6),
    Row(ApiKey.CONSUMER_GROUP_HEARTBEAT,
        lambda: {"group_id": "ghb2", "member_id": "", "member_epoch": 0,
                 "rebalance_timeout_ms": 5000, "subscribed_topic_names": ["t"]},
        [topic("t", Op.DESCRIBE)], 29, held=[group("ghb2", Op.READ)], name="topic",
        state=lambda e: "ghb2" in e.groups()),
    Row(ApiKey.OFFSET_FETCH,
        lambda: {"group_id": "g", "topics": [{"name": "t", "partitions": [0]}]},
        [group("g", Op.DESCRIBE), topic("t", Op.DESCRIBE)], 30),
    Row(ApiKey.FIND_COORDINATOR, lambda: {"key_type": 0, "coordinator_keys": ["g"]},
        [group("g", Op.DESCRIBE)], 30),
    Row(ApiKey.LIST_GROUPS, dict, [group("g", Op.DESCRIBE)], 0,
        denied_check=lambda r: "g" not in {x["group_id"] for x in r["groups"]},
        allowed_check=lambda r: {x["group_id"] for x in r["groups"]} == {"g"}),
    Row(ApiKey.DELETE_GROUPS, lambda: {"groups_names": ["gdel"]}, [group("gdel", Op.DELETE)],
        30, state=lambda e: "gdel" in e.groups(),
        changed=lambda e, before: "gdel" not in e.groups()),
    Row(ApiKey.OFFSET_DELETE,
        lambda: {"group_id": "goff", "topics": [{"name": "t", "partitions": [0]}]},
        [group("goff", Op.DELETE), topic("t", Op.READ)], 30,
        state=lambda e: e.committed("goff"),
        changed=lambda e, before: e.committed("goff")[("t", 0)] == -1),
    Row(ApiKey.CONSUMER_GROUP_HEARTBEAT,
        lambda: {"group_id": "ghb", "member_id": "", "member_epoch": 0,
                 "rebalance_timeout_ms": 5000, "subscribed_topic_names": ["t"]},
        [group("ghb", Op.READ), topic("t", Op.DESCRIBE)], 30, state=lambda e: "ghb" in e.groups()),
    Row(ApiKey.CONSUMER_GROUP_DESCRIBE, lambda: {"group_ids": ["g"]}, [group("g", Op.DESCRIBE)],
        30),
    Row(ApiKey.CREATE_TOPICS,
        lambda: {"topics": [{"name": "newt", "num_partitions": 1, "replication_factor": 1}]},
        [topic("newt", Op.CREATE)], 29, state=lambda e: "newt" in e.image.topics,
        changed=lambda e, before: "newt" in e.image.topics),
    Row(ApiKey.CREATE_TOPICS,
        lambda: {"topics": [{"name": "newc", "num_partitions": 1, "replication_factor": 1}]},
        [cluster(Op.CREATE)], 29, state=lambda e: "newc" in e.image.topics,
        changed=lambda e, before: "newc" in e.image.topics, name="cluster-create"),
    Row(ApiKey.DELETE_TOPICS, lambda: {"topic_names": ["gone"]}, [topic("gone", Op.DELETE)], 29,
        state=lambda e: "gone" in e.image.topics,
        changed=lambda e, before: "gone" not in e.image.topics),
    Row(ApiKey.DELETE_RECORDS,
        lambda: {"topics": [{"name": "t", "partitions": [{"partition": 0, "offset": 1}]}]},
        [topic("t", Op.DELETE)], 29, state=lambda e: e.log("t").log_start_offset,
        changed=lambda e, before: e.log("t").log_start_offset == 1),
    Row(ApiKey.CREATE_PARTITIONS,
        lambda: {"topics": [{"name": "grow", "count": 2, "assignments": None}]},
        [topic("grow", Op.ALTER)], 29, state=lambda e: len(e.image.topics["grow"].partitions),
        changed=lambda e, before: len(e.image.topics["grow"].partitions) == 2),
    Row(ApiKey.DESCRIBE_CONFIGS,
        lambda: {"resources": [{"resource_type": 2, "resource_name": "t"}]},
        [topic("t", Op.DESCRIBE_CONFIGS)], 29),
    Row(ApiKey.DESCRIBE_CONFIGS,
        lambda: {"resources": [{"resource_type": 4, "resource_name": ""}]},
        [cluster(Op.DESCRIBE_CONFIGS)], 31, name="broker"),
    Row(ApiKey.INCREMENTAL_ALTER_CONFIGS,
        lambda: {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "123456"}]}]},
        [topic("t", Op.ALTER_CONFIGS)], 29,
        state=lambda e: dict(e.image.topic_config("t")),
        changed=lambda e, before: e.image.topic_config("t").get("retention.ms") == "123456"),
    Row(ApiKey.ALTER_CONFIGS,
        lambda: {"resources": [{"resource_type": 2, "resource_name": "t", "configs": [
            {"name": "retention.bytes", "value": "777777"}]}]},
        [topic("t", Op.ALTER_CONFIGS)], 29,
        state=lambda e: dict(e.image.topic_config("t")),
        changed=lambda e, before: dict(e.image.topic_config("t")) == {"retention.bytes": "777777"}),
    Row(ApiKey.ALTER_CONFIGS,
        lambda: {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
            {"name": "follower.replication.throttled.rate", "value": "1048576"}]}]},
        [cluster(Op.ALTER_CONFIGS)], 31, name="broker",
        state=lambda e: dict(e.image.config_for(4, "1")),
        changed=lambda e, before: dict(e.image.config_for(4, "1")) == {
            "follower.replication.throttled.rate": "1048576"}),
    Row(ApiKey.INIT_PRODUCER_ID, dict, [cluster(Op.IDEMPOTENT_WRITE)], 31),
    Row(ApiKey.INIT_PRODUCER_ID, dict, [topic("t", Op.WRITE)], 31, name="write-any"),
    Row(ApiKey.INIT_PRODUCER_ID, lambda: {"transactional_id": "tx"},
        [acl(RT.TRANSACTIONAL_ID, "tx", Op.WRITE)], 53, name="transactional",
        # then: a producer id, or a coordinator error while __transaction_state is made
        allowed_check=lambda r: r["error_code"] in (0, 14, 15, 16)),
    Row(ApiKey.FIND_COORDINATOR, lambda: {"key_type": 1, "coordinator_keys": ["tx"]},
        [acl(RT.TRANSACTIONAL_ID, "tx", Op.DESCRIBE)], 53, name="transaction"),
    Row(ApiKey.ADD_PARTITIONS_TO_TXN,
        lambda: {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                 "topics": [{"name": "t", "partitions": [0]}]},
        [acl(RT.TRANSACTIONAL_ID, "tx", Op.WRITE)], 53, held=[topic("t", Op.WRITE)]),
    Row(ApiKey.ADD_PARTITIONS_TO_TXN,
        lambda: {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                 "topics": [{"name": "t", "partitions": [0]}]},
        [topic("t", Op.WRITE)], 29, held=[acl(RT.TRANSACTIONAL_ID, "tx", Op.WRITE)],
        name="topic"),
    Row(ApiKey.END_TXN,
        lambda: {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                 "committed": True},
        [acl(RT.TRANSACTIONAL_ID, "tx", Op.WRITE)], 53),
    Row(ApiKey.ADD_OFFSETS_TO_TXN,
        lambda: {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                 "group_id": "g"},
        [acl(RT.TRANSACTIONAL_ID, "tx", Op.WRITE)], 53, held=[group("g", Op.READ)]),
    Row(ApiKey.ADD_OFFSETS_TO_TXN,
        lambda: {"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0,
                 "group_id": "g"},
        [group("g", Op.READ)], 30, held=[acl(RT.TRANSACTIONAL_ID, "tx", Op.WRITE)],
        name="group"),
    Row(ApiKey.TXN_OFFSET_COMMIT, _txn_offset_commit,
        [acl(RT.TRANSACTIONAL_ID, "tx", Op.WRITE)], 53,
        held=[group("g", Op.READ), topic("t", Op.READ)]),
    Row(ApiKey.TXN_OFFSET_COMMIT, _txn_offset_commit, [group("g", Op.READ)], 30,
        held=[acl(RT.TRANSACTIONAL_ID, "tx", Op.WRITE), topic("t", Op.READ)], name="group"),
    Row(ApiKey.TXN_OFFSET_COMMIT, _txn_offset_commit, [topic("t", Op.READ)], 29,
        held=[acl(RT.TRANSACTIONAL_ID, "tx", Op.WRITE), group("g", Op.READ)], name="topic"),
    Row(ApiKey.DESCRIBE_TRANSACTIONS, lambda: {"transactional_ids": ["tx"]},
        [acl(RT.TRANSACTIONAL_ID, "tx", Op.DESCRIBE)], 53,
        # then: the id's state, or not found / loading while __transaction_state is made
        allowed_check=lambda r: r["transaction_states"][0]["error_code"] in (0, 14, 16, 105)),
    # ListTransactions leaves out the ids the principal may not describe (no error): "tx"
    # (made by the InitProducerId row) shows only with the grant
    Row(ApiKey.LIST_TRANSACTIONS, dict, [acl(RT.TRANSACTIONAL_ID, "tx", Op.DESCRIBE)], 53,
        denied_check=lambda r: "tx" not in {t["transactional_id"] for t in r["transaction_states"]},
        allowed_check=lambda r: r["error_code"] == 0),
    Row(ApiKey.OFFSET_FOR_LEADER_EPOCH,
        lambda: {"topics": [{"name": "t", "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        [topic("t", Op.DESCRIBE)], 29, name="consumer"),
    Row(ApiKey.OFFSET_FOR_LEADER_EPOCH,
        lambda: {"replica_id": 7, "topics": [
            {"name": "t", "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        [cluster(Op.CLUSTER_ACTION)], 31, name="follower"),
    Row(ApiKey.DESCRIBE_CLUSTER, dict, [cluster(Op.DESCRIBE)], 31),
    Row(ApiKey.DESCRIBE_LOG_DIRS, lambda: {"topics": None}, [cluster(Op.DESCRIBE)], 31),
    Row(ApiKey.DESCRIBE_QUORUM, dict, [cluster(Op.DESCRIBE)], 31),
    Row(ApiKey.ELECT_LEADERS,
        lambda: {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}]},
        [cluster(Op.ALTER)], 31),
    Row(ApiKey.ALTER_PARTITION_REASSIGNMENTS, lambda: {"topics": []}, [cluster(Op.ALTER)], 31),
    Row(ApiKey.LIST_PARTITION_REASSIGNMENTS, lambda: {"topics": None}, [cluster(Op.DESCRIBE)],
        31),
    Row(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, lambda: {"users": None},
        [cluster(Op.DESCRIBE)], 31),
    Row(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        lambda: {"deletions": [{"name": "carol", "mechanism": 1}]}, [cluster(Op.ALTER)], 31,
        state=lambda e: "carol" in e.image.scram_credentials,
        changed=lambda e, before: "carol" not in e.image.scram_credentials),
    Row(ApiKey.DESCRIBE_CLIENT_QUOTAS, lambda: {"components": []},
        [cluster(Op.DESCRIBE_CONFIGS)], 31),
    Row(ApiKey.ALTER_CLIENT_QUOTAS,
        lambda: {"entries": [{"entity": [{"entity_type": "user", "entity_name": "qq"}],
                              "ops": [{"key": "producer_byte_rate", "value": 1024.0}]}]},
        [cluster(Op.ALTER_CONFIGS)], 31,
        state=lambda e: dict(e.image.client_quotas),
        changed=lambda e, before: ((("user", "qq"),) in e.image.client_quotas)),
    Row(ApiKey.DESCRIBE_ACLS,
        lambda: {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
                 "permission_type": 1},
        [cluster(Op.DESCRIBE)], 31),
    Row(ApiKey.CREATE_ACLS,
        lambda: {"creations": [{"resource_type": 2, "resource_name": "z",
                                "resource_pattern_type": 3, "principal": "User:zed",
                                "host": "*", "operation": 3, "permission_type": 3}]},
        [cluster(Op.ALTER)], 31,
        state=lambda e: sorted(b.principal for b in e.image.acls.values()),
        changed=lambda e, before: any(b.principal == "User:zed" for b in e.image.acls.values())),
    Row(ApiKey.DELETE_ACLS,
        lambda: {"filters": [{"resource_type_filter": 2, "resource_name_filter": "y",
                              "pattern_type_filter": 3, "principal_filter": "User:yves",
                              "operation": 1, "permission_type": 1}]},
        [cluster(Op.ALTER)], 31,
        state=lambda e: sorted(b.principal for b in e.image.acls.values()),
        changed=lambda e, before: all(b.principal != "User:yves" for b in e.image.acls.values())),
]  # fmt: skip


def _row_id(r: Row) -> str:
    return API_SPECS[r.api].name + (f"-{r.name}" if r.name else "")


def test_every_served_api_has_a_row() -> None:
    rows = {r.api for r in ROWS}
    missing = sorted(API_SPECS[k].name for k in HANDLERS if k not in rows and k not in EXEMPT)
    assert not missing, f"served APIs without an authorization row: {missing}"
    assert {k for k in HANDLERS if ACCESS[k] == "none"} == EXEMPT


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_each_row_grants_what_its_handler_declares(row: Row) -> None:
    declared = ACCESS[row.api]
    for b in row.grants + row.held:  # the declared operation, or one implying it (READ: DESCRIBE)
        ops = {b.operation.name} | {d.name for d, by in IMPLIED_BY.items() if b.operation in by}
        assert any(o in declared for o in ops) and b.resource_type.name in declared, (
            f"{_row_id(row)} grants {b.operation.name} on {b.resource_type.name}; "
            f"the handler declares {declared!r}"
        )


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Any:
    from broker.server import BrokerServer, build_node

    tmp = tmp_path_factory.mktemp("acl-matrix")
    users = tmp / "users.txt"
    users.write_text("SCRAM-SHA-512=[name=admin,password=admin-pw-9]\n")
    cfg = broker_config(
        tmp / "data",
        **{
            "listeners": "INTERNAL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
            "sasl.scram.bootstrap.file": str(users),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "auto.create.topics.enable": "true",
            "transaction.state.log.num.partitions": "1",
        },
    )
    server = BrokerServer(cfg, node_factory=build_node)
    server.start()
    port = server.listeners.bind[1].port
    admin = Admin(
        bootstrap_servers=f"127.0.0.1:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="admin",
        sasl_password="admin-pw-9",
    )
    e = Env(server, port, admin)
    try:
        admin.create_user("alice", "alice-pw-1", mechanism="SCRAM-SHA-256")
        admin.create_user("carol", "carol-pw-1", mechanism="SCRAM-SHA-256")
        for name in ("t", "other", "gone", "grow"):
            admin.create_topic(name, 1, 1)
        wait_until(
            lambda: all(n in e.image.topics for n in ("t", "other", "gone", "grow")), 30, "topics"
        )
        admin.create_acls([AclBinding(RT.TOPIC, "y", PatternType.LITERAL, "User:yves", "*",
                                      Op.READ, AclPermissionType.ALLOW)])  # fmt: skip
        with _admin_raw(e) as raw:  # records in t, and committed offsets for the groups
            resp = raw.request(ApiKey.PRODUCE, 0, {"acks": -1, "timeout_ms": 10_000, "topics": [
                {"name": "t", "partitions": [{"partition": 0, "records": batch()}]}]})  # fmt: skip
            assert codes(resp) == {0}, resp
            for g in ("g", "gdel", "goff"):  # (FindCoordinator makes the offsets topic)
                find = {"key_type": 0, "coordinator_keys": [g]}
                wait_until(
                    lambda f=find: codes(raw.request(ApiKey.FIND_COORDINATOR, 0, f)) == {0},
                    60,
                    f"coordinator of {g}",
                )
                body = {"group_id": g, "topics": [
                    {"name": "t", "partitions": [{"partition": 0, "committed_offset": 1}]}]}  # fmt: skip
                wait_until(
                    lambda b=body: codes(raw.request(ApiKey.OFFSET_COMMIT, 0, b)) == {0},
                    60,
                    f"offsets committed for {g}",
                )
        yield e
    finally:
        admin.close()
        server.shutdown(timeout=10.0)


class _admin_raw:
    """A raw connection as the super user `admin` (SCRAM-SHA-512)."""

    def __init__(self, e: Env) -> None:
        self.raw = RawClient(("127.0.0.1", e.sasl_port))
        self.raw.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-512"})
        scram = ScramClient("SCRAM-SHA-512", "admin", "admin-pw-9")
        first = self.raw.request(ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": scram.first()})
        final = self.raw.request(ApiKey.SASL_AUTHENTICATE, 0,
                                 {"auth_bytes": scram.final(bytes(first["auth_bytes"]))})  # fmt: skip
        assert final["error_code"] == 0, final

    def __enter__(self) -> RawClient:
        return self.raw

    def __exit__(self, *exc: object) -> None:
        self.raw.close()


def _alices_acls(e: Env) -> list[AclBinding]:
    return [b for b in e.image.acls.values() if b.principal == ALICE]


def _set_grants(e: Env, grants: list[AclBinding]) -> None:
    """Exactly `grants` for alice, as the broker's image holds them."""
    e.admin.delete_acls([AclBindingFilter(principal=ALICE)])
    if grants:
        results = e.admin.create_acls(grants)
        assert all(err is None for err in results.values()), results
    wait_until(lambda: sorted(map(str, _alices_acls(e))) == sorted(map(str, grants)), 30, "acls")


@pytest.mark.parametrize("row", ROWS, ids=_row_id)
def test_refused_without_the_acl_then_served_with_it(env: Env, row: Row) -> None:
    version = API_SPECS[row.api].max_version
    _set_grants(env, row.held)
    before = row.state(env)
    denials = env.node.services.auth_log.denials
    with _alice_conn(env) as raw:
        resp = raw.request(row.api, version, row.body())
    if row.denied_check is not None:
        assert row.denied_check(resp), resp
    else:
        assert row.denied_code in codes(resp), resp
        for m in refusal_messages(resp):  # a message, where the answer has one, names who
            assert "User:alice" in m and "not authorized" in m, m
        assert env.node.services.auth_log.denials > denials  # and the denial was logged
    assert row.state(env) == before, "a refused request changed something"

    _set_grants(env, row.held + row.grants)
    with _alice_conn(env) as raw:
        resp = raw.request(row.api, version, row.body())
    assert not codes(resp) & AUTHZ_CODES, resp
    if row.allowed_check is not None:
        assert row.allowed_check(resp), resp
    if row.changed is not None:
        wait_until(lambda: row.changed(env, before), 30, f"{_row_id(row)} took effect")
    _set_grants(env, [])


class _alice_conn:
    def __init__(self, e: Env) -> None:
        self.raw = _alice(e.sasl_port)

    def __enter__(self) -> RawClient:
        return self.raw

    def __exit__(self, *exc: object) -> None:
        self.raw.close()


def test_exempt_apis_need_no_acl(env: Env) -> None:
    _set_grants(env, [])
    with _alice_conn(env) as raw:  # authenticated through SaslHandshake/SaslAuthenticate
        assert raw.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0


def test_a_deny_wins_and_a_prefixed_allow_covers(env: Env) -> None:
    deny = AclBinding(RT.TOPIC, "t", PatternType.LITERAL, "User:*", "*", Op.WRITE,
                      AclPermissionType.DENY)  # fmt: skip
    allow = AclBinding(RT.TOPIC, "t", PatternType.PREFIXED, ALICE, "*", Op.ALL,
                       AclPermissionType.ALLOW)  # fmt: skip
    try:
        _set_grants(env, [allow])
        before = env.log("t").end_offset
        body = {"acks": 1, "timeout_ms": 10_000, "topics": [
            {"name": "t", "partitions": [{"partition": 0, "records": batch()}]}]}  # fmt: skip
        with _alice_conn(env) as raw:
            assert codes(raw.request(ApiKey.PRODUCE, 0, body)) == {0}
        assert env.log("t").end_offset == before + 1
        env.admin.create_acls([deny])
        wait_until(lambda: deny in env.image.acls.values(), 30, "deny")
        with _alice_conn(env) as raw:
            assert 29 in codes(raw.request(ApiKey.PRODUCE, 0, body))
            # the DENY names WRITE: DESCRIBE (implied by the prefixed ALL) still works
            meta = raw.request(ApiKey.METADATA, 0, {"topics": [{"name": "t"}]})
            assert _listed(meta, "t"), meta
        assert env.log("t").end_offset == before + 1
    finally:
        env.admin.delete_acls([AclBindingFilter(principal="User:*")])
        _set_grants(env, [])


def test_the_gregor_client_raises_the_refusal_naming_who_and_what(env: Env) -> None:
    from client.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

    _set_grants(env, [])
    cfg = {
        "bootstrap_servers": f"127.0.0.1:{env.sasl_port}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_username": "alice",
        "sasl_password": "alice-pw-1",
    }
    with Admin(**cfg) as alice:
        with pytest.raises(ClusterAuthorizationFailedError, match="User:alice.*DESCRIBE CLUSTER"):
            alice.describe_cluster()
        with pytest.raises(ClusterAuthorizationFailedError, match="User:alice.*ALTER CLUSTER"):
            alice.create_user("mallory", "mallory-pw-1")
        with pytest.raises(ClusterAuthorizationFailedError, match="ALTER CLUSTER"):
            alice.create_acls([cluster(Op.ALL)])
        with pytest.raises(TopicAuthorizationFailedError, match="User:alice.*CREATE TOPIC 'x1'"):
            alice.create_topic("x1", 1, 1)
    assert "mallory" not in env.image.scram_credentials and "x1" not in env.image.topics


def test_produce_auto_creates_only_with_create(env: Env) -> None:
    body = {"acks": 1, "timeout_ms": 10_000, "topics": [
        {"name": "pauto", "partitions": [{"partition": 0, "records": batch()}]}]}  # fmt: skip
    _set_grants(env, [topic("pauto", Op.WRITE)])
    denials = env.node.services.auth_log.denials
    with _alice_conn(env) as raw:
        assert codes(raw.request(ApiKey.PRODUCE, 0, body)) == {3}  # UNKNOWN_TOPIC_OR_PARTITION
    assert env.node.services.auth_log.denials == denials + 1  # CREATE on pauto was refused
    assert "pauto" not in env.image.topics
    _set_grants(env, [topic("pauto", Op.WRITE), topic("pauto", Op.CREATE)])
    with _alice_conn(env) as raw:
        raw.request(ApiKey.PRODUCE, 0, body)
    wait_until(lambda: "pauto" in env.image.topics, 30, "pauto auto-created")
    _set_grants(env, [])


def test_the_kafka_only_apis_are_the_checked_ones() -> None:
    """The KAFKA listener serves the native handlers through its translations (so the rows
    above hold there too: tests/compat/test_kafka_acls.py), plus these, which check READ
    (JoinGroup, Heartbeat, LeaveGroup, SyncGroup) or DESCRIBE (DescribeGroups) on the group
    themselves (broker/kafka/apis_classic.py, apis_group_admin.py). A new one fails here
    until its authorization is written."""
    from broker.kafka.apis import APIS

    assert {k for k in APIS if k not in HANDLERS} == {11, 12, 13, 14, 15}


def test_without_an_authorizer_the_acl_apis_say_security_disabled(broker_factory) -> None:
    from client.errors import SecurityDisabledError

    b = broker_factory()
    with Admin(bootstrap_servers=b.bootstrap) as admin:
        with pytest.raises(SecurityDisabledError, match="authorizer.class.name"):
            admin.describe_acls()
        with pytest.raises(SecurityDisabledError):
            admin.create_acls([cluster(Op.ALL)])
        admin.create_topic("open", 1, 1)  # and everything else is served to everyone
    assert not b.server.node.publisher.image.acls
