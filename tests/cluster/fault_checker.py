"""The fault harness's checker (CHECKER.md, "Checks"): a pure function of the history
(fault_history.py), the final read of every partition and the nodes' events. It returns every
anomaly it finds, by check, and the figures of the run; `valid` is True when there are none.

    report = check(history, final_read={partition: [(offset, value), ...]}, events=[...])

- C1 lost: an acknowledged value is not in the final read at the offset its ack gave.
- C2 duplicated: a value stored more than once in its partition (idempotence is on).
- C3 inconsistent: two values for one (partition, offset) across acks, polls and the final read;
  reordered: a producer's values out of `seq` order within a partition.
- C4 gaps: the final read is not contiguous; a reader skipped an offset or went back.
- C6 leaders: two nodes leading one (partition, leader epoch) or one Raft term; a node's epochs
  or terms going back. Events: {"type": "leader", "node", "partition", "epoch"} and
  {"type": "raft_leader", "node", "term"}.
- C8 aborted reads: a value whose write definitely failed was read.
- C9 phantom reads: a polled value is not in the final read at the offset it was polled at.

C5 (committed offsets) waits for consumer groups, C7 (recovery) is checked by the harness
itself after heal.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from typing import Any

CHECKS = (
    "lost",
    "duplicated",
    "inconsistent",
    "reordered",
    "gaps",
    "reader_skips",
    "leader_conflicts",
    "aborted_reads",
    "phantom_reads",
)


def _seq(value: str) -> tuple[str, int] | None:
    producer, sep, seq = value.rpartition("-")
    return (producer, int(seq)) if sep and seq.isdigit() else None


def check(
    history: Iterable[Mapping[str, Any]],
    final_read: Mapping[int, list[tuple[int, str]]],
    events: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    history = list(history)
    found: dict[str, list[Any]] = {name: [] for name in CHECKS}
    final_at: dict[tuple[int, int], str] = {}
    final_count: collections.Counter[tuple[int, str]] = collections.Counter()
    for p, records in final_read.items():
        for off, value in records:
            final_at[(p, off)] = value
            final_count[(p, value)] += 1
    sends = [e for e in history if e.get("f") == "send" and e["type"] != "invoke"]
    acked = [e for e in sends if e["type"] == "ok"]
    failed = {(e["partition"], e["value"]) for e in sends if e["type"] == "fail"}
    polls = [e for e in history if e.get("f") == "poll" and e["type"] == "ok"]

    # C1 lost
    for e in acked:
        if final_at.get((e["partition"], e["offset"])) != e["value"]:
            found["lost"].append(
                {
                    "value": e["value"],
                    "partition": e["partition"],
                    "offset": e["offset"],
                    "found": final_at.get((e["partition"], e["offset"])),
                }  # fmt: skip
            )
    # C2 duplicated
    found["duplicated"] = sorted(f"{p}:{v}" for (p, v), n in final_count.items() if n > 1)
    # C3 one value per (partition, offset); each producer's seq increasing per partition
    seen: dict[tuple[int, int], set[str]] = collections.defaultdict(set)
    for (p, off), value in final_at.items():
        seen[(p, off)].add(value)
    for e in [*acked, *polls]:
        seen[(e["partition"], e["offset"])].add(e["value"])
    found["inconsistent"] = [
        {"partition": p, "offset": off, "values": sorted(vs)}
        for (p, off), vs in sorted(seen.items())
        if len(vs) > 1
    ]
    for p, records in final_read.items():
        last: dict[str, tuple[int, int]] = {}
        for off, value in sorted(records):
            s = _seq(value)
            if s is None:
                continue
            producer, n = s
            if producer in last and n <= last[producer][1]:
                found["reordered"].append(
                    {
                        "partition": p,
                        "offset": off,
                        "value": value,
                        "after_offset": last[producer][0],
                    }
                )
            last[producer] = (off, n)
    # C4 gaps in the final read; readers never skip or go back
    for p, records in final_read.items():
        offsets = sorted(off for off, _v in records)
        for a, b in zip(offsets, offsets[1:], strict=False):
            if b != a + 1:
                found["gaps"].append({"partition": p, "after": a, "next": b})
    position: dict[tuple[str, int], int] = {}
    for e in polls:
        key = (e["process"], e["partition"])
        if key in position and e["offset"] != position[key] + 1:
            found["reader_skips"].append(
                {
                    "process": e["process"],
                    "partition": e["partition"],
                    "after": position[key],
                    "next": e["offset"],
                }  # fmt: skip
            )
        position[key] = e["offset"]
    # C6 one leader per (partition, epoch) and per Raft term; monotonic per node
    leaders: dict[tuple[Any, ...], set[Any]] = collections.defaultdict(set)
    latest: dict[tuple[Any, ...], int] = {}
    for ev in events:
        if ev.get("type") == "leader":
            scope, n = ("partition", ev["partition"]), ev["epoch"]
        elif ev.get("type") == "raft_leader":
            scope, n = ("raft",), ev["term"]
        else:
            continue
        leaders[(*scope, n)].add(ev["node"])
        node_key = (*scope, ev["node"])
        if node_key in latest and n < latest[node_key]:
            found["leader_conflicts"].append(
                {
                    "node": ev["node"],
                    "scope": list(scope),
                    "went_back_to": n,
                    "from": latest[node_key],
                }
            )
        latest[node_key] = max(n, latest.get(node_key, n))
    for key, nodes in leaders.items():
        if len(nodes) > 1:
            found["leader_conflicts"].append({"scope": list(key[:-1]), "epoch": key[-1],
                                              "nodes": sorted(nodes)})  # fmt: skip
    # C8 aborted reads
    read_values = {(e["partition"], e["value"]) for e in polls} | set(final_count)
    found["aborted_reads"] = sorted(f"{p}:{v}" for p, v in failed & read_values)
    # C9 phantom reads
    for e in polls:
        if final_at.get((e["partition"], e["offset"])) != e["value"]:
            found["phantom_reads"].append(
                {"value": e["value"], "partition": e["partition"], "offset": e["offset"]}
            )
    counts = collections.Counter(e["type"] for e in sends)
    return {
        "valid": not any(found.values()),
        "writes": {"ok": counts["ok"], "fail": counts["fail"], "info": counts["info"]},
        "reads": len(polls),
        **{name: len(items) for name, items in found.items()},
        "anomalies": {name: items[:20] for name, items in found.items() if items},
    }
