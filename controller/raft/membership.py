"""The Raft group's membership: who votes (voters) and who only receives the log (learners),
each with the endpoint ("host:port", opaque to the core) other members reach it at.

Membership changes follow Raft's single-server rule (Ongaro's dissertation §4.1, as KIP-853 does
for KRaft): a configuration entry (`EntryKind.CONFIG`, data = `Membership.encode()`) differs from
the one before it by ONE member added, removed, promoted or demoted, so any majority of the old
voters and any majority of the new one intersect. A node uses the latest configuration in its log,
committed or not; a truncated configuration entry takes its predecessor back. The leader appends a
change only when the previous one is committed and it has committed an entry of its own term
(the fix of the 2015 raft-dev bug). A new server joins as a learner, catches up, and only then is
promoted to voter (§4.2.1).

Encoding: UTF-8 JSON, `{"voters": {"1": "h:1", ...}, "learners": {...}}` with sorted keys, so a
given membership always encodes to the same bytes. Pure data; any thread.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class MembershipError(ValueError):
    """A membership change the single-server rule (or plain sense) does not allow."""


def _members(raw: Any, what: str) -> dict[int, str]:
    if not isinstance(raw, dict):
        raise ValueError(f"membership {what} must be a map")
    out: dict[int, str] = {}
    for k, v in raw.items():
        if not isinstance(v, str):
            raise ValueError(f"membership {what}: endpoint of {k!r} is not a string")
        out[int(k)] = v
    return out


@dataclass(frozen=True, slots=True)
class Membership:
    voters: Mapping[int, str] = field(default_factory=dict)
    learners: Mapping[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        both = set(self.voters) & set(self.learners)
        if both:
            raise MembershipError(f"nodes {sorted(both)} are both voter and learner")

    @classmethod
    def of(cls, voters: Iterable[int], endpoints: Mapping[int, str] | None = None) -> Membership:
        eps = endpoints or {}
        return cls({v: eps.get(v, "") for v in voters}, {})

    @property
    def voter_ids(self) -> frozenset[int]:
        return frozenset(self.voters)

    @property
    def learner_ids(self) -> frozenset[int]:
        return frozenset(self.learners)

    def endpoint(self, node_id: int) -> str | None:
        if node_id in self.voters:
            return self.voters[node_id]
        return self.learners.get(node_id)

    def encode(self) -> bytes:
        d = {
            "voters": {str(k): v for k, v in sorted(self.voters.items())},
            "learners": {str(k): v for k, v in sorted(self.learners.items())},
        }
        return json.dumps(d, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Membership:
        try:
            d = json.loads(bytes(data).decode())
            if not isinstance(d, dict):
                raise ValueError("not a map")
            return cls(
                _members(d.get("voters", {}), "voters"), _members(d.get("learners", {}), "learners")
            )
        except (UnicodeDecodeError, ValueError, TypeError) as e:
            raise ValueError(f"malformed membership record {bytes(data)[:100]!r}: {e}") from e

    # -- the single-server changes --------------------------------------------------------------
    def add_learner(self, node_id: int, endpoint: str) -> Membership:
        if node_id in self.voters or node_id in self.learners:
            raise MembershipError(f"node {node_id} is already a member")
        return Membership(dict(self.voters), {**self.learners, node_id: endpoint})

    def promote(self, node_id: int) -> Membership:
        if node_id not in self.learners:
            raise MembershipError(f"node {node_id} is not a learner")
        learners = dict(self.learners)
        ep = learners.pop(node_id)
        return Membership({**self.voters, node_id: ep}, learners)

    def demote(self, node_id: int) -> Membership:
        if node_id not in self.voters:
            raise MembershipError(f"node {node_id} is not a voter")
        if len(self.voters) == 1:
            raise MembershipError(f"node {node_id} is the only voter")
        voters = dict(self.voters)
        ep = voters.pop(node_id)
        return Membership(voters, {**self.learners, node_id: ep})

    def remove_learner(self, node_id: int) -> Membership:
        if node_id not in self.learners:
            raise MembershipError(f"node {node_id} is not a learner")
        learners = dict(self.learners)
        del learners[node_id]
        return Membership(dict(self.voters), learners)


def check_single_change(old: Membership, new: Membership) -> None:
    """Raise MembershipError unless `new`'s voters differ from `old`'s by at most one node (the
    rule that keeps every old majority and every new majority overlapping)."""
    changed = old.voter_ids ^ new.voter_ids
    if len(changed) > 1:
        raise MembershipError(
            f"voters {sorted(old.voter_ids)} -> {sorted(new.voter_ids)} change {len(changed)}"
            " servers at once; Raft allows one at a time"
        )
    if not new.voters:
        raise MembershipError("a configuration needs at least one voter")
