"""The fault harness's checker (CHECKER.md, "Checks"): a pure function of the history
(fault_history.py), the final read of every partition and the nodes' events. It returns every
anomaly it finds, by check, and the figures of the run; `valid` is True when there are none.

    report = check(history, final_read={partition: [(offset, value), ...]}, events=[...])

- C1 lost: an acknowledged value is not in the final read at the offset its ack gave (an ack
  without an offset, "offset": null: not in the final read of its partition at all; librdkafka's
  idempotent producer acknowledges a batch whose own response was lost once a later batch of
  the same partition is acknowledged, without learning its offset).
- C2 duplicated: a value stored more than once in its partition (idempotence is on).
- C3 inconsistent: two values for one (partition, offset) across acks, polls and the final read;
  reordered: a producer's values out of `seq` order within a partition.
- C4 gaps: the final read is not contiguous; a reader skipped an offset or went back.
- C6 leaders: two nodes leading one (partition, leader epoch) or one Raft term; a node's epochs
  or terms going back. Events: {"type": "leader", "node", "partition", "epoch"} and
  {"type": "raft_leader", "node", "term"}.
- C8 aborted reads: a value whose write definitely failed was read.
- C9 phantom reads: a polled value is not in the final read at the offset it was polled at.

- C5 committed offsets: a partition's acknowledged commit below one acknowledged before it
  was sent or below an earlier one of the same member (two members' concurrent commits are not
  ordered by their acknowledgements), or passing what had been read of it when sent (the HW); C4 for groups: a member taking a partition over starting after
  the last committed offset (records skipped). Input: "gpoll", "commit" and "event" entries.

- Stalls (issue 22): a partition that took no acknowledged write for more than STALL_S while
  writes to it were outstanding and every ISR sample of that time (type "isr", at most
  SAMPLE_GAP_S apart) showed a leader and an ISR of at least min ISR: the cluster said it could
  take writes and it did not. Times without samples (a fault that hides the metadata) are no
  evidence either way and are never flagged.

C7 (recovery) is checked by the harness itself after heal.
"""

from __future__ import annotations

import bisect
import collections
import itertools
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
    "commit_regress",
    "commit_past_hw",
    "group_skips",
    "stalls",
)
STALL_S = 10.0  # longest tolerated time without a write while the ISR satisfies min ISR
SAMPLE_GAP_S = 2.0  # ISR samples further apart than this are not evidence of the time between


def _seq(value: str) -> tuple[str, int] | None:
    producer, sep, seq = value.rpartition("-")
    return (producer, int(seq)) if sep and seq.isdigit() else None


def check(
    history: Iterable[Mapping[str, Any]],
    final_read: Mapping[int, list[tuple[int, str]]],
    events: Iterable[Mapping[str, Any]] = (),
    min_isr: int = 2,
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
    reads = polls + [e for e in history if e.get("f") == "gpoll"]  # the reader's and the group's

    # C1 lost
    for e in acked:
        if e["offset"] is None:
            if not final_count[(e["partition"], e["value"])]:
                found["lost"].append(
                    {"value": e["value"], "partition": e["partition"], "offset": None}
                )
            continue
        if final_at.get((e["partition"], e["offset"])) != e["value"]:
            found["lost"].append(
                {
                    "value": e["value"],
                    "partition": e["partition"],
                    "offset": e["offset"],
                    "found": final_at.get((e["partition"], e["offset"])),
                }
            )
    # C2 duplicated
    found["duplicated"] = sorted(f"{p}:{v}" for (p, v), n in final_count.items() if n > 1)
    # C3 one value per (partition, offset); each producer's seq increasing per partition
    seen: dict[tuple[int, int], set[str]] = collections.defaultdict(set)
    for (p, off), value in final_at.items():
        seen[(p, off)].add(value)
    for e in [*acked, *reads]:
        if e["offset"] is not None:
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
        for a, b in itertools.pairwise(offsets):
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
                }
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
    read_values = {(e["partition"], e["value"]) for e in reads} | set(final_count)
    found["aborted_reads"] = sorted(f"{p}:{v}" for p, v in failed & read_values)
    # C5 committed offsets; C4 for group members taking a partition over
    found.update(_group_checks(history, final_read, reads))
    # C9 phantom reads
    for e in reads:
        if final_at.get((e["partition"], e["offset"])) != e["value"]:
            found["phantom_reads"].append(
                {"value": e["value"], "partition": e["partition"], "offset": e["offset"]}
            )
    found["stalls"] = stalls(history, min_isr)
    counts = collections.Counter(e["type"] for e in sends)
    return {
        "valid": not any(found.values()),
        "writes": {"ok": counts["ok"], "fail": counts["fail"], "info": counts["info"]},
        "reads": len(reads),
        "commits": sum(1 for e in history if e.get("f") == "commit" and e["type"] == "ok"),
        **{name: len(items) for name, items in found.items()},
        "anomalies": {name: items[:20] for name, items in found.items() if items},
    }


