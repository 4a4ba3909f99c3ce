"""The authorizer's rules (broker/security/authorizer.py), Kafka's StandardAuthorizer: DENY
wins, LITERAL / `*` / PREFIXED patterns, wildcard principal and host, implied operations,
super users, allow.everyone.if.no.acl.found, and InitProducerId's "WRITE on any topic"."""

from __future__ import annotations

import random

import pytest

from broker.security.authorizer import AclIndex, Authorizer, parse_super_users
from client.security.acl import (
    AclBinding,
    AclBindingFilter,
    validate_binding,
)
from client.security.acl import (
    AclOperation as Op,
)
from client.security.acl import (
    AclPermissionType as Perm,
)
from client.security.acl import (
    PatternType as Pat,
)
from client.security.acl import (
    ResourceType as RT,
)

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(
    name: str,
    op: Op,
    perm: Perm = Perm.ALLOW,
    principal: str = ALICE,
    host: str = "*",
    rtype: RT = RT.TOPIC,
    pattern: Pat = Pat.LITERAL,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authz(*bindings: AclBinding, supers: str = "", open_if_none: bool = False) -> Authorizer:
    acls = {i.to_bytes(16, "big"): b for i, b in enumerate(bindings)}
    return Authorizer(parse_super_users(supers), open_if_none, lambda: acls)


def ok(a: Authorizer, op: Op, name: str, principal: str = ALICE, rtype: RT = RT.TOPIC) -> bool:
    return a.authorize(principal, HOST, op, rtype, name)


def test_allow_literal_and_nothing_else():
    a = authz(acl("orders", Op.READ))
    assert ok(a, Op.READ, "orders")
    assert not ok(a, Op.WRITE, "orders")
    assert not ok(a, Op.READ, "orders2")
    assert not ok(a, Op.READ, "orders", principal=BOB)
    assert not ok(a, Op.READ, "orders", rtype=RT.GROUP)


def test_deny_wins_over_allow_whatever_the_pattern():
    a = authz(
        acl("*", Op.ALL),
        acl("pay", Op.WRITE, Perm.DENY, pattern=Pat.PREFIXED),
    )
    assert ok(a, Op.WRITE, "orders")
    assert not ok(a, Op.WRITE, "payments")
    assert ok(a, Op.READ, "payments")  # the DENY names WRITE only
    b = authz(acl("orders", Op.READ), acl("orders", Op.ALL, Perm.DENY, principal="User:*"))
    assert not ok(b, Op.READ, "orders")


def test_deny_of_read_does_not_deny_describe():
    a = authz(acl("t", Op.DESCRIBE), acl("t", Op.READ, Perm.DENY))
    assert ok(a, Op.DESCRIBE, "t")
    assert not ok(a, Op.READ, "t")


def test_prefixed_and_wildcard_names():
    a = authz(acl("logs-", Op.WRITE, pattern=Pat.PREFIXED), acl("*", Op.READ))
    assert ok(a, Op.WRITE, "logs-a")
    assert ok(a, Op.WRITE, "logs-")
    assert not ok(a, Op.WRITE, "logs")
    assert not ok(a, Op.WRITE, "other")
    assert ok(a, Op.READ, "anything")


def test_wildcard_principal_and_host():
    a = authz(acl("t", Op.READ, principal="User:*"), acl("t", Op.WRITE, host="10.0.0.2"))
    assert ok(a, Op.READ, "t", principal=BOB)
    assert not ok(a, Op.WRITE, "t")  # from 10.0.0.1
    assert a.authorize(ALICE, "10.0.0.2", Op.WRITE, RT.TOPIC, "t")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_describe_is_implied(granted):
    a = authz(acl("t", granted))
    assert ok(a, Op.DESCRIBE, "t")


def test_describe_configs_implied_by_alter_configs_only():
    assert ok(authz(acl("t", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS, "t")
    assert not ok(authz(acl("t", Op.ALTER)), Op.DESCRIBE_CONFIGS, "t")
    assert not ok(authz(acl("t", Op.CREATE)), Op.DESCRIBE, "t")
    assert not ok(authz(acl("t", Op.DESCRIBE)), Op.READ, "t")


def test_all_allows_every_operation():
    a = authz(acl("g", Op.ALL, rtype=RT.GROUP))
    for op in (Op.READ, Op.DELETE, Op.DESCRIBE):
        assert ok(a, op, "g", rtype=RT.GROUP)


def test_super_users_pass_even_a_deny():
    a = authz(acl("t", Op.ALL, Perm.DENY, principal="User:*"), supers="User:admin; User:CN=b1")
    assert ok(a, Op.WRITE, "t", principal="User:admin")
    assert ok(a, Op.CLUSTER_ACTION, "kafka-cluster", principal="User:CN=b1", rtype=RT.CLUSTER)
    assert not ok(a, Op.WRITE, "t")


def test_allow_everyone_if_no_acl_found():
    closed = authz(acl("other", Op.READ))
    opened = authz(acl("other", Op.READ), open_if_none=True)
    assert not ok(closed, Op.READ, "t")
    assert ok(opened, Op.READ, "t", principal=BOB)
    assert not ok(opened, Op.READ, "other", principal=BOB)  # an ACL names it: closed


def test_authorize_any_for_init_producer_id():
    a = authz(acl("out-", Op.WRITE, pattern=Pat.PREFIXED))
    assert a.authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not a.authorize_any(BOB, HOST, Op.WRITE, RT.TOPIC)
    b = authz(acl("x", Op.WRITE), acl("*", Op.WRITE, Perm.DENY))
    assert not b.authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)


def test_index_rebuilt_only_when_the_acls_change():
    acls = {b"\0" * 16: acl("t", Op.READ)}
    a = Authorizer([], False, lambda: acls)
    first = a.index()
    assert a.index() is first
    acls = {**acls, b"\1" * 16: acl("u", Op.READ)}
    assert a.index() is not first and ok(a, Op.READ, "u")


def test_index_matches_a_naive_scan():
    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    names = ["a", "ab", "abc", "b", "*", "ba"]
    bindings = [
        acl(
            rng.choice(names),
            rng.choice([Op.READ, Op.WRITE, Op.ALL]),
            rng.choice([Perm.ALLOW, Perm.DENY]),
            pattern=rng.choice([Pat.LITERAL, Pat.PREFIXED]),
        )
        for _ in range(30)
    ]
    bindings = [b for b in bindings if validate_binding(b) is None]
    index = AclIndex(bindings)
    for name in ["a", "ab", "abc", "abcd", "b", "bab", "c"]:
        want = [b for b in bindings if AclBindingFilter(RT.TOPIC, name, Pat.MATCH).matches(b)]
        assert sorted(map(str, index.on_resource(RT.TOPIC, name))) == sorted(map(str, want))


def test_validation_refuses_nonsense():
    assert validate_binding(acl("g", Op.WRITE, rtype=RT.GROUP)) is not None
    assert validate_binding(acl("x", Op.ALTER, rtype=RT.CLUSTER)) is not None
    assert validate_binding(acl("kafka-cluster", Op.ALTER, rtype=RT.CLUSTER)) is None
    assert validate_binding(acl("t", Op.READ, principal="alice")) is not None
    assert validate_binding(acl("*", Op.READ, pattern=Pat.PREFIXED)) is not None
    assert validate_binding(acl("", Op.READ)) is not None
