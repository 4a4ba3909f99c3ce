"""Failover across broker processes (issue 11): 3 `gregor controller` + 3 `gregor broker`
processes on loopback, topics with replication factor 3 and min.insync.replicas 2.

- divergence: a leader with records its followers never fetched (acks=1, followers paused) is
  killed; the new leader writes other records at those offsets; the old leader comes back as
  a follower and truncates its unreplicated records (KIP-320's diverging epoch), and once it
  leads again (a preferred election through ElectLeaders) its log holds exactly what the
  others hold. No consumer ever saw the unreplicated records: they were above the HW.
- truncation detection: after an unclean election (ElectLeaders, type unclean) gives the
  partition an out-of-sync leader, a consumer whose position is past where the new leader's
  log diverges raises LogTruncationError under auto.offset.reset=none, and goes on from the
  divergence point (with a warning) under earliest; it never skips or re-reads silently.
- controlled shutdown (SIGTERM) of each broker in turn under acks=all load: the producer sees
  no error at all (leadership moves first; at most retriable errors, retried), every
  acknowledged value is read back at its offset, none twice (idempotence), and the ISR returns
  to 3 after each restart.
"""

from __future__ import annotations

import signal

import pytest
from cluster_history import Load, check_history
from helpers import known_partitions, poll_n, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import GregorError, LogTruncationError


def _describe(bootstrap: str, topic: str) -> list:
    with Admin(bootstrap_servers=bootstrap) as admin:
        return admin.describe_topic(topic).partitions


def _leader(bootstrap: str, topic: str) -> int | None:
    """The leader of partition 0 as `bootstrap` sees it (None while describing fails, e.g.
    while its metadata still names a dead leader)."""
    try:
        with Admin(bootstrap_servers=bootstrap, request_timeout_ms=2000) as admin:
            return admin.describe_topic(topic).partitions[0].leader
    except GregorError:
        return None


def _wait_isr(b, topic: str, timeout: float = 30.0) -> list:
    return wait_until(
        lambda: (
            lambda ps: ps if ps and all(p.leader >= 0 and len(p.isr) == 3 for p in ps) else None
        )(known_partitions(b.bootstrap_all(), topic)),
        timeout,
        f"every partition of {topic} with a leader and an ISR of 3",
    )


def _read(bootstrap: str, tp: TopicPartition, n: int) -> list:
    with Consumer(bootstrap_servers=bootstrap) as c:
        c.assign([tp])
        c.seek_to_beginning()
        return poll_n(c, n, timeout=60)