def _group_checks(
    history: list[Mapping[str, Any]],
    final_read: Mapping[int, list[tuple[int, str]]],
    reads: list[Mapping[str, Any]],
) -> dict[str, list[Any]]:
    """C5: acknowledged commits of a partition never go back (a commit is below none that was
    acknowledged before it was sent, nor below an earlier one of its own member) and never pass what had been read of it when the commit was sent (nor the
    final high watermark). C4 for groups: a member that takes a partition over starts reading at
    or before the highest offset committed before its first read (acknowledged, or of unknown
    outcome: it may be stored), the log start if none."""
    found: dict[str, list[Any]] = {"commit_regress": [], "commit_past_hw": [], "group_skips": []}
    invoked = {e["op"]: e["time"] for e in history if e["type"] == "invoke"}
    commits = sorted(
        (e for e in history if e.get("f") == "commit" and e["type"] == "ok"),
        key=lambda e: e["time"],
    )
    read_at: dict[int, list[tuple[float, int]]] = collections.defaultdict(list)
    for e in sorted(reads, key=lambda e: e.get("time", 0.0)):
        read_at[e["partition"]].append((e.get("time", 0.0), e["offset"]))
    highest: dict[int, list[int]] = {}  # running maximum of offsets read, per partition
    for p, xs in read_at.items():
        run, out = -1, []
        for _t, off in xs:
            run = max(run, off)
            out.append(run)
        highest[p] = out
    end = {p: (max(o for o, _v in recs) + 1 if recs else 0) for p, recs in final_read.items()}
    acked: dict[int, tuple[list[float], list[int]]] = {}  # ack times, running max of offsets
    own: dict[tuple[str, int], int] = {}  # (member, partition): its highest acked commit
    for e in commits:
        p, off = e["partition"], e["offset"]
        t = invoked.get(e["op"], e["time"])
        times, highs = acked.setdefault(p, ([], []))
        # ordered before this commit: the commits acknowledged before it was sent, and the
        # member's own earlier ones (two members' concurrent commits are stored in an order
        # their acknowledgements need not show: under packet loss a commit validated before
        # its member was fenced was acknowledged after the next owner's)
        j = bisect.bisect_left(times, t)
        before = max(highs[j - 1] if j else -1, own.get((e["process"], p), -1))
        if off < before:
            found["commit_regress"].append({"partition": p, "offset": off, "after": before})
        times.append(e["time"])
        highs.append(max(off, highs[-1]) if highs else off)
        own[(e["process"], p)] = max(off, own.get((e["process"], p), off))
        i = bisect.bisect_right([x[0] for x in read_at.get(p, [])], t)
        read_below = highest[p][i - 1] + 1 if i else 0
        if off > read_below or off > end.get(p, 0):
            found["commit_past_hw"].append({"partition": p, "offset": off, "read_to": read_below,
                                            "final_end": end.get(p, 0)})  # fmt: skip
    start = {p: (min(o for o, _v in recs) if recs else 0) for p, recs in final_read.items()}
    maybe = [e for e in history if e.get("f") == "commit" and e["type"] in ("ok", "info")]
    owned: set[tuple[str, int]] = set()
    fresh: set[tuple[str, int]] = set()
    timeline = [e for e in history if e["type"] == "event" or e.get("f") == "gpoll"]
    for e in sorted(timeline, key=lambda e: e["time"]):
        if e["type"] == "event":
            keys = {(e["process"], p) for p in e["partitions"]}
            if e["f"] == "assign":
                fresh |= keys - owned
                owned |= keys
            else:  # revoke, lost
                owned -= keys
                fresh -= keys
            continue
        key = (e["process"], e["partition"])
        if key not in fresh:
            continue
        fresh.discard(key)
        # commits acknowledged before this read, and those of unknown outcome sent before it
        # (they may have been stored): the highest the member may have been told to start at
        done = [c["offset"] for c in maybe if c["partition"] == e["partition"]
                and invoked.get(c["op"], c["time"]) <= e["time"]]  # fmt: skip
        committed = max(done) if done else start.get(e["partition"], 0)
        if e["offset"] > committed:
            found["group_skips"].append({"process": e["process"], "partition": e["partition"],
                                         "first_read": e["offset"], "committed": committed})  # fmt: skip
    return found


