"""ReplicaFetcherThread._fetch_once on a real follower (logs, flusher, replica manager), its
leader's answers handed over by a fake connection as LeaderConnection returns them (decoded,
then checked): records are appended from the whole batches only, flushed before the next
fetch, which asks from the new end; a corrupt or diverging answer is handled for its own
partition alone; throttled partitions count their bytes."""

from __future__ import annotations

import time

import msgpack
import pytest
from test_replica_manager import TID, Harness

from broker.replica.fetcher import (
    LEADER_BEHIND_BACKOFF_MS,
    FetcherSettings,
    ReplicaFetcherThread,
    partition_backoff_ms,
)
from broker.replica.follower import whole_end
from broker.replica.throttle import ReplicationThrottle
from client.errors import CorruptRecordError, ErrorCode
from client.protocol import API_SPECS, ApiKey
from client.protocol.fast_checks import fetch_response
from client.protocol.framing import decode_response
from client.records import build_batch
from client.records.header import set_partition_leader_epoch
from controller.metadata.records import Partition as PartitionRecord
from controller.metadata.records import Topic

EPOCH = 2
N = 3


def _batch(base: int, n: int = 3, epoch: int = EPOCH) -> bytes:
    b = bytearray(build_batch([(None, b"v%d" % i) for i in range(n)], base_offset=base))
    set_partition_leader_epoch(b, epoch)
    return bytes(b)


class FakeLeader:
    """Answers each Fetch with the next queued body, decoded and checked as LeaderConnection
    does; keeps the requests."""

    def __init__(self) -> None:
        self.answers: list[dict] = []
        self.requests: list[dict] = []

    def request(self, api_key: int, body: dict) -> dict:
        assert api_key == ApiKey.FETCH
        self.requests.append(body)
        raw = decode_response(msgpack.packb([1, self.answers.pop(0)], use_bin_type=True))[1]
        checked = API_SPECS[api_key].response.check(raw, 0)  # the schema walk alone
        assert fetch_response(raw) is raw and raw == checked  # the fast check's answer
        return raw

    def close(self) -> None:
        pass


def _answer(*parts: dict, session_id: int = 7) -> dict:
    return {
        "error_code": 0,
        "session_id": session_id,
        "topics": [{"name": "t", "partitions": list(parts)}],
        "throttle_time_ms": 0,
    }


def _part(p: int, records: bytes = b"", hw: int = 0, **more: object) -> dict:
    return {
        "partition": p,
        "error_code": 0,
        "high_watermark": hw,
        "last_stable_offset": hw,
        "log_start_offset": 0,
        "records": records,
        **more,
    }


@pytest.fixture
def follower(tmp_path):
    h = Harness(tmp_path)
    h.rm.table.node_id = 2
    h.replay(
        Topic("t", TID),
        *(PartitionRecord(TID, p, (1, 2), (1, 2), 1, EPOCH, 0) for p in range(N)),
    )
    yield h
    h.close()


def _thread(h, throttle: ReplicationThrottle | None = None):
    thread = ReplicaFetcherThread(
        "fetcher-test", 2, 1, h.rm, lambda _id: None, FetcherSettings(backoff_ms=60_000), throttle
    )
    for p in range(N):
        thread.add(("t", p), EPOCH)
    leader = FakeLeader()
    thread._conn = leader
    return thread, leader


def _asked(body: dict) -> dict[int, int]:
    return {p["partition"]: p["fetch_offset"] for t in body["topics"] for p in t["partitions"]}


def test_an_answer_is_appended_flushed_and_the_next_fetch_asks_from_the_new_end(follower):
    thread, leader = _thread(follower)
    two = _batch(0) + _batch(3)
    leader.answers.append(
        _answer(
            _part(0, _batch(0), hw=0),
            _part(1, two[: len(two) - 5], hw=6),  # a size-limited read: the second cut short
            _part(2),
        )
    )
    assert thread._fetch_once()
    logs = [follower.rm.get_partition("t", p).log for p in range(N)]
    assert [log.end_offset for log in logs] == [3, 3, 0]
    assert [log.flushed_offset for log in logs] == [3, 3, 0]  # before the next fetch
    assert follower.rm.get_partition("t", 1).high_watermark == 3  # never above its end
    assert thread.bytes_fetched == 2 * len(_batch(0))
    assert [thread._parts[("t", p)].behind for p in range(N)] == [False, True, False]
    leader.answers.append(_answer())
    assert thread._fetch_once()
    assert _asked(leader.requests[-1]) == {0: 3, 1: 3}  # p2 unchanged: not named again
    assert leader.requests[-1]["session_epoch"] == 1


def test_a_batch_size_below_the_header_backs_off_its_partition_alone(follower):
    thread, leader = _thread(follower)
    bad = bytearray(_batch(0))
    bad[8:12] = (-12).to_bytes(4, "big", signed=True)  # a walk by this size would not move
    leader.answers.append(_answer(_part(0, bytes(bad)), _part(1, _batch(0), hw=3)))
    assert thread._fetch_once()
    assert follower.rm.get_partition("t", 0).log.end_offset == 0
    assert thread._parts[("t", 0)].delayed_until > time.monotonic()
    assert follower.rm.get_partition("t", 1).log.end_offset == 3
    assert thread._parts[("t", 1)].delayed_until == 0.0