@pytest.mark.slow
def test_old_leader_truncates_records_it_alone_had(broker_cluster) -> None:
    # a lag time well above the pause below, so the paused followers stay in the ISR and one
    # of them can take over; a session timeout the pause stays well within
    _q, b = broker_cluster(session_ms=6000, replica_lag_time_max_ms=20_000)
    tp = TopicPartition("d", 0)
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        admin.create_topic("d", 1, 3, {"min.insync.replicas": "2"})
    (d,) = _wait_isr(b, "d")
    old = d.leader
    assert old == d.replicas[0]  # the preferred replica leads a new topic
    followers = [r for r in d.replicas if r != old]
    with Producer(bootstrap_servers=b.bootstrap_all(), acks="all", linger_ms=2) as prod:
        base = [prod.send("d", b"base-%03d" % i, partition=0) for i in range(100)]
        assert [f.result(30).offset for f in base] == list(range(100))

    for r in followers:
        b.pause(r)
    try:
        with Producer(bootstrap_servers=b.bootstrap(old), acks=1, linger_ms=2) as prod:
            # A follower paused while its fetch was parked at the leader still gets the answer
            # to that fetch (in its socket buffer) when it resumes: this first record completes
            # those parked fetches, so whether a follower has it is settled before the rest.
            assert prod.send("d", b"in-flight", partition=0).result(30).offset == 100
            lone = [prod.send("d", b"unreplicated-%03d" % i, partition=0) for i in range(50)]
            assert [f.result(30).offset for f in lone] == list(range(101, 151))
        # the old leader has 151 records, but its HW stays at 100: consumers see 100
        (d,) = _describe(b.bootstrap(old), "d")
        assert d.high_watermark == 100
        seen = _read(b.bootstrap(old), tp, 100)
        with Consumer(bootstrap_servers=b.bootstrap(old)) as c:
            c.assign([tp])
            c.seek(tp, 100)
            assert c.poll(timeout_ms=300) == []
        assert [r.value for r in seen] == [b"base-%03d" % i for i in range(100)]
        b.stop(old, signal.SIGKILL)
    finally:
        for r in followers:
            b.resume(r)

    d = wait_until(
        lambda: (lambda p: p if p.leader in followers else None)(
            _describe(b.bootstrap_all(), "d")[0]
        ),
        60,
        "a new leader among the followers",
    )
    with Producer(bootstrap_servers=b.bootstrap_all(), acks="all", linger_ms=2) as prod:
        new = [prod.send("d", b"new-%03d" % i, partition=0) for i in range(30)]
        offsets = [f.result(60).offset for f in new]
    start = offsets[0]
    assert start in (100, 101) and offsets == list(range(start, start + 30))
    expected = [r.value for r in _read(b.bootstrap_all(), tp, start + 30)]
    assert not any(v.startswith(b"unreplicated") for v in expected)

    b.start(old)
    _wait_isr(b, "d", 60)
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        res = admin.elect_leaders([tp])
    assert res == {tp: None}, res
    wait_until(
        lambda: _describe(b.bootstrap(old), "d")[0].leader == old, 30, "the old leader leads"
    )
    with Producer(bootstrap_servers=b.bootstrap(old), acks="all", linger_ms=2) as prod:
        assert prod.send("d", b"after", partition=0).result(30).offset == start + 30
    got = [r.value for r in _read(b.bootstrap(old), tp, start + 31)]
    assert got == [*expected, b"after"], "the old leader kept records it alone had"


@pytest.mark.slow
def test_consumers_detect_truncation_after_an_unclean_election(broker_cluster) -> None:
    _q, b = broker_cluster()
    tp = TopicPartition("tr", 0)
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        admin.create_topic("tr", 1, 2, {"min.insync.replicas": "1"})
    d = wait_until(
        lambda: (lambda p: p if p.leader >= 0 and len(p.isr) == 2 else None)(
            _describe(b.bootstrap_all(), "tr")[0]
        ),
        30,
        "tr-0 with an ISR of 2",
    )
    first, second = d.leader, next(r for r in d.replicas if r != d.leader)
    with Producer(bootstrap_servers=b.bootstrap_all(), acks="all", linger_ms=2) as prod:
        early = [prod.send("tr", b"early-%02d" % i, partition=0) for i in range(50)]
        assert [f.result(30).offset for f in early] == list(range(50))
    b.stop(second, signal.SIGKILL)
    wait_until(lambda: _describe(b.bootstrap(first), "tr")[0].isr == [first], 30, "ISR [first]")
    with Producer(bootstrap_servers=b.bootstrap(first), acks="all", linger_ms=2) as prod:
        late = [prod.send("tr", b"late-%02d" % i, partition=0) for i in range(50)]
        assert [f.result(30).offset for f in late] == list(range(50, 100))

    strict = Consumer(bootstrap_servers=b.bootstrap_all(), auto_offset_reset="none")
    lenient = Consumer(bootstrap_servers=b.bootstrap_all(), auto_offset_reset="earliest")
    try:
        for c in (strict, lenient):
            c.assign([tp])
            c.seek(tp, 0)
            assert len(poll_n(c, 100, timeout=30)) == 100
        # the only in-sync replica dies; the other comes back: offline until an unclean election
        b.stop(first, signal.SIGKILL)
        b.start(second)
        wait_until(lambda: _leader(b.bootstrap(second), "tr") == -1, 30, "tr-0 offline")
        with Admin(bootstrap_servers=b.bootstrap(second)) as admin:
            assert admin.elect_leaders([tp]) != {tp: None}  # preferred: not possible
            assert admin.elect_leaders([tp], election_type="unclean") == {tp: None}
        wait_until(lambda: _leader(b.bootstrap(second), "tr") == second, 30, "new leader")
        with Producer(bootstrap_servers=b.bootstrap(second), acks="all", linger_ms=2) as prod:
            after = [prod.send("tr", b"after-%02d" % i, partition=0) for i in range(10)]
            assert [f.result(30).offset for f in after] == list(range(50, 60))

        def strict_raises() -> LogTruncationError | None:
            try:
                assert strict.poll(timeout_ms=200) == []
            except LogTruncationError as exc:
                return exc
            return None

        exc = wait_until(strict_raises, 30, "LogTruncationError from the strict consumer")
        assert exc.divergent_offset == 50 and "position 100" in str(exc)
        got = poll_n(lenient, 10, timeout=30)
        assert [(r.offset, r.value) for r in got] == [
            (50 + i, b"after-%02d" % i) for i in range(10)
        ]
        strict.seek(tp, 50)  # the user decides: go on from the divergence point
        assert [r.value for r in poll_n(strict, 10, timeout=30)][-1] == b"after-09"
    finally:
        strict.close()
        lenient.close()


