"""A run's interval log (``.hlog``, :mod:`mcpfast.locust.hlog`) as per-name series over time:
what every timeline draws, the report page's and the bench's plots alike (pure Python, no Locust
import).

The swarm closes an interval about once a second (its ticker; the native engine's drains land
in the interval they arrive in), so each point is one interval of one request name: its
requests, their rate, p50 and p99 from that interval's own µs histogram. A name has a point only
where it had requests: a latency is never drawn as 0 for a second without requests, while its
rate there is 0 (:func:`rates`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from mcpfast.locust.histogram import Histogram
from mcpfast.locust.hlog import IntervalLog, read_log, tag_of

__all__ = ["AGGREGATED", "MIN_LENGTH", "Point", "from_lines", "histograms_by_key", "rates", "series"]

AGGREGATED = ("", "Aggregated")
"""The key of every successful request of an interval together (Locust's name for it)."""
MIN_LENGTH = 0.25
"""Seconds: an interval shorter than this (the last one, closed at the test's stop) joins the one
before it, so a handful of requests in a few milliseconds is not drawn as a spike of rate."""


@dataclass(frozen=True)
class Point:
    """One interval of one key: ``start`` in seconds since the series' origin."""

    start: float
    length: float
    histogram: Histogram

    @property
    def count(self) -> int:
        return self.histogram.total_count

    @property
    def rate(self) -> float:
        return self.count / self.length if self.length > 0 else 0.0

    def percentile(self, p: float) -> int:
        return self.histogram.value_at_percentile(p)


def from_lines(lines: Iterable[str]) -> IntervalLog:
    """An interval log read back from its text (``<prefix>_histograms.hlog``)."""
    log = IntervalLog()
    for tag, start, length, _max_ms, histogram in read_log(lines):
        log.add(tag or "", start, start + length, histogram)
    return log


def _keys_by_tag(keys: Iterable[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    return {tag_of(request_type, name): (request_type, name) for request_type, name in keys}


def _joined(points: list[Point]) -> list[Point]:
    """Short intervals joined to the interval just before them (when they touch it)."""
    out: list[Point] = []
    for p in points:
        prev = out[-1] if out else None
        if prev is not None and p.length < MIN_LENGTH and abs(prev.start + prev.length - p.start) < 0.05:
            out[-1] = Point(prev.start, p.start + p.length - prev.start, prev.histogram.copy().merge(p.histogram))
        else:
            out.append(p)
    return out


def series(
    log: IntervalLog, keys: Iterable[tuple[str, str]], origin: float | None = None, aggregated: bool = True
) -> dict[tuple[str, str], list[Point]]:
    """Per ``(type, name)`` key of ``keys`` (the run's successful names), its intervals in time
    order, and with ``aggregated`` every key's together under :data:`AGGREGATED`; ``origin``
    (epoch seconds, default the log's start) is time 0. A key without intervals is absent."""
    by_tag = _keys_by_tag(keys)
    base = origin if origin is not None else (log.start_time or 0.0)
    found: dict[tuple[str, str], list[Point]] = {}
    total: dict[tuple[float, float], Histogram] = {}
    for iv in sorted(log.intervals, key=lambda iv: iv.start):
        key = by_tag.get(iv.tag)
        if key is None:  # a failed request's tag, or a name the run's table does not have
            continue
        found.setdefault(key, []).append(Point(iv.start - base, iv.length, iv.histogram))
        if aggregated:
            total.setdefault((iv.start, iv.length), Histogram()).merge(iv.histogram)
    out = {key: _joined(points) for key, points in found.items()}
    if aggregated and total:
        out[AGGREGATED] = _joined([Point(start - base, length, h) for (start, length), h in sorted(total.items())])
    return out


def rates(points: list[Point], grid: list[Point]) -> Iterator[tuple[float, float]]:
    """``(interval end, requests/s)`` of a key over the intervals of ``grid`` (the
    :data:`AGGREGATED` series: every interval with a request): its requests in each over that
    interval's length, 0 where it had none, so a rate never jumps over a quiet second."""
    counts = [0] * len(grid)
    i = 0
    for p in points:  # both in time order: each point into the grid interval that holds its start
        while i + 1 < len(grid) and grid[i + 1].start <= p.start + 1e-6:
            i += 1
        if grid:
            counts[i] += p.count
    for cell, n in zip(grid, counts, strict=True):
        yield cell.start + cell.length, (n / cell.length if cell.length > 0 else 0.0)


def histograms_by_key(entries: Iterable[dict]) -> dict[tuple[str, str], Histogram]:
    """``{(type, name): Histogram}`` of a ``_histograms.json`` list (``histograms`` or
    ``failed_histograms``); an entry that does not decode is left out."""
    out: dict[tuple[str, str], Histogram] = {}
    for e in entries:
        try:
            out[(str(e["type"]), str(e["name"]))] = Histogram.from_dict(e)
        except (KeyError, TypeError, ValueError):
            continue
    return out
