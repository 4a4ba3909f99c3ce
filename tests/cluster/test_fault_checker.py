"""The checker's own tests (CHECKER.md: each check has a synthetic history that must fail it):
a clean history passes, and each planted anomaly is caught by its check (and only by the
checks that the same fault also breaks, e.g. a gap in the log is also a reader's skip)."""

from __future__ import annotations

import copy
import json
import random

import pytest
from fault_checker import check
from fault_history import History, read_history


def _clean(tmp_path=None, seed: int = 7):
    """2 producers x 2 partitions, acks interleaved, one failed write (not applied), one
    unknown write (applied), a reader polling everything in order; the final read matching."""
    rng = random.Random(seed)
    h = History(tmp_path / "history.jsonl" if tmp_path else None)
    logs: dict[int, list[tuple[int, str]]] = {0: [], 1: []}
    seq = {("p1", 0): 0, ("p1", 1): 0, ("p2", 0): 0, ("p2", 1): 0}
    for i in range(200):
        producer, p = rng.choice(["p1", "p2"]), rng.choice([0, 1])
        value = f"{producer}-{seq[(producer, p)]}"
        seq[(producer, p)] += 1
        op = h.invoke(producer, "send", p, value)
        if i == 50:
            h.fail(op, "NOT_LEADER_OR_FOLLOWER")  # refused before appending: not in the log
            continue
        logs[p].append((len(logs[p]), value))
        if i == 60:
            h.info(op, "timed out")  # unknown: it was appended
        else:
            h.ok(op, len(logs[p]) - 1)
    for p, records in logs.items():
        for off, value in records:
            h.polled("r1", p, off, value)
    # a group: g1 owns both partitions and commits after reading; then p1 moves to g2, which
    # starts at g1's commit; a refused commit stores nothing
    h.group_event("g1", "assign", [0, 1])
    for p, upto in ((0, 10), (1, 5)):
        for off, value in logs[p][:upto]:
            h.polled_in_group("g1", p, off, value)
        h.ok(h.commit("g1", p, upto), upto)
    h.group_event("g1", "revoke", [1])
    h.fail(h.commit("g1", 1, 7), "FENCED_MEMBER_EPOCH")
    h.group_event("g2", "assign", [1])
    for off, value in logs[1][5:10]:
        h.polled_in_group("g2", 1, off, value)
    h.ok(h.commit("g2", 1, 10), 10)
    h.close()
    return (
        h.entries,
        logs,
        [
            {"type": "leader", "node": 4, "partition": 0, "epoch": 0},
            {"type": "leader", "node": 5, "partition": 0, "epoch": 1},
            {"type": "raft_leader", "node": 1, "term": 3},
            {"type": "raft_leader", "node": 2, "term": 4},
        ],
    )


def test_a_clean_history_is_valid(tmp_path) -> None:
    _entries, final, events = _clean(tmp_path)
    report = check(read_history(tmp_path / "history.jsonl"), final, events)
    assert report["valid"], report["anomalies"]
    assert report["writes"] == {"ok": 198, "fail": 1, "info": 1} and report["reads"] == 199 + 20
    assert report["commits"] == 3
    json.dumps(report)  # a JSON report


def _first_ok(entries, f="send", p=0):
    return next(e for e in entries if e["type"] == "ok" and e["f"] == f and e["partition"] == p)


def plant_lost(entries, final, events):
    """The last acknowledged record of partition 0 is gone from the log (no reader saw it)."""
    off, _value = final[0].pop()
    entries[:] = [
        e for e in entries if not (e["f"] == "poll" and e["partition"] == 0 and e["offset"] == off)
    ]


def plant_duplicated(entries, final, events):
    _off, value = final[0][3]
    final[0].append((len(final[0]), value))


def plant_inconsistent(entries, final, events):
    e = _first_ok(entries, "poll", 1)
    e["value"] = "p9-0"  # a reader saw another value at an acknowledged offset


def plant_reordered(entries, final, events):
    """Two of p1's values stored the other way round, and acked and read as stored."""
    mine = [i for i, (_o, v) in enumerate(final[1]) if v.startswith("p1-")]
    (oa, va), (ob, vb) = final[1][mine[0]], final[1][mine[1]]
    final[1][mine[0]], final[1][mine[1]] = (oa, vb), (ob, va)
    for e in entries:
        if e.get("partition") != 1 or "offset" not in e:
            continue
        if e["f"] == "send" and e["value"] in (va, vb):
            e["offset"] = ob if e["value"] == va else oa
        elif e["f"] in ("poll", "gpoll") and e["offset"] in (oa, ob):
            e["value"] = vb if e["offset"] == oa else va


def plant_gap(entries, final, events):
    final[1] = [(o + (1 if o >= 10 else 0), v) for o, v in final[1]]
    for e in entries:
        if e.get("partition") == 1 and "offset" in e and e["offset"] >= 10:
            e["offset"] += 1