@pytest.mark.slow
def test_controlled_shutdown_of_each_broker_under_load(broker_cluster) -> None:
    _q, b = broker_cluster()
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        admin.create_topic("cs", 3, 3, {"min.insync.replicas": "2"})
    _wait_isr(b, "cs")
    load = Load(b.bootstrap_all(), "cs", 3, batch=50)
    try:
        for n in sorted(b.procs):
            load.wait_acked(500)
            assert b.stop(n, signal.SIGTERM) == 0, b.stderr()
            b.start(n)
            _wait_isr(b, "cs", 60)
            load.wait_acked(500)  # load running again
    finally:
        load.stop()
    # no send failed; idempotence (the default): retries across leader moves stored nothing
    # twice
    check_history(b.bootstrap_all(), load, every_send_acked=True)


@pytest.mark.slow
def test_a_retry_after_failover_is_a_duplicate_on_the_new_leader(broker_cluster) -> None:
    """Issue 12 (broker side) on the cluster: producer ids come from the remote controller
    quorum's blocks; followers keep the producer state they replicate, so the retry of an
    acknowledged idempotent batch sent to the new leader after a SIGKILL of the old one is
    answered with the original offset and stored once."""
    from helpers import RawClient

    from client.protocol import ApiKey
    from client.records import build_batch

    _q, b = broker_cluster()
    with Admin(bootstrap_servers=b.bootstrap_all()) as admin:
        admin.create_topic("idem", 1, 3, {"min.insync.replicas": "2"})
    (d,) = _wait_isr(b, "idem")

    def send(node: int, seq: int, value: bytes) -> dict:
        batch = build_batch([(None, value)], producer_id=pid, producer_epoch=0, base_sequence=seq)
        body = {
            "acks": -1,
            "timeout_ms": 10_000,
            "topics": [{"name": "idem", "partitions": [{"partition": 0, "records": batch}]}],
        }
        host, port = b.bootstrap(node).split(":")
        with RawClient((host, int(port))) as c:
            return c.request(ApiKey.PRODUCE, 0, body)["topics"][0]["partitions"][0]

    host, port = b.bootstrap(d.leader).split(":")
    with RawClient((host, int(port))) as c:
        resp = c.request(ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None})
    assert resp["error_code"] == 0, resp
    pid = resp["producer_id"]
    offsets = [send(d.leader, i, b"v%d" % i)["base_offset"] for i in range(5)]
    assert offsets == list(range(5))
    b.stop(d.leader, signal.SIGKILL)
    new = wait_until(
        lambda: (lambda p: p if p not in (-1, d.leader, None) else None)(
            _leader(b.bootstrap_all(), "idem")
        ),
        30,
        "a new leader",
    )
    again = send(new, 4, b"v4")  # the producer never heard the last answer: it retries
    assert (again["error_code"], again["base_offset"]) == (0, 4), again
    assert send(new, 5, b"v5")["base_offset"] == 5
    got = _read(b.bootstrap(new), TopicPartition("idem", 0), 6)
    assert [r.value for r in got] == [b"v%d" % i for i in range(6)]
