"""Delayed operations, the purgatory that watches them by key, and the timing-wheel timer.

    from broker.purgatory import DelayedOperation, Purgatory, SystemTimer

See docs/broker.md for how DelayedProduce / DelayedFetch use them.
"""

from broker.purgatory.delayed import DelayedOperation
from broker.purgatory.purgatory import Purgatory
from broker.purgatory.timer import SystemTimer, monotonic_ms
from broker.purgatory.timing_wheel import TimerBucket, TimerTaskEntry, TimingWheel

__all__ = [
    "DelayedOperation",
    "Purgatory",
    "SystemTimer",
    "TimerBucket",
    "TimerTaskEntry",
    "TimingWheel",
    "monotonic_ms",
]