def stalls(
    history: list[Mapping[str, Any]], min_isr: int, limit_s: float = STALL_S
) -> list[dict[str, Any]]:
    """Partitions that took no acknowledged write for more than `limit_s` while writes to them
    were outstanding and the sampled ISR satisfied `min_isr` throughout (module docstring)."""
    acks: dict[int, list[float]] = collections.defaultdict(list)
    invoked: dict[int, float] = {}
    done: dict[int, float] = {}
    for e in history:
        if e.get("f") != "send":
            continue
        if e["type"] == "invoke":
            invoked[e["op"]] = e["time"]
        else:
            done[e["op"]] = e["time"]
            if e["type"] == "ok":
                acks[e["partition"]].append(e["time"])
    sends: dict[int, list[tuple[float, float]]] = collections.defaultdict(list)
    for e in history:
        if e.get("f") == "send" and e["type"] == "invoke":
            sends[e["partition"]].append((e["time"], done.get(e["op"], float("inf"))))
    samples: dict[int, list[tuple[float, bool, list[int]]]] = collections.defaultdict(list)
    for e in history:
        if e["type"] == "isr":
            for p, (leader, isr) in e["partitions"].items():
                healthy = leader >= 0 and len(isr) >= min_isr
                samples[int(p)].append((e["time"], healthy, isr))
    out = []
    for p, ts in acks.items():
        ts.sort()
        runs = _healthy_runs(sorted(samples.get(p, [])))
        for a, b in itertools.pairwise(ts):
            if b - a <= limit_s:
                continue
            for start, end, isr in runs:
                lo, hi = max(a, start), min(b, end)
                if hi - lo > limit_s and any(i < hi and d > lo for i, d in sends[p]):
                    out.append({"partition": p, "no_write_from": round(a, 3),
                                "for_s": round(hi - lo, 3), "isr": isr})  # fmt: skip
    return out


def _healthy_runs(
    samples: list[tuple[float, bool, list[int]]],
) -> list[tuple[float, float, list[int]]]:
    """Maximal stretches of consecutive healthy samples at most SAMPLE_GAP_S apart:
    (first time, last time, the ISR at the last sample)."""
    runs: list[tuple[float, float, list[int]]] = []
    start = last = None
    isr: list[int] = []
    for t, healthy, sample_isr in samples:
        if healthy and start is not None and last is not None and t - last <= SAMPLE_GAP_S:
            last, isr = t, sample_isr
            continue
        if start is not None and last is not None:
            runs.append((start, last, isr))
        start, last, isr = (t, t, sample_isr) if healthy else (None, None, [])
    if start is not None and last is not None:
        runs.append((start, last, isr))
    return runs


TXN_CHECKS = (
    "txn_aborted_reads",
    "txn_incomplete",
    "txn_duplicated",
    "txn_phantom_reads",
    "txn_unexpected",
)


