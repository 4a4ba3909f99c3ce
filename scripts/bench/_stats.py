"""Summary statistics the benchmarks share."""

from __future__ import annotations


def percentile(xs: list[float], q: float) -> float:
    """The `q` quantile (0..1) of `xs`, sorted ascending and not empty: the element at index
    floor(q * n), the last for q = 1 (the upper of the two middles for an even median)."""
    return xs[min(len(xs) - 1, int(q * len(xs)))]
