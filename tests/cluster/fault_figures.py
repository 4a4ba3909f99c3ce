"""The timing figures of a fault run (CHECKER.md, "Figures per scenario"), from the history alone:

- longest write unavailability per partition: the longest time between two acknowledgements of
  writes to it, from the first acknowledgement to the last;
- failover time per fault: from the fault's start to the first acknowledgement of a write
  invoked after it;
- recovery time: from the last fault's revert (the heal) to the first acknowledgement of a
  write invoked after it.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping
from typing import Any


def timing(history: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    history = list(history)
    invoked = {e["op"]: e["time"] for e in history if e["type"] == "invoke"}
    acks = sorted(
        (e["time"], invoked.get(e["op"], e["time"]), e["partition"])
        for e in history
        if e["type"] == "ok" and e.get("f") == "send"
    )
    by_partition: dict[int, list[float]] = {}
    for t, _inv, p in acks:
        by_partition.setdefault(p, []).append(t)
    unavailable = {
        p: round(max((b - a for a, b in itertools.pairwise(ts)), default=0.0), 3)
        for p, ts in sorted(by_partition.items())
    }
    nemesis = [e for e in history if e["type"] == "nemesis"]
    failovers = []
    for e in nemesis:
        if e["f"] == "start":
            first = _first_ack_invoked_after(acks, e["time"])
            failovers.append(
                {"fault": e["fault"], "s": None if first is None else round(first - e["time"], 3)}
            )
    stops = [e["time"] for e in nemesis if e["f"] == "stop"]
    recovery = None
    if stops:
        first = _first_ack_invoked_after(acks, stops[-1])
        recovery = None if first is None else round(first - stops[-1], 3)
    known = [f["s"] for f in failovers if f["s"] is not None]
    return {
        "write_unavailable_s": unavailable,
        "longest_write_unavailable_s": max(unavailable.values(), default=0.0),
        "failover_s": failovers,
        "longest_failover_s": max(known, default=None),
        "recovery_s": recovery,
    }


def _first_ack_invoked_after(acks: list[tuple[float, float, int]], t: float) -> float | None:
    """The earliest ack time among writes invoked at or after t (acks sorted by ack time)."""
    i = bisect.bisect_left(acks, (t,))  # an ack before t cannot be of a write invoked after t
    for ack_t, inv_t, _p in acks[i:]:
        if inv_t >= t:
            return ack_t
    return None
