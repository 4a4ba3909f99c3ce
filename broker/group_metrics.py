"""Group metrics (docs/metrics.md, "Groups"), read at scrape time on the group coordinator:
the members and state of each group it coordinates, and their lag per topic, from the committed
offsets it holds and the high watermarks of the partitions' replicas on this broker.

Lag of a partition = max(0, high watermark - committed offset), as `gregor groups describe`
computes it from ListOffsets(latest). Only partitions with a committed offset count (a
partition owned and never committed has no lag yet, as in `groups describe`). A partition
with no replica on this broker has no high watermark here: it is left out of the lag and
counted in `gregor_group_lag_unknown_partitions` (docs/decisions.md). A follower replica's high
watermark trails the leader's by at most one fetch.

Threads: the scrape thread; the coordinator copies its state under its own lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

GROUP_STATES = ("empty", "assigning", "reconciling", "stable")


class GroupCollector(Collector):
    """`coordinator` a broker.group.GroupCoordinator, `replica_manager` the node's."""

    def __init__(
        self, coordinator: Any, replica_manager: Any, partition_labels: bool = False
    ) -> None:
        """`partition_labels`: the lag per partition (metrics.partition.labels), else per
        topic."""
        self._coordinator = coordinator
        self._rm = replica_manager
        self._partition_labels = partition_labels

    def collect(self) -> Iterator[GaugeMetricFamily]:
        members = GaugeMetricFamily(
            "gregor_group_members",
            "members of a group this broker coordinates",
            labels=["group"],
        )
        state = GaugeMetricFamily(
            "gregor_group_state",
            "1 for the state a group this broker coordinates is in (empty, assigning,"
            " reconciling, stable), 0 for the others",
            labels=["group", "state"],
        )
        lag = GaugeMetricFamily(
            "gregor_group_lag_records",
            "records a group is behind, by topic: the sum over its partitions with a committed"
            " offset of high watermark - committed offset (as gregor groups describe)",
            labels=["group", "topic", "partition"]
            if self._partition_labels
            else ["group", "topic"],
        )
        unknown = 0
        get = self._rm.get_partition
        for gid, st, n, committed in sorted(self._coordinator.snapshot()):
            members.add_metric([gid], n)
            for s in GROUP_STATES:
                state.add_metric([gid, s], 1 if s == st else 0)
            per_key: dict[tuple[str, ...], int] = {}
            for (topic, p), offset in committed.items():
                part = get(topic, p)
                if part is None:
                    unknown += 1
                    continue
                key: tuple[str, ...] = (topic, str(p)) if self._partition_labels else (topic,)
                per_key[key] = per_key.get(key, 0) + max(0, part.high_watermark - offset)
            for key in sorted(per_key):
                lag.add_metric([gid, *key], per_key[key])
        yield members
        yield state
        yield lag
        yield GaugeMetricFamily(
            "gregor_group_lag_unknown_partitions",
            "committed partitions of the groups this broker coordinates that have no replica"
            " here, so no high watermark: left out of gregor_group_lag_records",
            value=unknown,
        )