def plant_reader_skip(entries, final, events):
    polls = [e for e in entries if e["f"] == "poll" and e["partition"] == 0]
    entries.remove(polls[5])


def plant_reader_back(entries, final, events):
    polls = [e for e in entries if e["f"] == "poll" and e["partition"] == 0]
    entries.append(copy.deepcopy(polls[3]))


def plant_two_leaders(entries, final, events):
    events.append({"type": "leader", "node": 6, "partition": 0, "epoch": 1})


def plant_term_back(entries, final, events):
    events.append({"type": "raft_leader", "node": 2, "term": 2})


def plant_aborted_read(entries, final, events):
    failed = next(e for e in entries if e["type"] == "fail")
    final[failed["partition"]].append((len(final[failed["partition"]]), failed["value"]))


def plant_phantom(entries, final, events):
    entries.append(
        {
            "type": "ok",
            "op": 10**6,
            "process": "r1",
            "f": "poll",
            "partition": 0,
            "offset": len(final[0]),
            "value": "p1-999",
        }
    )


def _commits(entries, p):
    return [e for e in entries if e["f"] == "commit" and e["type"] == "ok" and e["partition"] == p]


def plant_commit_regress(entries, final, events):
    """A commit of partition 1 acknowledged after g2's, at g1's old offset (a fenced member's
    late commit that was accepted)."""
    late = copy.deepcopy(_commits(entries, 1)[0])
    late.update(op=10**6 + 1, time=entries[-1]["time"] + 1)
    entries.append(late)


def plant_commit_past_hw(entries, final, events):
    _commits(entries, 0)[0]["offset"] = len(final[0]) + 5  # past everything p0 ever held


def plant_group_skip(entries, final, events):
    first = next(e for e in entries if e["f"] == "gpoll" and e["process"] == "g2")
    entries.remove(first)  # g2 starts at 6, past g1's commit (5)


@pytest.mark.parametrize(
    ("plant", "caught_by"),
    [
        (plant_lost, {"lost"}),
        (plant_duplicated, {"duplicated", "reordered"}),
        (plant_inconsistent, {"inconsistent", "phantom_reads"}),
        (plant_reordered, {"reordered"}),
        (plant_gap, {"gaps", "reader_skips"}),
        (plant_reader_skip, {"reader_skips"}),
        (plant_reader_back, {"reader_skips"}),
        (plant_two_leaders, {"leader_conflicts"}),
        (plant_term_back, {"leader_conflicts"}),
        (plant_aborted_read, {"aborted_reads", "reordered"}),
        (plant_phantom, {"phantom_reads"}),
        (plant_commit_regress, {"commit_regress"}),
        (plant_commit_past_hw, {"commit_past_hw"}),
        (plant_group_skip, {"group_skips"}),
    ],
    ids=lambda x: x.__name__ if callable(x) else "",
)
def test_each_planted_anomaly_is_caught(plant, caught_by) -> None:
    entries, final, events = _clean()
    plant(entries, final, events)
    report = check(entries, final, events)
    flagged = set(report["anomalies"])
    assert not report["valid"] and flagged == caught_by, report["anomalies"]


def test_a_torn_last_line_is_left_out_and_cut_before_appending(tmp_path) -> None:
    """A reader beside a live writer can see half a line; a killed writer can leave one. The
    reader skips it, and a writer appending after a kill cuts it first."""
    path = tmp_path / "history.jsonl"
    h = History(path)
    h.ok(h.invoke("p1", "send", 0, "v0"), 0)
    h.close()
    whole = path.read_text()
    path.write_text(whole + '{"type": "ok", "o')
    assert [e["type"] for e in read_history(path)] == ["invoke", "ok"]
    h2 = History(path, op_base=100, mode="a")
    h2.invoke("p1", "send", 0, "v1")
    h2.close()
    assert path.read_text().startswith(whole)
    assert [(e["type"], e["op"]) for e in read_history(path)] == [
        ("invoke", 0), ("ok", 0), ("invoke", 100)
    ]  # fmt: skip


