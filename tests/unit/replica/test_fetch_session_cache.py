"""Incremental fetch sessions (KIP-227), the pure parts: the leader's bounded session cache
(LRU eviction, idle expiry, epochs, dirty marking) and the follower's session handler (full
then incremental requests, forgotten partitions, starting over on errors)."""

from __future__ import annotations

import random

from broker.replica import FetchPartitionSpec
from broker.replica.fetch_session import (
    FetchSessionCache,
    next_epoch,
    session_key,
)
from broker.replica.fetch_session_handler import FetchSessionHandler, PartitionData
from client.errors import ErrorCode


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000

    def __call__(self) -> int:
        return self.ms


def _cache(max_sessions: int = 3, idle_ms: int = 10_000) -> tuple[FetchSessionCache, Clock]:
    clock = Clock()
    return FetchSessionCache(max_sessions, idle_ms, clock, random.Random(7)), clock


ST = FetchPartitionSpec("t", 0, 0, 1 << 20, 1, -1)  # (the cache keeps it as it is)


def test_lru_session_is_evicted_when_full():
    cache, clock = _cache(max_sessions=2)
    a = cache.create(2, 5)
    clock.ms += 1
    b = cache.create(3, 5)
    assert a and b and a.id != b.id
    clock.ms += 1
    assert cache.get(a.id) is a  # a is now the most recently used
    c = cache.create(2, 5)
    assert c is not None and len(cache) == 2 and cache.evictions == 1
    assert cache.get(b.id) is None and cache.get(a.id) is a


def test_idle_sessions_expire():
    cache, clock = _cache(idle_ms=1000)
    a = cache.create(2, 5)
    assert a is not None
    clock.ms += 1001
    assert cache.get(a.id) is None
    b = cache.create(2, 5)
    clock.ms += 1001
    assert b is not None and cache.expire() == 1 and len(cache) == 0


def test_no_slots_means_no_session():
    cache, _ = _cache(max_sessions=0)
    assert cache.create(2, 5) is None


def test_claim_checks_replica_and_epoch():
    cache, _ = _cache()
    s = cache.create(2, 5)
    assert s is not None and s.next_epoch == 1
    assert cache.claim(s.id + 1, 2, 1) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.claim(s.id, 3, 1) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND  # another follower's
    assert cache.claim(s.id, 2, 2) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.claim(s.id, 2, 1) is s and s.next_epoch == 2
    assert cache.claim(s.id, 2, 1) == ErrorCode.INVALID_FETCH_SESSION_EPOCH  # a replay
    assert next_epoch(0x7FFFFFFF) == 1


def test_changes_mark_only_the_sessions_holding_the_partition():
    cache, _ = _cache()
    a, b = cache.create(2, 5), cache.create(3, 5)
    assert a and b
    cache.update(a, {("t", 0): ST, ("t", 1): ST}, [])
    cache.update(b, {("t", 1): ST}, [])
    assert cache.mark_changed([("t", 0)]) == [session_key(a.id)]
    assert a.dirty == {("t", 0)} and not b.dirty
    assert set(cache.mark_changed([("t", 1), ("u", 0)])) == {session_key(a.id), session_key(b.id)}
    # a forgotten partition is no longer marked; a closed session no longer either
    cache.update(a, {}, [("t", 0), ("t", 1)])
    assert not a.dirty and not a.partitions
    assert cache.mark_changed([("t", 0)]) == []
    cache.remove(b.id)
    assert cache.mark_changed([("t", 1)]) == []


def test_evaluate_takes_named_dirty_and_recheck_and_clears_dirty_on_answer():
    cache, _ = _cache()
    s = cache.create(2, 5)
    assert s
    cache.update(s, {("t", p): ST for p in range(4)}, [])
    cache.mark_changed([("t", 1)])
    cache.record_answers(s, [(("t", 2), 0, 0, False, True)])  # answered, to be rechecked
    got = [tp for tp, _ in cache.to_evaluate(s, [("t", 0)], take_dirty=False)]
    assert got == [("t", 0), ("t", 1), ("t", 2)]
    cache.to_evaluate(s, [], take_dirty=True)
    assert [tp for tp, _ in cache.to_evaluate(s, [], take_dirty=False)] == [("t", 2)]


