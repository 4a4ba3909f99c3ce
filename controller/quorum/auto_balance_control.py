"""AutoBalanceControlManager: automatic balancing in the active controller
(`auto.balance.mode`, Redpanda's `partition_autobalancing_mode`).

- `off`: nothing moves by itself.
- `node-add` (the default): a broker registered for the first time receives its share of
  replicas from the most loaded brokers.
- `continuous`: also, the replicas of a broker fenced for longer than
  auto.balance.unavailable.timeout.ms are re-created on the other live brokers, restoring the
  replication factor.

Every AUTO_BALANCE_CHECK_INTERVAL_MS the active controller's tick asks the planner
(auto_balance.py, pure) for moves and starts them through the ReassignmentControlManager's
AlterPartitionReassignments path: their state is in the metadata log (they survive a
failover and complete as any reassignment does), and a broker with
follower.replication.throttled.rate set copies them within it. At most
auto.balance.max.concurrent.moves reassignments are in flight at once (any reassignment in
flight counts, an operator's too). Each move is logged at INFO with its reason.

What is held only in memory, and restarts with a new active controller (conservative: a
failover delays, never hastens, a move): the brokers waiting for their share (seen registering
for the first time by this controller), and since when each fenced broker has been fenced.
Controller thread only.
"""

from __future__ import annotations

import logging

from client.protocol.body import Body
from controller.metadata.records import NO_LEADER
from controller.quorum import auto_balance
from controller.quorum.cluster_control import ClusterControlManager
from controller.quorum.reassignment_control import ReassignmentControlManager
from controller.quorum.state import ControllerCore, ControlManager

_log = logging.getLogger(__name__)

AUTO_BALANCE_CHECK_INTERVAL_MS = 1000
MODES = ("off", "node-add", "continuous")


class AutoBalanceControlManager(ControlManager):
    def __init__(
        self,
        core: ControllerCore,
        cluster: ClusterControlManager,
        reassignments: ReassignmentControlManager,
    ) -> None:
        super().__init__(core)
        mode = self.settings.auto_balance_mode
        if mode not in MODES:
            raise ValueError(f"auto.balance.mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.cluster = cluster
        self.reassignments = reassignments
        self._next_check_ms = 0.0
        self._known: set[int] | None = None  # brokers registered when last looked
        self.waiting: set[int] = set()  # new brokers that have not received their share yet
        self.fenced_since: dict[int, float] = {}
        self._stuck_logged: set[tuple[str, int]] = set()

    @property
    def mode(self) -> str:
        return self.settings.auto_balance_mode

    def reset(self) -> None:
        """After a load: the brokers of the image count as known (none waits for its share),
        and every fenced broker's unavailability starts now."""
        self._next_check_ms = 0.0
        self._known = None
        self.waiting.clear()
        self.fenced_since.clear()

    def tick(self) -> None:
        if self.mode == "off" or not self.core.log.is_leader():
            return
        now = self.clock()
        if now < self._next_check_ms:
            return
        self._next_check_ms = now + AUTO_BALANCE_CHECK_INTERVAL_MS
        self.check(now)

    def _observe(self, now: float) -> None:
        brokers = set(self.image.brokers)
        if self._known is not None:
            for b in sorted(brokers - self._known):
                _log.info(
                    "[controller=%d] auto-balance: broker %d registered for the first time;"
                    " it will receive its share of replicas once unfenced",
                    self.settings.node_id,
                    b,
                )
                self.waiting.add(b)
        self._known = brokers
        live = set(self.image.live_brokers())
        for b in brokers:
            if b in live:
                self.fenced_since.pop(b, None)
            else:
                self.fenced_since.setdefault(b, now)

    def unavailable(self, now: float) -> list[int]:
        """Brokers fenced for longer than auto.balance.unavailable.timeout.ms (continuous mode
        only)."""
        if self.mode != "continuous":
            return []
        timeout = self.settings.auto_balance_unavailable_timeout_ms
        return sorted(b for b, t in self.fenced_since.items() if now - t >= timeout)

    def check(self, now: float) -> list[auto_balance.Move]:
        """Plan and start the moves due now; returns them."""
        self._observe(now)
        gone = self.unavailable(now)
        live = self.cluster.live()
        ready = [b for b in self.waiting if b in live]
        if not ready and not gone:
            return []
        room = self.settings.auto_balance_max_concurrent_moves - len(
            self.image.reassigning_partitions()
        )
        cannot = self.cluster.cannot_create()
        receivers = {
            b: self.image.brokers[b].rack for b in sorted(live) if b not in cannot and b not in gone
        }
        if not receivers:
            return []
        # A move in flight stays as it is, unless its target has a replica on a broker gone
        # for good: it could never complete (that replica never joins the ISR), so its target
        # is planned again and the new move replaces it.
        gone_set = set(gone)
        partitions = {
            (t.name, p): auto_balance.Placement(
                reg.target_replicas,
                reg.leader,
                reg.leader != NO_LEADER
                and (not reg.reassigning or any(r in gone_set for r in reg.target_replicas)),
            )
            for t in self.image.topics.values()
            for p, reg in t.partitions.items()
        }
        result = auto_balance.plan(
            partitions, receivers, new=ready, unavailable=gone, limit=max(0, room)
        )
        for b in sorted(result.settled):
            self.waiting.discard(b)
            _log.info(
                "[controller=%d] auto-balance: broker %d has its share of replicas (%d more"
                " moving onto it now)",
                self.settings.node_id,
                b,
                sum(b in m.target for m in result.moves),
            )
        for tp in result.stuck:
            if tp not in self._stuck_logged:
                self._stuck_logged.add(tp)
                _log.warning(
                    "[controller=%d] auto-balance: %s-%d has replicas on unavailable brokers"
                    " %s and too few live brokers to re-create them on",
                    self.settings.node_id,
                    tp[0],
                    tp[1],
                    [r for r in partitions[tp].replicas if r in gone],
                )
        if result.moves:
            self._start(result.moves)
        return result.moves

    def _start(self, moves: list[auto_balance.Move]) -> None:
        by_topic: dict[str, list[Body]] = {}
        for m in moves:
            by_topic.setdefault(m.tp[0], []).append(
                {"partition_index": m.tp[1], "replicas": list(m.target)}
            )
        request = [{"name": n, "partitions": ps} for n, ps in by_topic.items()]
        answer = self.reassignments.alter_partition_reassignments(request)
        errors = {
            (t["name"], r["partition_index"]): r["error_message"]
            for t in answer
            for r in t["partitions"]
            if r["error_code"]
        }
        for m in moves:
            err = errors.get(m.tp)
            if err is None:
                _log.info(
                    "[controller=%d] auto-balance: moving %s-%d from %s to %s (%s)",
                    self.settings.node_id,
                    m.tp[0],
                    m.tp[1],
                    list(m.replicas),
                    list(m.target),
                    m.reason,
                )
            else:
                _log.warning(
                    "[controller=%d] auto-balance: move of %s-%d to %s refused: %s",
                    self.settings.node_id,
                    m.tp[0],
                    m.tp[1],
                    list(m.target),
                    err,
                )
