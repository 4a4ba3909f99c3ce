"""A group member in its own process, for the SIGKILL test: consumes TOPIC in GROUP,
committing after each processed poll, and prints one JSON line per event on stdout
(`assign`, `revoke`, `commit` with the offsets just committed)."""

from __future__ import annotations

import json
import sys

from client import Consumer


def main() -> None:
    bootstrap, topic, group = sys.argv[1:4]

    def say(**kw: object) -> None:
        print(json.dumps(kw), flush=True)

    c = Consumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest",
    )  # fmt: skip
    c.subscribe(
        [topic],
        on_assign=lambda ps: say(event="assign", partitions=[p.partition for p in ps]),
        on_revoke=lambda ps: say(event="revoke", partitions=[p.partition for p in ps]),
    )
    while True:
        records = c.poll(timeout_ms=200)
        if records:
            offsets: dict[int, int] = {}
            for r in records:
                offsets[r.partition] = r.offset + 1
            c.commit()
            say(event="commit", offsets=offsets)


if __name__ == "__main__":
    main()
