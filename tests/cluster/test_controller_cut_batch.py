"""A leader dies in the middle of replicating one big CreateTopics: the voter that takes over
holds — and commits — only a prefix of that request's records. No voter and no observer may
ever apply that prefix (controller/metadata/batches.py), and the topic names stay free.

How the cut is made with real processes: both followers are paused (SIGSTOP), so the leader can
send each of them at most `max_inflight` (16) AppendEntries of 512 entries without an answer; a
request of 9,000+ records is longer than that. Once what reached the followers' sockets stops
growing (`ss` Recv-Q), the leader is SIGKILLed and the followers resumed.
"""

from __future__ import annotations

import shutil
import socket
import subprocess

import pytest
from helpers import wait_until

from client.protocol.api_keys import ApiKey
from client.protocol.framing import encode_request
from controller.metadata import BatchAssembler, Topic

pytestmark = pytest.mark.slow

TOPICS, PARTITIONS = 900, 9  # 9,000 records + BatchBegin > 16 x 512 entries


def recv_queue(port: int) -> int:
    """Bytes waiting unread in the sockets accepted on `port` (a paused process's inbox)."""
    out = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout
    return sum(int(line.split()[0]) for line in out.splitlines() if line.strip())


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs `ss` (iproute2) to see socket queues")
def test_a_batch_cut_short_by_a_leader_crash_is_never_applied(controller_quorum):
    q = controller_quorum()
    q.start_all()
    first = q.wait_leader(5, "a leader")
    q.add_brokers(1, 2, 3)
    observer = q.start_observer(replica_id=100)
    hw = q.high_watermark(first)
    wait_until(lambda: all(q.high_watermark(n) == hw for n in q.ids), 5, "voters caught up")
    wait_until(lambda: observer.image.offset == hw - 1, 5, "observer caught up")
    followers = [n for n in q.ids if n != first]

    for f in followers:
        q.pause(f)
    names = [f"cut-{i:03d}" for i in range(TOPICS)]
    body = {
        "topics": [
            {"name": n, "num_partitions": PARTITIONS, "replication_factor": 3} for n in names
        ],
        "timeout_ms": 30_000,
    }
    client = socket.create_connection(("127.0.0.1", q.ports[first]), timeout=10)
    try:
        client.sendall(encode_request(ApiKey.CREATE_TOPICS, 0, 1, "cut-test", body))

        def leader_appended() -> bool:
            d = q.describe(first) or {}
            own = [v for v in d.get("voters", []) if v["replica_id"] == first]
            return bool(own) and own[0]["log_end_offset"] >= hw + TOPICS * (1 + PARTITIONS)

        wait_until(leader_appended, 10, "the leader appended the whole request")
        last: dict[int, int] = {}

        def sent_all_it_may() -> bool:
            now = {f: recv_queue(q.ports[f]) for f in followers}
            settled = now == last and all(v > 0 for v in now.values())
            last.update(now)
            return settled

        wait_until(sent_all_it_may, 10, "the followers' inboxes stop growing", interval=0.05)
        q.kill(first)
    finally:
        client.close()
    for f in followers:
        q.resume(f)

    second = q.wait_leader(5, "a new leader among the resumed followers")
    wait_until(lambda: q.high_watermark(second) > hw, 5, "the new leader's commit")
    _, records, _ = q.committed(second)
    cut = {r.name for o, r in records if isinstance(r, Topic) and o >= hw}
    print(f"the new leader committed {len(cut)} of the {TOPICS} topics' Topic records")
    assert cut, "part of the request reached the new leader (committed by its NOOP)"
    assert len(cut) < TOPICS, "only part of it (the leader could not send the rest)"
    # Committed, yet applied nowhere: the batch is still open.
    for n in followers:
        assert not cut & set(q.image(n).topics), f"voter {n} applied a cut batch"

    # The next write is a new batch: every reader drops the cut one for good.
    q.register(104)
    final = q.image(second)
    assert not cut & set(final.topics) and 104 in final.brokers
    for n in followers:
        _, records, _ = q.committed(n)
        batches = BatchAssembler()
        for offset, rec in records:
            batches.feed(offset, rec)
        assert batches.dropped > len(cut), f"voter {n} dropped the cut batch"
        assert q.image(n) == final
    wait_until(lambda: observer.image == final, 10, "the observer has the same image")

    # The names are free on the active controller; the old leader rejoins and agrees.
    q.create_topics(sorted(cut)[:3], partitions=2, rf=3)
    q.start(first)
    wait_until(lambda: q.image(first) == q.image(second), 10, "the old leader caught up")
