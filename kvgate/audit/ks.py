"""The two-sample Kolmogorov-Smirnov test (statistic and asymptotic p-value), without SciPy."""

from __future__ import annotations

import math
from collections.abc import Sequence


def ks_statistic(a: Sequence[float], b: Sequence[float]) -> float:
    """``D = sup_x |F_a(x) - F_b(x)|`` of the two empirical distribution functions."""
    if not a or not b:
        raise ValueError("both samples must be non-empty")
    xs, ys = sorted(a), sorted(b)
    i = j = 0
    d = 0.0
    while i < len(xs) and j < len(ys):
        x = min(xs[i], ys[j])
        while i < len(xs) and xs[i] == x:
            i += 1
        while j < len(ys) and ys[j] == x:
            j += 1
        d = max(d, abs(i / len(xs) - j / len(ys)))
    return d


def kolmogorov_sf(x: float) -> float:
    """``P(K > x)`` for the Kolmogorov distribution: ``2 sum_{k>=1} (-1)^(k-1) exp(-2 k^2 x^2)``."""
    if x < 0.2:
        return 1.0  # the series converges slowly here, and the answer is 1 to 1e-9
    total = sum(2 * (-1) ** (k - 1) * math.exp(-2 * k * k * x * x) for k in range(1, 101))
    return min(1.0, max(0.0, total))


def ks_2samp(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """``(D, p)``: the statistic and its two-sided asymptotic p-value, with Stephens' small-sample
    correction ``(sqrt(n) + 0.12 + 0.11 / sqrt(n)) D`` where ``n = |a||b| / (|a| + |b|)``."""
    d = ks_statistic(a, b)
    en = math.sqrt(len(a) * len(b) / (len(a) + len(b)))
    return d, kolmogorov_sf((en + 0.12 + 0.11 / en) * d)