def test_whole_end_stops_at_a_partial_tail_and_refuse_sizes_below_the_header():
    two = _batch(0) + _batch(3)
    assert whole_end(two) == len(two)
    assert whole_end(two[:-1]) == len(_batch(0))
    assert whole_end(two[:40]) == 0 and whole_end(b"") == 0
    bad = bytearray(two)
    bad[len(_batch(0)) + 8 : len(_batch(0)) + 12] = (20).to_bytes(4, "big")  # size 32
    with pytest.raises(CorruptRecordError):
        whole_end(bytes(bad))


def test_a_diverging_answer_truncates_and_fetches_on_from_the_new_end(follower):
    thread, leader = _thread(follower)
    log = follower.rm.get_partition("t", 0).log
    log.append_as_follower(_batch(0, epoch=1))  # records of an epoch the leader never had
    leader.answers.append(_answer(_part(0, diverging_epoch=-1, diverging_end_offset=0)))
    assert thread._fetch_once()
    assert log.end_offset == 0
    assert thread._parts[("t", 0)].delayed_until == 0.0  # its position moved: no back-off
    leader.answers.append(_answer(_part(0, _batch(0), hw=3)))
    assert thread._fetch_once()
    assert _asked(leader.requests[-1])[0] == 0 and log.end_offset == 3


def test_throttled_partitions_count_their_bytes_and_the_others_do_not(follower):
    throttle = ReplicationThrottle()
    throttle.set_rate(10_000_000)
    throttle.set_throttled(("t", 1), True)
    thread, leader = _thread(follower, throttle)
    leader.answers.append(_answer(_part(0, _batch(0)), _part(1, _batch(0))))
    assert thread._fetch_once()
    assert throttle.bytes_throttled == len(_batch(0))
    body = leader.requests[-1]
    sizes = {
        p["partition"]: p["partition_max_bytes"] for t in body["topics"] for p in t["partitions"]
    }
    assert sizes[1] == 100_000 and sizes[0] == FetcherSettings().partition_max_bytes


def test_a_leader_behind_on_metadata_is_asked_again_soon_a_fenced_follower_backs_off(follower):
    """A new topic's follower that heard of it before its leader gets UNKNOWN_TOPIC_OR_PARTITION
    (or NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH) from it: that partition is fetched again
    after LEADER_BEHIND_BACKOFF_MS, not replica.fetch.backoff.ms (60 s in this harness; 1 s by
    default held every acks=all write to a new topic for up to that long); FENCED_LEADER_EPOCH
    (the follower is the one behind) still backs off for replica.fetch.backoff.ms."""
    thread, leader = _thread(follower)
    unknown, fenced = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH
    leader.answers.append(
        _answer(
            _part(0, error_code=int(unknown), hw=-1),
            _part(1, error_code=int(fenced), hw=-1),
            _part(2, _batch(0), hw=3),
        )
    )
    before = time.monotonic()
    assert thread._fetch_once()
    after = time.monotonic()
    st = [thread._parts[("t", p)] for p in range(N)]
    assert before < st[0].delayed_until <= after + LEADER_BEHIND_BACKOFF_MS / 1000
    assert st[0].leader_behind == 1
    assert st[1].delayed_until >= before + 60 and st[1].leader_behind == 0
    assert st[2].delayed_until == 0.0
    st[0].delayed_until = 0.0  # (due now: fetched again; the leader's session still holds it)
    leader.answers.append(_answer(_part(0, _batch(0), hw=3)))
    assert thread._fetch_once()
    assert follower.rm.get_partition("t", 0).log.end_offset == 3
    assert st[0].leader_behind == 0  # it answered for the partition: the doubling starts over


def test_the_leader_behind_back_off_doubles_in_a_row_up_to_replica_fetch_backoff_ms():
    behind = [partition_backoff_ms(ErrorCode.NOT_LEADER_OR_FOLLOWER, n, 1000) for n in range(9)]
    assert behind == [10, 20, 40, 80, 160, 320, 640, 1000, 1000]
    assert partition_backoff_ms(ErrorCode.UNKNOWN_LEADER_EPOCH, 1000, 1000) == 1000
    assert partition_backoff_ms(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0, 5) == 5
    assert partition_backoff_ms(ErrorCode.FENCED_LEADER_EPOCH, 0, 1000) == 1000
    assert partition_backoff_ms(ErrorCode.LEADER_NOT_AVAILABLE, 0, 1000) == 1000
    assert partition_backoff_ms(0, 0, 1000) == 1000  # a local failure


class _Unreachable:
    def request(self, api_key: int, body: dict) -> dict:
        raise ConnectionError("leader unreachable")

    def close(self) -> None:
        pass