def test_an_answer_names_a_partition_only_when_it_changed():
    cache, _ = _cache()
    s = cache.create(2, 5)
    assert s

    def named(hw: int, lso: int, error: bool = False) -> bool:
        return cache.record_answers(s, [(("t", 0), hw, lso, error, False)])[0]

    cache.update(s, {("t", 0): ST}, [])
    assert named(10, 0)  # first time: sent
    assert not named(10, 0)
    assert named(11, 0)  # HW moved
    assert named(11, 3)  # log start moved
    assert named(11, 3, error=True)  # errors always
    assert named(11, 3)  # and the recovery after


def test_drop_replica_by_broker_epoch():
    cache, _ = _cache()
    cache.create(2, 5)
    cache.create(2, 6)
    cache.create(3, 5)
    assert cache.drop_replica(2, only_broker_epoch=5) == 1
    assert cache.replicas() == {2: {6}, 3: {5}}
    assert cache.drop_replica(2) == 1 and cache.replicas() == {3: {5}}


def _pd(offset: int, epoch: int = 1) -> PartitionData:
    return PartitionData(offset, epoch, epoch, 0, 1 << 20)


def test_handler_full_then_incremental():
    h = FetchSessionHandler()
    wanted = {("t", 0): _pd(0), ("t", 1): _pd(5)}
    req = h.build(wanted)
    assert (req.session_id, req.session_epoch) == (0, 0) and req.to_send == wanted
    assert h.handle_response(0, 42)
    req = h.build(wanted)  # nothing changed: an empty incremental fetch
    assert (req.session_id, req.session_epoch, req.to_send, req.forgotten) == (42, 1, {}, [])
    assert req.body_fields()["topics"] == [] and req.body_fields()["forgotten_topics"] == []
    assert h.handle_response(0, 42)
    # t-0 got records (its offset moved), t-1 was removed, t-2 added
    wanted2 = {("t", 0): _pd(3), ("t", 2): _pd(0)}
    req = h.build(wanted2)
    assert req.session_epoch == 2
    assert req.to_send == {("t", 0): _pd(3), ("t", 2): _pd(0)} and req.forgotten == [("t", 1)]
    body = req.body_fields()
    assert body["forgotten_topics"] == [{"name": "t", "partitions": [1]}]
    assert h.handle_response(0, 42)
    # a new leader epoch is a change too
    req = h.build({("t", 0): _pd(3, epoch=2), ("t", 2): _pd(0)})
    assert list(req.to_send) == [("t", 0)] and req.session_epoch == 3


def test_handler_given_the_changed_partitions_builds_what_a_look_at_all_of_them_builds():
    """build(wanted, changed) looks at `changed` alone; over random rounds of additions,
    removals, new offsets and epochs (and changed partitions that did not change) it makes
    the same requests as build(wanted), and the session it ends with holds the same."""
    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    by_changes, by_all = FetchSessionHandler(), FetchSessionHandler()
    wanted: dict = {("t", p): _pd(0) for p in range(20)}
    for h in (by_changes, by_all):
        assert h.build(dict(wanted)).full and h.handle_response(0, 42)
    for _round in range(200):
        changed = set()
        for _ in range(rng.randrange(6)):
            tp = ("t", rng.randrange(30))
            changed.add(tp)
            roll = rng.random()
            if roll < 0.2:
                wanted.pop(tp, None)
            elif roll < 0.8:
                old = wanted.get(tp, _pd(0))
                wanted[tp] = _pd(old.fetch_offset + rng.randrange(3), rng.choice((1, 1, 2)))
            # else: touched, unchanged
        a = by_changes.build(wanted, sorted(changed))
        b = by_all.build(wanted)
        assert (a.session_epoch, a.to_send, sorted(a.forgotten)) == (
            b.session_epoch,
            b.to_send,
            sorted(b.forgotten),
        ), seed
        assert by_changes.handle_response(0, 42) and by_all.handle_response(0, 42)
        assert by_changes._sent == by_all._sent == wanted, seed


