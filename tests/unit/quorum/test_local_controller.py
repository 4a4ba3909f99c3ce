"""LocalController: the combined-mode wiring (log + controller thread + loader)."""

from __future__ import annotations

import threading

from controller.quorum.local import LocalController


def test_local_controller_end_to_end(tmp_path):
    lc = LocalController(str(tmp_path), None, snapshot_every_records=4)
    published = []
    threads = set()

    def publisher(image, delta):
        published.append((image.offset, None if delta is None else set(delta.created_topics)))
        threads.add(threading.current_thread().name)

    lc.loader.subscribe(publisher)
    lc.start()
    reg = lc.submit(lambda c: c.cluster.register_broker(1, "127.0.0.1", 9092)).result(5)
    offset = lc.image.offset
    hb = lc.submit(lambda c: c.cluster.broker_heartbeat(1, reg["broker_epoch"], offset)).result(5)
    assert not hb["is_fenced"]
    topics = [{"name": f"t{i}", "num_partitions": 1, "replication_factor": 1} for i in range(3)]
    res = lc.submit(lambda c: c.replication.create_topics(topics)).result(5)
    assert [r["error_code"] for r in res] == [0, 0, 0]
    assert {"t0", "t1", "t2"} <= set(lc.image.topics)
    assert lc.image == lc.controller.image
    assert threads == {"controller"}, "subscribers run on the controller thread"
    assert any(d == {"t0", "t1", "t2"} for _, d in published)
    assert lc.log.latest_snapshot() is not None
    lc.stop()
    again = LocalController(str(tmp_path))
    assert set(again.start().topics) == {"t0", "t1", "t2"}
    assert again.controller.image == again.image
    again.stop()
