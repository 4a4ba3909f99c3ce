"""A group member in its own process for the rebalance storm (tests/faults/test_group_storm.py):
consumes TOPIC in GROUP, committing after each processed poll, and prints one JSON line per
event with a CLOCK_MONOTONIC timestamp: `assign`/`revoke`/`lost` (partitions), `read`
(partition, first and last offset of what one poll returned for it), `commit`. SIGTERM closes
the consumer (commit, on_revoke, leave); SIGKILL is the crash."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time

from client import Consumer


def main() -> None:
    bootstrap, topic, group, name = sys.argv[1:5]
    out_lock = threading.Lock()

    def say(**kw: object) -> None:
        with out_lock:
            print(json.dumps({"t": time.monotonic(), "member": name, **kw}), flush=True)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    c = Consumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest",
    )  # fmt: skip
    c.subscribe(
        [topic],
        on_assign=lambda ps: say(event="assign", partitions=[p.partition for p in ps]),
        on_revoke=lambda ps: say(event="revoke", partitions=[p.partition for p in ps]),
        on_lost=lambda ps: say(event="lost", partitions=[p.partition for p in ps]),
    )
    say(event="started")
    while not stop.is_set():
        records = c.poll(timeout_ms=100)
        if not records:
            continue
        ranges: dict[int, list[int]] = {}
        for r in records:
            span = ranges.setdefault(r.partition, [r.offset, r.offset])
            span[1] = r.offset
        say(event="read", ranges=ranges)
        try:
            c.commit()
            say(event="commit")
        except Exception as exc:  # refused after being fenced: the records are re-read
            say(event="commit_failed", error=repr(exc))
    c.close()
    say(event="closed")


if __name__ == "__main__":
    main()
