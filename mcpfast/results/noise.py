"""The statistics of results (pure Python): a least-squares line (memory per session, a soak's
slopes) and what ``mcpfast compare`` judges a change with.

**The noise of a run.** A run's interval log (``.hlog``) holds a µs histogram per name for every
interval of about a second, so each run gives a sample of each percentile: one value per
window (:func:`windows`). Whether a percentile moved between two runs beyond what it does from
one second to the next is the two-sided Wilcoxon-Mann-Whitney rank test of the two samples
(:func:`rank_test`): exact over every ordering of the pooled ranks for small samples, ties
shared as mid-ranks; above :data:`EXACT_LIMIT` orderings, the normal approximation with the
ties' correction. It assumes the windows of a run are exchangeable: a run that drifts (warms
up, fills memory) widens its own noise, and two runs taken far apart on a busy machine can
differ beyond it though nothing in the server changed.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mcpfast.locust.histogram import Histogram
from mcpfast.locust.intervals import Point

__all__ = ["EXACT_LIMIT", "TAIL", "RankTest", "least_squares", "rank_test", "smallest_p", "windows"]


def least_squares(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float | None] | None:
    """The least-squares line ``y = a + b x``: ``(a, b, the standard error of b)`` (None for two
    points, which always make a perfect line); None below 2 points or when x does not vary."""
    try:
        b, a = statistics.linear_regression(xs, ys)
    except statistics.StatisticsError:
        return None
    if len(xs) == 2:
        return a, b, None
    mx = statistics.fmean(xs)
    ssr = sum((y - (a + b * x)) ** 2 for x, y in zip(xs, ys, strict=True))
    return a, b, math.sqrt(ssr / (len(xs) - 2) / sum((x - mx) ** 2 for x in xs))


# -- a change against a run's own noise ------------------------------------------------------------------
EXACT_LIMIT = 50_000
"""Orderings of the two samples up to which the rank test's p-value is exact (every assignment
of the pooled ranks counted); above it, the normal approximation with the ties' correction."""
TAIL = 2
"""Requests a window must hold beyond its percentile: a window's p99 is read from at least 200
requests, its p50 from at least 4 (consecutive intervals are joined until they do)."""


@dataclass(frozen=True)
class RankTest:
    """A two-sided Wilcoxon-Mann-Whitney rank test of sample ``b`` against sample ``a``."""

    p_value: float
    n_a: int
    n_b: int
    exact: bool
    median_a: float
    median_b: float


def windows(points: Iterable[Point], p: float) -> list[float]:
    """Percentile ``p`` of each window of a run's intervals (a key's, in time order): the
    intervals taken in turn, joined until a window holds :data:`TAIL` requests beyond ``p``; a
    short remainder joins the last window."""
    need = max(1, math.ceil(TAIL / (1.0 - p / 100.0) - 1e-9))
    out: list[Histogram] = []
    current = Histogram()
    for point in points:
        current.merge(point.histogram)
        if current.total_count >= need:
            out.append(current)
            current = Histogram()
    if current.total_count:
        if out:
            out[-1].merge(current)
        else:
            out.append(current)
    return [float(h.value_at_percentile(p)) for h in out if h.total_count >= need]


def _ranks(values: Sequence[float]) -> list[float]:
    """Mid-ranks (1-based): tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value two samples of these sizes can reach (every value of one
    above every value of the other)."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a)) if n_a and n_b else 1.0


def rank_test(a: Sequence[float], b: Sequence[float]) -> RankTest | None:
    """The two-sided rank test of ``b`` against ``a`` (None when either is empty): exact when
    the samples have at most :data:`EXACT_LIMIT` orderings, else the normal approximation."""
    if not a or not b:
        return None
    pooled = [*a, *b]
    ranks = _ranks(pooled)
    n_a, n = len(a), len(pooled)
    mean = n_a * (n + 1) / 2.0
    observed = abs(sum(ranks[:n_a]) - mean)
    exact = math.comb(n, n_a) <= EXACT_LIMIT
    if exact:
        hits = total = 0
        for chosen in itertools.combinations(ranks, n_a):
            total += 1
            hits += abs(sum(chosen) - mean) >= observed - 1e-9
        p_value = hits / total
    else:
        ties = sum(t**3 - t for t in Counter(pooled).values())
        variance = n_a * (n - n_a) / 12.0 * ((n + 1) - ties / (n * (n - 1)))
        z = (observed - 0.5) / math.sqrt(variance) if variance > 0 else 0.0
        p_value = math.erfc(max(z, 0.0) / math.sqrt(2.0)) if variance > 0 else 1.0
    return RankTest(min(p_value, 1.0), n_a, n - n_a, exact, statistics.median(a), statistics.median(b))