def test_a_round_with_only_backed_off_partitions_waits_for_the_first_to_be_due(follower):
    """Nothing to ask: the thread sleeps until the first backed-off partition may go (it slept
    replica.fetch.backoff.ms, 60 s here, whatever the partitions' back-offs); a leader that
    cannot be reached still makes it wait replica.fetch.backoff.ms."""
    thread, leader = _thread(follower)
    now = time.monotonic()
    for p, seconds in enumerate((30.0, 5.0, 100.0)):
        thread._parts[("t", p)].delayed_until = now + seconds
    assert not thread._fetch_once()
    assert leader.requests == []
    assert 4.0 < thread._idle_wait() <= 5.0
    thread._parts[("t", 1)].delayed_until = 0.0  # due: asked, and the leader is unreachable
    thread._conn = _Unreachable()  # type: ignore[assignment]
    assert not thread._fetch_once()
    assert thread._idle_wait() == 60.0


class _Watched(dict):
    """A fetcher's partition states, noting each look while `watching` (one key, or "all")."""

    def __init__(self, states, seen, watching):
        super().__init__(states)
        self.seen, self.watching = seen, watching

    def items(self):
        if self.watching[0]:
            self.seen.append("all")
        return super().items()

    def get(self, key, default=None):
        if self.watching[0]:
            self.seen.append(key)
        return super().get(key, default)


def _counting_lookups(h, thread):
    """The partitions `thread` looks at (its states, the replica manager's partitions) while
    it builds its requests ("all": every one; applying an answer looks at the answered ones
    too, not counted)."""
    seen: list = []
    building = [False]
    get = h.rm.get_partition
    build = thread._build
    thread._parts = _Watched(thread._parts, seen, building)

    def counting(topic, partition):
        if building[0]:
            seen.append(("rm", topic, partition))
        return get(topic, partition)

    def counted_build():
        building[0] = True
        try:
            return build()
        finally:
            building[0] = False

    h.rm.get_partition = counting
    thread._build = counted_build
    return seen


def test_a_round_looks_again_only_at_the_partitions_touched_since_the_last(follower):
    """A round builds its request from the last one: only the partitions answered (or added,
    removed, due after a back-off) are looked at again, not every partition of the leader."""
    thread, leader = _thread(follower)
    leader.answers.append(_answer())
    assert thread._fetch_once()  # the full fetch: every partition
    assert leader.requests[-1]["session_epoch"] == 0 and len(_asked(leader.requests[-1])) == N
    seen = _counting_lookups(follower, thread)
    leader.answers.append(_answer(_part(1, _batch(0), hw=0)))
    assert thread._fetch_once()  # incremental, nothing touched yet: no partition looked at
    assert seen == [] and _asked(leader.requests[-1]) == {}
    leader.answers.append(_answer())
    assert thread._fetch_once()  # p1 was answered: looked at again, and asked from its end
    assert seen == [("t", 1), ("rm", "t", 1)] and _asked(leader.requests[-1]) == {1: 3}
    thread.remove(("t", 2))
    leader.answers.append(_answer())
    assert thread._fetch_once()
    assert leader.requests[-1]["forgotten_topics"] == [{"name": "t", "partitions": [2]}]
    assert ("t", 2) not in thread._asked


def test_a_backed_off_partition_is_forgotten_then_asked_again_once_due(follower):
    thread, leader = _thread(follower)
    leader.answers.append(_answer(_part(0, error_code=int(ErrorCode.NOT_LEADER_OR_FOLLOWER))))
    assert thread._fetch_once()  # p0 backs off (LEADER_BEHIND_BACKOFF_MS)
    leader.answers.append(_answer())
    assert thread._fetch_once()
    assert leader.requests[-1]["forgotten_topics"] == [{"name": "t", "partitions": [0]}]
    deadline = time.monotonic() + 10
    while 0 not in _asked(leader.requests[-1]):  # named again once its back-off ends
        assert time.monotonic() < deadline, "a backed-off partition was never asked again"
        leader.answers.append(_answer())
        assert thread._fetch_once()
    assert leader.requests[-1]["session_epoch"] > 0  # by an incremental request


def test_a_partition_not_known_here_yet_is_looked_at_each_round_until_it_is(follower):
    """A follower may hear of a partition from the fetcher manager before its replica manager
    holds it: it is not asked, and every round looks again, as a look at every partition did."""
    thread, leader = _thread(follower)
    thread.add(("t", N), EPOCH)  # not in the metadata yet
    leader.answers.append(_answer())
    assert thread._fetch_once()
    assert N not in _asked(leader.requests[-1])
    leader.answers.append(_answer())
    assert thread._fetch_once()
    assert N not in _asked(leader.requests[-1])
    follower.replay(PartitionRecord(TID, N, (1, 2), (1, 2), 1, EPOCH, 0))
    leader.answers.append(_answer())
    assert thread._fetch_once()
    assert _asked(leader.requests[-1]) == {N: 0}
