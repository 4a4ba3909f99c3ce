"""The client library does not change its host process (issue 10, item 12).

A fresh interpreter records every call to the gc functions a library could use to speed itself
up (disable/enable/freeze/unfreeze/set_threshold), then produces and consumes 50,000 records
against a real `gregor server` twice: with the collector enabled, and after disabling it as an
application may. No gc call is made, and the application's own gc.disable() stays in force.
"""

from __future__ import annotations

import subprocess
import sys

_CHILD = """
import gc, sys
calls = []
for name in ("disable", "enable", "freeze", "unfreeze", "set_threshold"):
    real = getattr(gc, name)
    setattr(gc, name, (lambda real, name: lambda *a: (calls.append(name), real(*a))[1])(real, name))
from client import Admin, Consumer, Producer, TopicPartition
bootstrap = sys.argv[1]


def round_trip(topic):
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic(topic, partitions=2)
    with Producer(bootstrap_servers=bootstrap, linger_ms=2) as p:
        values = [b"%06d" % i for i in range(25_000)]
        assert p.send_many(topic, values, partition=0).result(60) == 25_000
        for i in range(25_000):
            p.send(topic, b"x%d" % i, key=b"k%d" % (i % 7), partition=1)
        p.flush(60)
    got = 0
    with Consumer(bootstrap_servers=bootstrap) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        while got < 50_000:
            got += len(c.poll(timeout_ms=1000))


round_trip("gc-on")  # the collector as the application left it: enabled
assert calls == [] and gc.isenabled(), calls
gc.disable()
calls.clear()  # the application's own choice
round_trip("gc-off")
assert calls == [], calls
assert not gc.isenabled()
print("ok")
"""


def test_produce_and_consume_leave_the_gc_alone(gregor_process) -> None:
    gp = gregor_process()
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, gp.bootstrap],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
