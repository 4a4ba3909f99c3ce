"""How the coordinator's groups look on the wire (ConsumerGroupDescribe, heartbeats). Pure."""

from __future__ import annotations

from broker.group.assignors import TP
from broker.group.state import ConsumerGroup
from client.protocol.body import Body


def nested(tps: frozenset[TP]) -> list[Body]:
    """{(topic, partition)} -> [{"topic": t, "partitions": [...]}], sorted."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]


def describe_body(group_id: str, g: ConsumerGroup | None) -> Body:
    """One DescribedGroup; `g` None: a group known only by its committed offsets."""
    if g is None:
        return {"error_code": 0, "group_id": group_id, "group_state": "empty",
                "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                "members": []}  # fmt: skip
    members = [
        {
            "member_id": m.member_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed),
            "subscribed_topic_regex": m.regex,
            "assignment": nested(m.assigned),
            "target_assignment": nested(g.target.get(m.member_id, frozenset())),
        }
        for m in g.members.values()
    ]
    return {
        "error_code": 0,
        "group_id": group_id,
        "group_state": g.state,
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "assignor_name": g.assignor,
        "members": members,
    }
