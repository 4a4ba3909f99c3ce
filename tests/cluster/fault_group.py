"""The group half of the fault harness's workload (CHECKER.md, "Workload": "a group of 2
consumers committing after each poll, logging generation, assignment, polled offsets and each
commit's outcome"): members of one consumer group (KIP-848, the broker assigns) in threads of
the harness, each polling, recording what it read, then committing synchronously the next offset
of every partition it read, recording the outcome. Assignment changes are recorded from the
group callbacks (which run inside poll()).

Commit outcomes: acknowledged is `ok`; any error is `info`, unknown. Even a refusal (an
unknown member, a fenced epoch) may answer a retry of a commit whose first attempt was stored
by a coordinator that died before answering (seen in scenario S1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fault_history import History
from fault_workload import ClientThreads

from client import Consumer, TopicPartition
from client.errors import GregorError

GROUP = "chaos-group"


class GroupMembers(ClientThreads):
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        history: History,
        members: int = 2,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.bootstrap = bootstrap
        self.security = dict(security or {})  # the clients' security settings
        self.topic = topic
        self.history = history
        for n in range(1, members + 1):
            self._thread(f"w-g{n}", self._member, f"g{n}")

    def committed(self) -> bool:
        """Whether a commit was acknowledged yet."""
        return any(e["f"] == "commit" and e["type"] == "ok" for e in list(self.history.entries))

    def _member(self, name: str) -> None:
        h = self.history

        def event(kind: str):  # type: ignore[no-untyped-def]
            return lambda tps: h.group_event(name, kind, [tp.partition for tp in tps])

        try:
            with Consumer(
                bootstrap_servers=self.bootstrap,
                **self.security,
                group_id=GROUP,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                request_timeout_ms=3000,
            ) as c:
                c.subscribe([self.topic], event("assign"), event("revoke"), event("lost"))
                while not self._stop.is_set():
                    try:
                        records = c.poll(timeout_ms=100)
                    except GregorError:
                        continue  # (the member rejoins or retries on its next poll)
                    nxt: dict[int, int] = {}
                    for r in records:
                        h.polled_in_group(name, r.partition, r.offset, r.value.decode())
                        nxt[r.partition] = r.offset + 1
                    if nxt:
                        self._commit(c, name, nxt)
        except BaseException as exc:  # (reported by stop())
            self.errors.append(exc)

    def _commit(self, c: Consumer, name: str, nxt: dict[int, int]) -> None:
        ops = {p: self.history.commit(name, p, o) for p, o in nxt.items()}
        try:
            c.commit({TopicPartition(self.topic, p): o for p, o in nxt.items()})
        except GregorError as exc:
            # unknown, even for a refusal: the client may have sent it before (to a coordinator
            # that stored it and died) and been refused only on the retry
            for op in ops.values():
                self.history.info(op, repr(exc))
        else:
            for p, op in ops.items():
                self.history.ok(op, nxt[p])
