"""CreateTopics and CreatePartitions past what one request may write: one request's records
are one atomic batch under the Raft log's uncommitted cap (decision 42)."""

from __future__ import annotations

from test_controller import E, env, topic, up  # noqa: F401  (env is a fixture)


def test_a_request_past_the_record_limit_is_a_policy_violation(env):  # noqa: F811
    """One request's records are one atomic batch under Raft's uncommitted cap: a request that
    would pass MAX_RECORDS_PER_USER_OP is refused as POLICY_VIOLATION, naming the limit (it
    failed as NOT_CONTROLLER from the Raft cap, which a client retries for ever)."""
    from controller.quorum.state import MAX_RECORDS_PER_USER_OP as MAX

    c, _, _ = env
    up(c, 1)
    assert (
        c.replication.create_topics([topic("a", MAX - 1, 1)])[0]["error_code"] == 0
    )  # MAX records
    half = MAX // 2
    b, c2 = c.replication.create_topics([topic("b", half, 1), topic("c", half, 1)])
    assert b["error_code"] == 0 and c2["error_code"] == E.POLICY_VIOLATION
    assert f"more than the {MAX}" in c2["error_message"] and "split" in c2["error_message"]
    assert "b" in c.image.topics and "c" not in c.image.topics
    [d] = c.replication.create_topics([topic("d", MAX, 1)])
    assert d["error_code"] == E.INVALID_PARTITIONS and "CreatePartitions" in d["error_message"]
    res = c.replication.create_partitions(
        [{"name": "b", "count": 2 * half, "assignments": None},
         {"name": "a", "count": MAX + half, "assignments": None}]
    )  # fmt: skip
    assert [r["error_code"] for r in res] == [0, E.POLICY_VIOLATION]
    assert len(c.image.topics["b"].partitions) == 2 * half
    assert len(c.image.topics["a"].partitions) == MAX - 1