def _paced(isr_during_gap: list[int] | None, gap: tuple[float, float] = (20.0, 32.0)):
    """One producer writing partition 0 every 0.1 s for 40 s (times set by hand), ISR samples
    every 0.5 s ([4, 5, 6] outside the gap; `isr_during_gap` inside it, None: no samples then);
    the writes invoked in `gap` are acknowledged only at its end."""
    entries: list[dict] = []
    final: dict[int, list[tuple[int, str]]] = {0: []}
    op = 0
    for i in range(400):
        t = i * 0.1
        entries.append({"type": "invoke", "op": op, "process": "p1", "f": "send",
                        "partition": 0, "value": f"p1-{i}", "time": t})  # fmt: skip
        done = gap[1] if gap[0] <= t < gap[1] else t + 0.01
        final[0].append((i, f"p1-{i}"))
        entries.append({"type": "ok", "op": op, "process": "p1", "f": "send", "partition": 0,
                        "value": f"p1-{i}", "offset": i, "time": done})  # fmt: skip
        op += 1
    for j in range(80):
        t = j * 0.5
        isr = isr_during_gap if gap[0] < t < gap[1] else [4, 5, 6]
        if isr is None:
            continue
        entries.append({"type": "isr", "op": op, "f": "isr", "time": t + 0.001,
                        "partitions": {"0": [4, isr]}})  # fmt: skip
        op += 1
    entries.sort(key=lambda e: e["time"])
    return entries, final


def test_a_stall_while_the_isr_satisfies_min_isr_is_flagged() -> None:
    entries, final = _paced([4, 5, 6])
    report = check(entries, final, [], min_isr=2)
    assert not report["valid"] and report["stalls"] == 1, report["anomalies"]
    stall = report["anomalies"]["stalls"][0]
    assert stall["partition"] == 0 and stall["for_s"] > 10


def test_a_stall_while_the_isr_is_below_min_isr_or_unknown_is_not() -> None:
    for isr in ([4], None):  # the cluster said it could not take writes; no evidence at all
        entries, final = _paced(isr)
        report = check(entries, final, [], min_isr=2)
        assert report["valid"] and report["stalls"] == 0, (isr, report["anomalies"])
    entries, final = _paced([4, 5, 6], gap=(20.0, 29.0))  # 9 s: within the bound
    assert check(entries, final, [], min_isr=2)["valid"]


def test_concurrent_commits_of_two_members_are_not_ordered_by_their_acknowledgements(tmp_path):
    """S6 (packet loss on the coordinator): g2's commit, sent and validated before g2 was
    fenced, was acknowledged after the next owner's higher commit. Stored in that order it is
    no regression; the same lower commit sent after the higher one was acknowledged is."""
    entries, final, events = _clean(tmp_path)
    t = _commits(entries, 1)[-1]["time"]  # g2's commit of partition 1 at offset 10
    # g1's commit at 7 (it owned partition 1 before): sent before that ack, acknowledged after
    sent = {"type": "invoke", "op": 10**6 + 2, "process": "g1", "f": "commit", "partition": 1,
            "offset": 7, "time": t - 0.5}  # fmt: skip
    late_ack = {**sent, "type": "ok", "time": t + 0.03}
    ok = [*entries, sent, late_ack]
    assert check(ok, final, events)["commit_regress"] == 0
    # sent only after the offset-10 commit was acknowledged: a regression
    sent_after = {**sent, "op": 10**6 + 3, "time": t + 0.01}
    bad = [*entries, sent_after, {**sent_after, "type": "ok", "time": t + 0.03}]
    report = check(bad, final, events)
    assert report["commit_regress"] == 1, report["anomalies"]


def test_an_ack_without_an_offset_is_checked_by_value() -> None:
    """librdkafka's idempotent producer acknowledges a batch whose response was lost once a
    later one is acknowledged, without its offset: C1 then asks only that the value is stored
    in its partition."""
    entries, final, events = _clean()
    [ack] = [e for e in entries if e["type"] == "ok" and e.get("f") == "send"][:1]
    ack["offset"] = None
    assert check(entries, final, events)["valid"]
    final[ack["partition"]] = [(o, v) for o, v in final[ack["partition"]] if v != ack["value"]]
    report = check(entries, final, events)
    assert {"value": ack["value"], "partition": ack["partition"], "offset": None} in report[
        "anomalies"
    ]["lost"]


def test_node_logs_are_read_in_the_order_their_processes_ran(tmp_path) -> None:
    """A broker's 10th start logs after its 2nd: sorted by name, its epochs seemed to go back
    (C6 flagged a long S14 run)."""
    from fault_workload import leader_events, log_order

    line = "INFO broker.replica.partition: [chaos-1] became leader (epoch {}, isr [6], hw 0)\n"
    (tmp_path / "broker-6.2.stderr").write_text(line.format(1))
    (tmp_path / "broker-6.10.stderr").write_text(line.format(7))
    paths = sorted(tmp_path.glob("broker-6.*.stderr"), key=log_order)
    assert [p.name for p in paths] == ["broker-6.2.stderr", "broker-6.10.stderr"]
    report = check([], {}, leader_events({6: list(reversed(paths))}, "chaos"))
    assert report["leader_conflicts"] == 0, report["anomalies"]
    (tmp_path / "broker-6.11.stderr").write_text(line.format(3))  # a real step back
    report = check([], {}, leader_events({6: list(tmp_path.glob("*.stderr"))}, "chaos"))
    assert report["leader_conflicts"] == 1