def test_handler_starts_over_on_session_errors_and_reset():
    h = FetchSessionHandler()
    wanted = {("t", 0): _pd(0)}
    h.build(wanted)
    h.handle_response(0, 42)
    h.build(wanted)
    assert not h.handle_response(int(ErrorCode.INVALID_FETCH_SESSION_EPOCH), 42)
    req = h.build(wanted)  # full again, naming the old session so the leader closes it
    assert (req.session_id, req.session_epoch, req.to_send) == (42, 0, wanted)
    assert h.handle_response(0, 43)
    h.reset()  # a lost connection
    req = h.build(wanted)
    assert req.full and req.to_send == wanted
    assert not h.handle_response(0, 0)  # the leader had no slot: full fetches go on
    assert h.build(wanted).full


def test_check_puts_changes_first_and_check_again_looks_only_at_later_changes():
    cache, _ = _cache()
    s = cache.create(2, 5)
    assert s
    cache.update(s, {("t", p): ST for p in range(5)}, [])
    cache.mark_changed([("t", 3)])
    cache.record_answers(s, [(("t", 4), 0, 0, False, True)])  # answered, to be rechecked
    got = [tp for tp, _ in cache.to_check(s, [("t", 0), ("t", 1)])]
    assert got == [("t", 3), ("t", 4), ("t", 0), ("t", 1)]  # dirty, recheck, then named
    # checked at the arrival: nothing marked since, nothing to look at again (the recheck
    # partition included: it was looked at by the arrival)
    assert cache.to_check_again(s) == []
    cache.mark_changed([("t", 2), ("t", 4)])
    assert sorted(tp for tp, _ in cache.to_check_again(s)) == [("t", 2), ("t", 4)]
    assert cache.to_check_again(s) == []  # taken by the last look
    # the dirty set is not taken by the checks: the answer still names what changed
    assert {tp for tp, _ in cache.to_evaluate(s, [], take_dirty=True)} == {
        ("t", 2),
        ("t", 3),
        ("t", 4),
    }


def test_checked_partitions_need_no_second_look_but_later_marks_stay():
    """A fetch's arrival marks what its recorded positions moved, then checks the partitions
    it evaluates (`checked`): those marks need no second look by the parked fetch; marks of
    other partitions, and marks made after, do."""
    cache, _clock = _cache()
    s = cache.create(2, 5)
    assert s is not None
    cache.update(s, {("t", p): ST for p in range(4)}, [])
    cache.to_check(s, [("t", 0), ("t", 1)])
    cache.mark_changed([("t", 0), ("t", 1), ("t", 3)])  # (the positions' HW moves, and another)
    cache.checked(s, [("t", 0), ("t", 1)])
    cache.mark_changed([("t", 1)])  # after the check: looked at again
    assert sorted(tp for tp, _ in cache.to_check_again(s)) == [("t", 1), ("t", 3)]
    # the dirty set is not touched: the answer still names all of them
    assert {tp for tp, _ in cache.to_evaluate(s, [], take_dirty=True)} == {
        ("t", 0),
        ("t", 1),
        ("t", 3),
    }


def test_record_answers_names_changes_and_keeps_the_rechecks():
    rows = [
        (("t", 0), 5, 0, False, True),
        (("t", 1), 5, 0, True, False),  # an error: always named, never rechecked
        (("t", 2), 5, 0, False, False),
        (("t", 9), 5, 0, False, True),  # not in the session: not named, not rechecked
        (("t", 0), 5, 0, False, True),  # the same HW again: not named
    ]
    cache, _ = _cache()
    s = cache.create(2, 5)
    assert s is not None
    cache.update(s, {("t", p): ST for p in range(3)}, [])
    cache.record_answers(s, [(("t", 2), 1, 0, False, True)])  # rechecked until answered without
    assert s.recheck == {("t", 2)}
    assert cache.record_answers(s, rows) == [True, True, True, False, False]
    assert s.recheck == {("t", 0)}
    sent = [(sp.sent_high_watermark, sp.sent_log_start_offset) for sp in s.partitions.values()]
    assert sent == [(5, 0), (-2, -2), (5, 0)]  # (after an error nothing counts as sent)
