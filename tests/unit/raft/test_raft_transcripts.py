"""Scripted Raft scenarios (after etcd-io/raft's testdata/*.txt): each file in testdata/ is a
script of commands against a `raft_harness.Cluster`, with `expect` lines checked as it runs.

Commands (one per line; `#` starts a comment):

    cluster voters=1,2,3 [observers=4] [prevote=true] [checkquorum=true] [seed=1] [k=v ...]
    set-log N terms=1,1,2 [term=T] [vote=V]   store a log for node N (then `restart N`)
    restart N | all            crash and restart from the stored state
    campaign N                 tick N alone until it campaigns (messages stay queued)
    elect N                    campaign + stabilize, and check N won
    tick N [count]             tick one node;  run count  — tick everyone + stabilize, count times
    stabilize                  deliver until no message is queued
    deliver-until N k=v ...    deliver one message at a time until node N matches
    drop                       drop every queued message
    isolate N | cut A>B | partition 1,2 / 3 | heal
    propose N data...          propose on N (must succeed)
    propose-fails N Error      propose on N must raise Error (NotLeader, ProposalDropped)
    compact N index data       N's state machine snapshots at `index` with `data`
    transfer N to              N starts a leadership transfer to `to`
    expect N k=v ...           role, term, vote, leader (none), commit, last, applied (a,b,...),
                               snapshot (index), installed (last snapshot index installed),
                               term@I (term of entry I), match@P (leader's match index of P)
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
from raft_harness import Cluster

from controller.raft import errors
from controller.raft.core import RaftNode
from controller.raft.messages import Entry, EntryKind, HardState

TESTDATA = Path(__file__).parent / "testdata"


def _ids(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _value(node: RaftNode, c: Cluster, key: str) -> str:
    if key == "role":
        return node.role.value
    if key == "term":
        return str(node.term)
    if key == "vote":
        return "none" if node.vote is None else str(node.vote)
    if key == "leader":
        return "none" if node.leader_id is None else str(node.leader_id)
    if key == "commit":
        return str(node.commit_index)
    if key == "last":
        return str(node.last_index)
    if key == "snapshot":
        return str(node.snapshot.index)
    if key == "applied":
        return ",".join(d.decode() for d in c.applied[node.id])
    if key == "installed":
        snaps = c.installed[node.id]
        return str(snaps[-1].index) if snaps else "none"
    if key.startswith("term@"):
        t = node.entry_term(int(key[5:]))
        return "none" if t is None else str(t)
    if key.startswith("match@"):
        pr = node.progress.get(int(key[6:]))
        return "none" if pr is None else str(pr.match)
    raise ValueError(f"unknown expect key {key!r}")


def _mismatches(node: RaftNode, c: Cluster, pairs: list[str]) -> list[str]:
    out = []
    for pair in pairs:
        key, want = pair.split("=", 1)
        got = _value(node, c, key)
        if got != want:
            out.append(f"{key}={got} (want {want})")
    return out


def _kw(value: str) -> Any:
    if value in ("true", "false"):
        return value == "true"
    return int(value)


def run_script(path: Path) -> None:
    c: Cluster | None = None
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path.name}:{lineno}: {line}"
        cmd, *args = shlex.split(line)
        try:
            if cmd == "cluster":
                opts = dict(a.split("=", 1) for a in args)
                voters = _ids(opts.pop("voters"))
                observers = _ids(opts.pop("observers", ""))
                seed = int(opts.pop("seed", "1"))
                kw = {
                    {"prevote": "pre_vote", "checkquorum": "check_quorum"}.get(k, k): _kw(v)
                    for k, v in opts.items()
                }
                c = Cluster(voters, observers, seed=seed, **kw)
                continue
            assert c is not None, "no cluster yet"
            if cmd == "set-log":
                n = int(args[0])
                opts = dict(a.split("=", 1) for a in args[1:])
                terms = _ids(opts["terms"])
                store = c.stores[n]
                store.entries = [
                    Entry(i, t, f"i{i}t{t}".encode(), EntryKind.NORMAL)
                    for i, t in enumerate(terms, 1)
                ]
                vote = opts.get("vote")
                store.hard_state = HardState(
                    int(opts.get("term", terms[-1] if terms else 0)),
                    None if vote is None else int(vote),
                    0,
                )
            elif cmd == "restart":
                for n in c.nodes if args[0] == "all" else [int(args[0])]:
                    c.restart(n)
            elif cmd == "campaign":
                c.campaign(int(args[0]))
            elif cmd == "elect":
                c.elect(int(args[0]))
            elif cmd == "tick":
                c.tick(int(args[0]), int(args[1]) if len(args) > 1 else 1)
            elif cmd == "run":
                c.run(int(args[0]))
            elif cmd == "stabilize":
                c.stabilize()
            elif cmd == "deliver-until":
                node_id = int(args[0])
                while _mismatches(c.nodes[node_id], c, args[1:]):
                    assert c.queue, f"queue empty; node {node_id}: {c.nodes[node_id]}"
                    c.deliver_one()
            elif cmd == "drop":
                c.drop_queued()
            elif cmd == "isolate":
                c.isolate(int(args[0]))
            elif cmd == "cut":
                a, b = args[0].split(">")
                c.cut.add((int(a), int(b)))
            elif cmd == "partition":
                groups = " ".join(args).split("/")
                c.partition(*[_ids(g.strip().replace(" ", "")) for g in groups])
            elif cmd == "heal":
                c.heal()
            elif cmd == "propose":
                c.propose(int(args[0]), *[a.encode() for a in args[1:]])
            elif cmd == "propose-fails":
                exc = getattr(errors, args[1])
                with pytest.raises(exc):
                    c.nodes[int(args[0])].propose([b"refused"])
            elif cmd == "compact":
                n = int(args[0])
                c.nodes[n].compact(int(args[1]), args[2].encode())
                c.process(n)
            elif cmd == "transfer":
                n = int(args[0])
                c.nodes[n].transfer_leadership(int(args[1]))
                c.process(n)
            elif cmd == "expect":
                node = c.nodes[int(args[0])]
                bad = _mismatches(node, c, args[1:])
                assert not bad, f"node {node.id}: {', '.join(bad)}  [{node!r}]"
            else:
                raise ValueError(f"unknown command {cmd!r}")
        except AssertionError as e:
            raise AssertionError(f"{where}\n  {e}") from None


SCRIPTS = sorted(TESTDATA.glob("*.txt"))


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_transcript(path: Path) -> None:
    run_script(path)


def test_there_are_transcripts() -> None:
    assert len(SCRIPTS) >= 5
