"""The progress of replica moves, shared by `gregor broker decommission` and `gregor cluster
rebalance`: how many bytes the adding replicas still have to copy (from DescribeLogDirs), the
rate that falls at, and the line showing it, on stderr once a second when it is a terminal,
as a printed line every 10 s otherwise:

    decommission 4: 12 of 30 partitions left, 1.2 GB left, 85.0 MB/s, ETA 14s

Called from the command's thread only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from client.cli.common import on_terminal

if TYPE_CHECKING:
    from client import Admin

Sizes = dict[int, dict[tuple[str, int], int]]


def replica_sizes(admin: Admin) -> Sizes:
    """{broker: {(topic, partition): bytes}} of the live brokers that answer DescribeLogDirs."""
    from client.errors import GregorError

    out: Sizes = {}
    for b in admin.describe_cluster().brokers:
        try:
            dirs = admin.describe_log_dirs([b.node_id])[b.node_id]
        except GregorError:
            continue  # unreachable now: its replicas count from the others
        out[b.node_id] = {
            (tp.topic, tp.partition): size for d in dirs.values() for tp, size in d.replicas.items()
        }
    return out


def human_size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n} B"


def bytes_left(
    sizes: Sizes,
    partitions: Collection[tuple[str, int]],
    moving: Mapping[tuple[str, int], object],
    source: int | None = None,
) -> int:
    """What the adding replicas of `partitions` still have to copy: per partition, its size
    (on `source` when given and it holds it, else its largest replica) less what its least
    advanced adding replica holds (`moving`: {tp: PartitionReassignment} in flight)."""
    left = 0
    for tp in partitions:
        have = [s[tp] for s in sizes.values() if tp in s]
        on_source = sizes.get(source, {}) if source is not None else {}
        src = on_source[tp] if tp in on_source else max(have, default=0)
        m = moving.get(tp)
        adding = getattr(m, "adding_replicas", ()) if m is not None else ()
        copied = min((sizes.get(a, {}).get(tp, 0) for a in adding), default=0)
        left += max(0, src - copied)
    return left


class MoveProgress:
    """The progress line of moves: `update` with what is left computes the rate and shows the
    line (rewritten in place on a terminal, printed every 10 s otherwise)."""

    def __init__(self) -> None:
        self.live = on_terminal(sys.stderr)
        self.rate = 0.0
        self._last: tuple[float, int] | None = None
        self._last_print = 0.0
        self._shown = False

    def line(self, label: str, left_partitions: int, total: int, left: int) -> str:
        now = time.monotonic()
        if self._last is not None and now > self._last[0]:
            self.rate = max(0.0, (self._last[1] - left) / (now - self._last[0]))
        self._last = (now, left)
        eta = f", ETA {left / self.rate:.0f}s" if self.rate > 0 and left else ""
        return (
            f"{label}: {left_partitions} of {total} partitions left, {human_size(left)} left,"
            f" {human_size(self.rate)}/s{eta}"
        )

    def show(self, line: str) -> None:
        if self.live:
            sys.stderr.write("\r\x1b[K" + line)
            sys.stderr.flush()
            self._shown = True
        elif time.monotonic() - self._last_print >= 10:
            print(line, flush=True)
            self._last_print = time.monotonic()

    def clear(self) -> None:
        if self.live and self._shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
