"""Controller quorum membership APIs (KIP-853's names and keys): AddRaftVoter (80) and
RemoveRaftVoter (81), sent to the active controller (any controller answers NOT_CONTROLLER with
the leader hint otherwise).

AddRaftVoter replicates the log to the new controller as a learner (a non-voting member), waits
until it has caught up, then makes it a voter; RemoveRaftVoter demotes a voter to learner and then
drops it from the membership. Each step is one Raft membership entry changing one server
(controller/raft/membership.py). Both answer once the change is committed, or REQUEST_TIMED_OUT
after `timeout_ms` (the change may still complete: the call is safe to repeat).
"""

from __future__ import annotations

from client.protocol.api_keys import ApiKey
from client.protocol.schema import (
    INT16,
    INT32,
    STRING,
    ApiSpec,
    Field,
    Nullable,
    Struct,
    register,
)

_RESPONSE = Struct(
    Field("error_code", INT16),
    Field("error_message", Nullable(STRING), default=None),
    Field("leader_id", INT32, default=-1, doc="on NOT_CONTROLLER: the leader, -1 unknown"),
    Field("leader_endpoint", Nullable(STRING), default=None, doc="on NOT_CONTROLLER"),
)

ADD_RAFT_VOTER = register(
    ApiSpec(
        key=ApiKey.ADD_RAFT_VOTER,
        name="AddRaftVoter",
        doc="Add a controller to the voters: it joins as a learner, catches up, then votes.",
        request=Struct(
            Field("voter_id", INT32, doc="the new controller's node.id"),
            Field("endpoint", STRING, doc="HOST:PORT the new controller listens on"),
            Field("timeout_ms", INT32, default=60_000),
        ),
        response=_RESPONSE,
    )
)

REMOVE_RAFT_VOTER = register(
    ApiSpec(
        key=ApiKey.REMOVE_RAFT_VOTER,
        name="RemoveRaftVoter",
        doc="Remove a controller from the voters (and then from the membership).",
        request=Struct(
            Field("voter_id", INT32),
            Field("timeout_ms", INT32, default=60_000),
        ),
        response=_RESPONSE,
    )
)
