"""The transactional checks of the fault harness (fault_checker.check_transactions; issue 29)
on synthetic histories: a clean one passes, and each planted anomaly (an aborted record read,
a committed transaction missing a record, an unknown one half there, a record stored twice,
a reader served a record the final read does not hold, a record no transaction wrote) is
caught by its check and only by it."""

from __future__ import annotations

import copy
import json

import pytest
from fault_checker import TXN_CHECKS, check, check_transactions
from fault_history import History, read_history


def _clean(tmp_path=None):
    """Two producers, 12 transactions over 3 partitions: committed, aborted (their records
    written, then an ABORT marker: absent under read_committed), unknown and present, unknown
    and absent, one never completed (present); a read_committed reader polling everything."""
    h = History(tmp_path / "history.jsonl" if tmp_path else None)
    logs: dict[int, list[tuple[int, str]]] = {0: [], 1: [], 2: []}
    raw: dict[int, list[tuple[int, str]]] = {0: [], 1: [], 2: []}  # read_uncommitted
    next_offset = {0: 0, 1: 0, 2: 0}
    outcomes = ["ok", "fail", "ok", "info-present", "ok", "info-absent", "fail", "open", "ok"]
    for n, outcome in enumerate(outcomes):
        name = f"t{1 + n % 2}"
        txn = f"{name}-{n}"
        values: dict[int, list[str]] = {}
        for i in range(2 + n % 4):
            values.setdefault((n + i) % 3, []).append(f"{txn}:{i}")
        op = h.txn(name, txn, values, outcome != "fail")
        for p, vs in values.items():
            for v in vs:
                if outcome in ("ok", "info-present", "open"):
                    logs[p].append((next_offset[p], v))
                if outcome != "info-absent":
                    raw[p].append((next_offset[p], v))
                next_offset[p] += 1  # aborted or undecided ones take offsets too
            next_offset[p] += 1  # the marker
        if outcome != "open":
            h.txn_done(op, outcome.split("-")[0], None if outcome == "ok" else "x")
    for p, records in logs.items():
        for off, v in records:
            h.tpolled("tr1", p, off, v)
    h.close()
    return h.entries, logs, raw


def test_a_clean_transactional_history_is_valid(tmp_path) -> None:
    entries, final, raw = _clean(tmp_path)
    history = read_history(tmp_path / "history.jsonl")
    report = check_transactions(history, final)
    assert report["valid"], report["anomalies"]
    assert report["transactions"] == {
        "committed": 4, "aborted": 2, "unknown": 3,
        "records_read": sum(len(r) for r in final.values()),
        "aborted_records_in_log": 0,
        "reader_records": sum(len(r) for r in final.values()),
    }  # fmt: skip
    json.dumps(report)
    aborted = sum(len(vs) for e in entries if e.get("f") == "txn" and e["type"] == "fail"
                  for vs in e["values"].values())  # fmt: skip
    with_raw = check_transactions(history, final, raw)
    assert with_raw["valid"] and with_raw["transactions"]["aborted_records_in_log"] == aborted > 0
    assert check(history, {})["valid"]  # the other checks ignore the transactional ops


def _txn(entries, kind: str) -> dict:
    done = {e["op"] for e in entries if e.get("f") == "txn" and e["type"] == kind}
    return next(e for e in entries if e["type"] == "invoke" and e["op"] in done)


def plant_aborted_in_final(entries, final):
    """An aborted transaction's record is in the read_committed final read (G1a)."""
    p, [v, *_] = next(iter(_txn(entries, "fail")["values"].items()))
    final[int(p)].append((10_000, v))


def plant_aborted_polled(entries, final):
    """The reader was served an aborted record (G1a) that the final read no longer has: also
    a phantom read."""
    p, [v, *_] = next(iter(_txn(entries, "fail")["values"].items()))
    entries.append({"type": "ok", "op": 99_999, "process": "tr1", "f": "tpoll",
                    "partition": int(p), "offset": 10_000, "value": v, "time": 0.0})  # fmt: skip


def plant_committed_missing(entries, final):
    """A committed transaction lost one record (and the reader never saw it)."""
    p, [v, *_] = next(iter(_txn(entries, "ok")["values"].items()))
    final[int(p)] = [(o, x) for o, x in final[int(p)] if x != v]
    entries[:] = [e for e in entries if not (e.get("f") == "tpoll" and e["value"] == v)]


def plant_unknown_partial(entries, final):
    """An unknown transaction with some of its records stored and not all."""
    for e in entries:
        if e.get("f") == "txn" and e["type"] == "invoke":
            pv = [(int(p), v) for p, vs in e["values"].items() for v in vs]
            if len(pv) > 1 and all(any(x == v for _, x in final[p]) for p, v in pv):
                if any(d["op"] == e["op"] and d["type"] == "info" for d in entries):
                    p, v = pv[-1]
                    final[p] = [(o, x) for o, x in final[p] if x != v]
                    entries[:] = [x for x in entries if x.get("value") != v]
                    return
    raise AssertionError("no unknown transaction that is present")


def plant_duplicate(entries, final):
    """A committed record stored twice."""
    _off, v = final[0][0]
    final[0].append((final[0][-1][0] + 1, v))


def plant_phantom(entries, final):
    """The reader was served a committed record at an offset the final read has another at."""
    e = next(e for e in entries if e.get("f") == "tpoll")
    e["offset"] += 10_000


def plant_unexpected(entries, final):
    """A record no transaction wrote."""
    final[1].append((10_000, "t9-1:0"))


@pytest.mark.parametrize(
    "plant, caught_by",
    [
        (plant_aborted_in_final, {"txn_aborted_reads"}),
        (plant_aborted_polled, {"txn_aborted_reads", "txn_phantom_reads"}),
        (plant_committed_missing, {"txn_incomplete"}),
        (plant_unknown_partial, {"txn_incomplete"}),
        (plant_duplicate, {"txn_duplicated"}),
        (plant_phantom, {"txn_phantom_reads"}),
        (plant_unexpected, {"txn_unexpected"}),
    ],
    ids=lambda x: x.__name__ if callable(x) else "-".join(sorted(x)),
)
def test_each_planted_transactional_anomaly_is_caught(plant, caught_by) -> None:
    entries, final, _raw = copy.deepcopy(_clean())
    plant(entries, final)
    report = check_transactions(entries, final)
    assert not report["valid"]
    assert {name for name in TXN_CHECKS if report[name]} == caught_by, report["anomalies"]
