"""Deterministic simulation of the Raft core: many seeds of faults, invariants after every event,
liveness after healing. A failure names its seed; `pytest tests/sim --seed N` replays it."""

from __future__ import annotations

import os
import random
import time

import pytest
from raft_sim import SimConfig, run_seed

# The default run (CI) covers 600 seeds (~25 s here); the long tier (scripts/test-long.sh) 2000.
LONG = os.environ.get("GREGOR_LONG_TESTS", "") not in ("", "0")
DEFAULT_SEEDS = 2000 if LONG else 600


def config_for(seed: int) -> SimConfig:
    """Every fourth seed runs five voters, the rest three; one observer always. One seed in
    eight runs without PreVote, another without CheckQuorum (the safety proof needs neither).
    Batching, pipelining and the fault rate vary with the seed too: one-entry messages and
    frequent faults reach interleavings (Raft's Figure 8) that big batches hide."""
    knobs = random.Random(seed * 7919 + 1)
    return SimConfig(
        voters=5 if seed % 4 == 0 else 3,
        pre_vote=seed % 8 != 3,
        check_quorum=seed % 8 != 5,
        max_entries_per_msg=knobs.choice([1, 1, 4]),
        max_inflight=knobs.choice([1, 2, 4]),
        fault_every_ms=knobs.choice([50, 50, 150]),
    )


def membership_config_for(seed: int) -> SimConfig:
    """Membership runs: three or five bootstrap voters, two spare nodes, voters added and removed
    one at a time among the crashes, partitions, snapshots and transfers."""
    cfg = config_for(seed)
    cfg.membership = True
    cfg.spares = 2
    cfg.chaos_ms = 2500
    return cfg


def seeds(sim_seed: int | None) -> range:
    if sim_seed is not None:
        return range(sim_seed, sim_seed + 1)
    return range(int(os.environ.get("GREGOR_SIM_SEEDS", DEFAULT_SEEDS)))


@pytest.mark.slow
def test_raft_simulation_seeds(sim_seed: int | None) -> None:
    chosen = seeds(sim_seed)
    start = time.monotonic()
    events = 0
    for seed in chosen:
        sim = run_seed(seed, config_for(seed))  # SimFailure names the seed and replay command
        events += sim.n_events
        assert sim.checks.max_committed > 0, f"seed {seed}: nothing was ever committed"
    took = time.monotonic() - start
    print(f"raft simulation: {len(chosen)} seeds, {events} events in {took:.1f}s")


def test_simulation_is_deterministic() -> None:
    a = run_seed(7, config_for(7))
    b = run_seed(7, config_for(7))
    assert (a.n_events, a.checks.committed, a.checks.leader_of_term) == (
        b.n_events,
        b.checks.committed,
        b.checks.leader_of_term,
    )
    assert a.n_events > 500


def test_simulation_catches_a_broken_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sanity check of the checker: a core that commits without a quorum must be caught."""
    from raft_sim import SimFailure

    from controller.raft import leader

    def commit_on_own_append(self: leader.Leader) -> bool:
        return self.node.log.commit_to(self.node.log.last_index)

    monkeypatch.setattr(leader.Leader, "maybe_commit", commit_on_own_append)
    failures = 0
    for seed in range(30):
        try:
            run_seed(seed, config_for(seed))
        except (SimFailure, AssertionError):
            failures += 1
    assert failures > 0


DEFAULT_MEMBERSHIP_SEEDS = 100


@pytest.mark.slow
def test_raft_simulation_membership_seeds(sim_seed: int | None) -> None:
    """Voters added (learner, catch-up, promotion) and removed (the leader too) one at a time,
    under crashes, partitions, snapshots and transfers: every invariant after every event."""
    if sim_seed is not None:
        chosen = range(sim_seed, sim_seed + 1)
    else:
        chosen = range(int(os.environ.get("GREGOR_SIM_MEMBERSHIP_SEEDS", DEFAULT_MEMBERSHIP_SEEDS)))
    start = time.monotonic()
    changes = 0
    for seed in chosen:
        sim = run_seed(seed, membership_config_for(seed))
        changes += sim.n_member_changes
        assert sim.checks.max_committed > 0, f"seed {seed}: nothing was ever committed"
    took = time.monotonic() - start
    print(f"raft membership simulation: {len(chosen)} seeds, {changes} changes in {took:.1f}s")
    assert sim_seed is not None or changes >= len(chosen) // 2, "too few membership changes ran"


def test_membership_changes_run_in_the_simulation() -> None:
    """A few seeds (fast): changes complete, including promotions of spares and removals."""
    added: set[int] = set()
    removed = 0
    for seed in range(12):
        sim = run_seed(seed, membership_config_for(seed))
        for n in sim.nodes.values():
            if n.raft is not None and n.raft.role.value == "leader":
                added |= set(n.raft.voters) & set(sim.spare_ids)
                removed += len(set(sim.voter_ids) - set(n.raft.voters))
    assert added, "no spare node was ever promoted to voter"
    assert removed, "no voter was ever removed"


def test_simulation_catches_two_servers_changed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sanity check of the checker: a core whose promotion also demotes a voter (two servers
    changed by one membership entry) must be caught."""
    from raft_sim import SimFailure

    from controller.raft import members
    from controller.raft.membership import Membership

    def promote_and_demote(self: Membership, node_id: int) -> Membership:
        learners = dict(self.learners)
        voters = dict(self.voters)
        victim = min(voters)
        learners[victim] = voters.pop(victim)
        voters[node_id] = learners.pop(node_id)
        return Membership(voters, learners)

    monkeypatch.setattr(Membership, "promote", promote_and_demote)
    monkeypatch.setattr(members, "check_single_change", lambda old, new: None)
    messages = []
    for seed in range(12):
        try:
            run_seed(seed, membership_config_for(seed))
        except SimFailure as e:
            messages.append(str(e))
    assert any("disjoint majorities" in m for m in messages), messages