def check_transactions(
    history: Iterable[Mapping[str, Any]],
    final_read: Mapping[int, list[tuple[int, str]]],
    uncommitted_read: Mapping[int, list[tuple[int, str]]] | None = None,
) -> dict[str, Any]:
    """The transactional workload's checks (fault_txn.py; Jepsen's G1a "aborted read" and
    "internal consistency" are the model) on its ops (f "txn", "tpoll") and a read_committed
    final read of its topic:

    - txn_aborted_reads (G1a): a record of an aborted transaction read under read_committed,
      by the reader during the run or by the final read;
    - txn_incomplete (all or nothing): a committed transaction with a record missing from the
      final read (in its partition); an unknown one with some records there and not all;
    - txn_duplicated: a record stored more than once;
    - txn_phantom_reads: a record the read_committed reader was served that is not in the
      final read at that offset;
    - txn_unexpected: a record that no transaction wrote.

    `uncommitted_read` (a read_uncommitted final read), when given, only counts the aborted
    transactions' records the log holds (figure `aborted_records_in_log`: the G1a check was
    not vacuous)."""
    history = list(history)
    found: dict[str, list[Any]] = {name: [] for name in TXN_CHECKS}
    invoked = {e["op"]: e for e in history if e.get("f") == "txn" and e["type"] == "invoke"}
    outcome = {e["op"]: e["type"] for e in history if e.get("f") == "txn" and e["type"] != "invoke"}
    owner: dict[tuple[int, str], int] = {}
    for op, e in invoked.items():
        for p, values in e["values"].items():
            for v in values:
                owner[(int(p), v)] = op
    final_at = {(p, off): v for p, records in final_read.items() for off, v in records}
    final_count = collections.Counter(
        (p, v) for p, records in final_read.items() for _, v in records
    )
    polls = [e for e in history if e.get("f") == "tpoll"]
    reads = [(p, v, "final") for (p, v) in final_count] + [
        (e["partition"], e["value"], e["process"]) for e in polls
    ]
    for p, v, reader in reads:
        op = owner.get((p, v))
        if op is None:
            found["txn_unexpected"].append({"partition": p, "value": v, "reader": reader})
        elif outcome.get(op) == "fail":
            found["txn_aborted_reads"].append(
                {"txn": invoked[op]["txn"], "partition": p, "value": v, "reader": reader}
            )
    for op, e in invoked.items():
        kind = outcome.get(op, "info")  # never completed: unknown
        if kind == "fail":
            continue
        wanted = [(int(p), v) for p, values in e["values"].items() for v in values]
        present = [pv for pv in wanted if final_count[pv]]
        if len(present) == len(wanted) or (kind == "info" and not present):
            continue
        found["txn_incomplete"].append(
            {"txn": e["txn"], "outcome": kind, "present": len(present), "of": len(wanted),
             "missing": [f"{p}:{v}" for p, v in wanted if not final_count[(p, v)]][:10]}
        )  # fmt: skip
    found["txn_duplicated"] = sorted(f"{p}:{v}" for (p, v), n in final_count.items() if n > 1)
    for e in polls:
        if final_at.get((e["partition"], e["offset"])) != e["value"]:
            found["txn_phantom_reads"].append(
                {"partition": e["partition"], "offset": e["offset"], "value": e["value"],
                 "found": final_at.get((e["partition"], e["offset"]))}
            )  # fmt: skip
    counts = collections.Counter(outcome.get(op, "info") for op in invoked)
    return {
        "valid": not any(found.values()),
        "transactions": {
            "committed": counts["ok"],
            "aborted": counts["fail"],
            "unknown": counts["info"],
            "records_read": sum(final_count.values()),
            "aborted_records_in_log": sum(
                1
                for p, records in (uncommitted_read or {}).items()
                for _, v in records
                if outcome.get(owner.get((p, v), -1)) == "fail"
            ),
            "reader_records": len(polls),
        },
        **{name: len(items) for name, items in found.items()},
        "anomalies": {name: items[:20] for name, items in found.items() if items},
    }
