"""What the MCP tab of Locust's web UI shows, computed from the swarm's µs histograms (pure
Python, no Locust import; :mod:`mcpfast.locust.webui` serves it).

Locust's own charts and tables read its millisecond buckets (a 63 µs median reads ``0``); this
module reads the 1 µs-resolution histograms of :mod:`mcpfast.locust.stats` instead and returns
plain data:

* :func:`name_rows`: per request name, the count, the failures and the percentiles of its
  successful requests (the figures of ``<prefix>_histograms.json``'s ``histograms``), plus the
  aggregate; :func:`tab_rows` gives them as the text cells Locust's table draws;
* chart specifications (axes with their ticks and labels, series of points, horizontal lines, or
  the sentence shown instead of an empty plot) that the page's script only draws:
  :func:`percentile_chart` (latency by percentile, HdrHistogram's plot), :class:`Timeline` (p50 and
  p99 per interval of the ``.hlog`` interval log), :func:`capacity_view` (a capacity search's
  steps, latency against achieved rate, with the SLO's bounds);
* :func:`phases`, :func:`failures` and :func:`generator_view`.

Every latency is shown by :func:`latency_text`: whole µs below 1 ms, ms below 1 s, then s, with
three significant digits and never in scientific notation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcpfast.locust.histogram import Histogram, HistogramSet
from mcpfast.locust.hlog import IntervalLog, tag_of
from mcpfast.locust.thresholds import ThresholdError, parse
from mcpfast.locust.units import latency_text

__all__ = [
    "NO_REQUESTS",
    "PHASE_ORDER",
    "NameRow",
    "Timeline",
    "capacity_view",
    "count_text",
    "failures",
    "generator_view",
    "latency_axis",
    "latency_text",
    "linear_axis",
    "name_rows",
    "percentile_chart",
    "phases",
    "share_text",
    "tab_columns",
    "tab_rows",
]

NO_REQUESTS = "no requests yet"
AGGREGATED = "Aggregated"
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")
CHART_NAMES = 6  # the busiest names a percentile chart draws (a legend of more is unreadable)
TIMELINE_NAMES = 3  # the busiest names the timeline draws (two lines each)
TIMELINE_SECONDS = 600.0  # the timeline keeps the last ten minutes
MAX_NINES = 6  # a percentile curve stops at p99.9999
STEPS_PER_NINE = 10
#: A session's set-up in the order it happens: the handshake phases' display order. A name not
#: listed (a stream's events, a workload's calls) is no phase; a first call after the handshake is.
PHASE_ORDER = ("connect", "tls:handshake", "server/discover", "initialize", "notifications/initialized", "first call", "DELETE")


# -- units -----------------------------------------------------------------------------------------
def count_text(n: int) -> str:
    return f"{n:,}"


def share_text(share: float) -> str:
    return f"{share * 100:.0f}%"


# -- the per-name table -------------------------------------------------------------------------------
@dataclass
class NameRow:
    """One request name's figures; ``values`` maps a percentile to µs (successful requests)."""

    request_type: str
    name: str
    requests: int
    failures: int
    ok: Histogram
    values: dict[float, int] = field(default_factory=dict)

    @property
    def max(self) -> int:
        return self.ok.max

    def to_dict(self, percentiles: Sequence[float]) -> dict[str, Any]:
        has = bool(self.ok.total_count)
        return {
            "type": self.request_type,
            "name": self.name,
            "requests": self.requests,
            "failures": self.failures,
            "us": {_key(p): self.values[p] for p in percentiles} | {"max": self.max} if has else None,
            "text": {_key(p): latency_text(self.values[p]) for p in percentiles} | {"max": latency_text(self.max)} if has else None,
        }


def _key(p: float) -> str:
    """A percentile's column key: ``p50``, ``p999`` for p99.9 (no dot: Locust's table keys its
    cells by name, and its UI rewrites ``_x`` in keys)."""
    return "p" + f"{p:g}".replace(".", "")


def _label(p: float) -> str:
    return f"p{p:g}"


def name_rows(ok: HistogramSet, failed: HistogramSet, percentiles: Sequence[float]) -> tuple[list[NameRow], NameRow | None]:
    """Every name that completed a request, by type then name, and the aggregate (None: no
    request yet). Percentiles are of the successful requests, as ``_histograms.json`` has them;
    a name whose requests all failed has none (its failures are in :func:`failures`)."""
    counts: dict[tuple[str, str], list[Any]] = {}
    for key, h in ok.items():
        if h.total_count:
            counts.setdefault(key, [Histogram(), 0])[0] = h
    for key, h in failed.items():
        if h.total_count:
            counts.setdefault(key, [Histogram(), 0])[1] = h.total_count
    rows = []
    total = Histogram()
    total_failed = 0
    for (request_type, name), (h, n_failed) in sorted(counts.items()):
        rows.append(_row(request_type, name, h, n_failed, percentiles))
        total.merge(h)
        total_failed += n_failed
    if not rows:
        return [], None
    return rows, _row("", AGGREGATED, total, total_failed, percentiles)


def _row(request_type: str, name: str, h: Histogram, n_failed: int, percentiles: Sequence[float]) -> NameRow:
    values = dict(zip(percentiles, h.percentiles(percentiles), strict=True)) if h.total_count else {}
    return NameRow(request_type, name, h.total_count + n_failed, n_failed, h, values)


def tab_columns(percentiles: Sequence[float]) -> list[dict[str, str]]:
    """The structure of the tab's table (Locust's ``extended_tables`` entry)."""
    cells = [{"key": _key(p), "title": _label(p)} for p in percentiles]
    return [
        {"key": "type", "title": "Type"},
        {"key": "name", "title": "Name"},
        {"key": "requests", "title": "# Requests"},
        {"key": "failures", "title": "# Fails"},
        *cells,
        {"key": "max", "title": "Max"},
    ]


def tab_rows(rows: list[NameRow], total: NameRow | None, percentiles: Sequence[float]) -> list[dict[str, str]]:
    """The tab's rows as text (Locust's table draws cells as they come); one row saying so when
    there is no request yet, so an empty table is never taken for a broken one."""
    if total is None:
        return [{"type": "", "name": NO_REQUESTS, "requests": "0", "failures": "0"}]
    out = []
    for row in [*rows, total]:
        cells = {"type": row.request_type, "name": row.name, "requests": count_text(row.requests), "failures": count_text(row.failures)}
        for p in percentiles:
            cells[_key(p)] = latency_text(row.values[p]) if row.values else "–"
        cells["max"] = latency_text(row.max) if row.values else "–"
        out.append(cells)
    return out


# -- axes -----------------------------------------------------------------------------------------
def latency_axis(lo: float, hi: float, title: str = "latency") -> dict[str, Any]:
    """A logarithmic latency axis over ``[lo, hi]`` µs: bounds at 1-2-5 steps around them, ticks
    labelled by :func:`latency_text` (1, 2, 5 per decade over at most three decades, else 1)."""
    lo, hi = max(float(lo), 1.0), max(float(hi), 1.0)
    if hi <= lo:
        lo, hi = max(lo / 2, 1.0), hi * 2
    steps = [m * 10.0**d for d in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2) for m in (1, 2, 5)]
    low = max((s for s in steps if s <= lo), default=1.0)
    high = min((s for s in steps if s >= hi), default=hi)
    decades = math.log10(high / low)
    marks = [s for s in steps if low <= s <= high and (decades <= 3 or _mantissa(s) == 1)]
    return {"lo": low, "hi": high, "log": True, "title": title, "ticks": [[s, latency_text(s)] for s in marks]}


def _mantissa(value: float) -> int:
    return round(value / 10.0 ** math.floor(math.log10(value) + 1e-9))


def linear_axis(lo: float, hi: float, title: str, suffix: str = "") -> dict[str, Any]:
    """A linear axis from ``lo`` to ``hi`` with five or so ticks at 1-2-5 steps, labelled with the
    decimals the step needs, thousands separated, and ``suffix``."""
    hi = hi if hi > lo else lo + 1.0
    raw = (hi - lo) / 5.0
    base = 10.0 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if m * base >= raw)
    decimals = max(-math.floor(math.log10(step) + 1e-9), 0)
    first = math.ceil(lo / step - 1e-9) * step
    count = int((hi - first) / step + 1e-9) + 1
    ticks = [round(first + i * step, decimals) for i in range(count)]
    return {"lo": lo, "hi": hi, "log": False, "title": title, "ticks": [[t, f"{t:,.{decimals}f}{suffix}"] for t in ticks]}


def _nines_label(nines: float) -> str:
    p = 100.0 * (1.0 - 10.0**-nines)
    return f"{p:.{max(round(nines) - 2, 0)}f}%"


def _color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def _empty_chart(title: str, message: str) -> dict[str, Any]:
    return {"title": title, "empty": message, "series": [], "hlines": []}


# -- latency by percentile ---------------------------------------------------------------------------
def percentile_points(h: Histogram) -> list[list[float]]:
    """``[nines, µs]`` of a histogram's percentile curve: x = -log10(1 - p) (1 is p90, 2 is p99),
    in tenths of a nine up to one sample of the count, then the max at log10(count)."""
    n = h.total_count
    if not n:
        return []
    top = min(math.log10(n), MAX_NINES)
    steps = int(top * STEPS_PER_NINE + 1e-9)
    ps = [100.0 * (1.0 - 10.0 ** (-k / STEPS_PER_NINE)) for k in range(steps + 1)]
    points = [[k / STEPS_PER_NINE, float(v)] for k, v in enumerate(h.percentiles(ps))]
    end = math.log10(n) if n > 1 else 0.0
    if end > points[-1][0]:
        points.append([end, float(h.max)])
    else:
        points[-1][1] = float(h.max)
    return points


def percentile_chart(lines: Sequence[tuple[str, Histogram]]) -> dict[str, Any]:
    """Latency by percentile, one line per ``(label, histogram)`` with requests (the busiest
    :data:`CHART_NAMES`)."""
    title = "Latency by percentile"
    drawn = sorted((line for line in lines if line[1].total_count), key=lambda line: -line[1].total_count)[:CHART_NAMES]
    if not drawn:
        return _empty_chart(title, "No requests yet: the curve appears with the first completed request.")
    curves = [percentile_points(h) for _, h in drawn]
    series: list[dict[str, Any]] = [{"label": label, "color": _color(i), "points": curves[i]} for i, (label, _) in enumerate(drawn)]
    hi = max(max(p[0] for pts in curves for p in pts), 1.0)
    marks = [0.0, math.log10(2.0), *range(1, math.floor(hi + 1e-9) + 1)]
    x = {"lo": 0.0, "hi": hi, "log": False, "title": "percentile", "ticks": [[m, _nines_label(m)] for m in marks]}
    values = [p[1] for pts in curves for p in pts]
    return {"title": title, "x": x, "y": latency_axis(min(values), max(values)), "series": series, "hlines": [], "empty": None}


# -- p50 and p99 over time ----------------------------------------------------------------------------
class Timeline:
    """p50 and p99 of each interval of the run's interval log, per name.

    The log only grows during a test (a reset replaces its list), so each interval's percentiles
    are computed once, when it first shows up.
    """

    def __init__(self) -> None:
        self._source: list[Any] | None = None
        self._done = 0
        self.points: dict[str, list[tuple[float, int, int, int]]] = {}  # tag -> (start, p50, p99, count)

    def update(self, log: IntervalLog) -> None:
        if log.intervals is not self._source:
            self._source, self._done, self.points = log.intervals, 0, {}
        for interval in log.intervals[self._done :]:
            h = interval.histogram
            p50, p99 = h.percentiles((50.0, 99.0))
            self.points.setdefault(interval.tag, []).append((interval.start, p50, p99, h.total_count))
        self._done = len(log.intervals)

    def chart(self, names: Iterable[tuple[str, str]], start: float | None) -> dict[str, Any]:
        """p50 (solid) and p99 (dashed) against seconds since ``start`` for the busiest of
        ``names`` (``(type, name)`` keys), over the last :data:`TIMELINE_SECONDS`."""
        title = "p50 and p99 per interval"
        found = []
        for request_type, name in names:
            pts = self.points.get(tag_of(request_type, name))
            if pts:
                found.append((name, pts))
        if not found:
            return _empty_chart(title, "No interval closed yet: a point appears each second a request completes.")
        found = sorted(found, key=lambda item: -sum(p[3] for p in item[1]))[:TIMELINE_NAMES]
        origin = start if start is not None else min(p[0] for _, pts in found for p in pts)
        latest = max(p[0] for _, pts in found for p in pts) - origin
        since = latest - TIMELINE_SECONDS
        series: list[dict[str, Any]] = []
        xs: list[float] = []
        values: list[float] = []
        for i, (name, pts) in enumerate(found):
            kept = [p for p in pts if p[0] - origin >= since]
            xs += [p[0] - origin for p in kept]
            values += [float(v) for p in kept for v in (p[1], p[2])]
            series.append({"label": f"{name} p50", "color": _color(i), "points": [[p[0] - origin, float(p[1])] for p in kept]})
            series.append(
                {"label": f"{name} p99", "color": _color(i), "dash": True, "points": [[p[0] - origin, float(p[2])] for p in kept]}
            )
        lo = min(xs) if latest > TIMELINE_SECONDS else 0.0  # a long run: its last ten minutes
        x = linear_axis(lo, max(max(xs), lo + 1.0), "seconds since the test started", " s")
        return {"title": title, "x": x, "y": latency_axis(min(values), max(values)), "series": series, "hlines": [], "empty": None}


# -- handshake phases, failures, generator ----------------------------------------------------------------
def _phase(name: str) -> str | None:
    if name.startswith("tools/call:") and name.endswith("(first)"):
        return "first call"
    return name if name in PHASE_ORDER else None


def phases(rows: Iterable[NameRow]) -> list[dict[str, Any]]:
    """The rows of a session's set-up in :data:`PHASE_ORDER`, with their p50/p99 and a bar length
    (p99 against the slowest phase's)."""
    found = [(PHASE_ORDER.index(phase), row) for row in rows if (phase := _phase(row.name)) is not None and row.values]
    found.sort(key=lambda item: (item[1].request_type, item[0]))
    top = max((row.values.get(99.0, row.max) for _, row in found), default=0) or 1
    out = []
    for _, row in found:
        p50, p99 = row.values.get(50.0, 0), row.values.get(99.0, row.max)
        out.append(
            {
                "type": row.request_type,
                "name": row.name,
                "requests": count_text(row.requests),
                "failures": count_text(row.failures),
                "p50": latency_text(p50),
                "p99": latency_text(p99),
                "p50_share": p50 / top,
                "p99_share": p99 / top,
            }
        )
    return out


def failures(failed: HistogramSet, reasons: Iterable[tuple[str, str, str, int]]) -> list[dict[str, Any]]:
    """Each name's failed requests with their own latencies (p50, p99, max of the failures'
    histogram) and the reasons Locust recorded for it (``(type, name, reason, count)``), most
    frequent first."""
    by_key: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for request_type, name, reason, count in reasons:
        by_key.setdefault((request_type, name), []).append((reason, count))
    out = []
    for (request_type, name), h in failed.items():
        if not h.total_count:
            continue
        p50, p99 = h.percentiles((50.0, 99.0))
        found = sorted(by_key.get((request_type, name), []), key=lambda rc: (-rc[1], rc[0]))
        out.append(
            {
                "type": request_type,
                "name": name,
                "count": h.total_count,
                "count_text": count_text(h.total_count),
                "p50": latency_text(p50),
                "p99": latency_text(p99),
                "max": latency_text(h.max),
                "reasons": [{"reason": reason, "count": count_text(count)} for reason, count in found],
            }
        )
    return sorted(out, key=lambda f: (-f["count"], f["type"], f["name"]))


def generator_view(shares: dict[str, float | None], busy_at: float) -> dict[str, Any]:
    """The generator gauge: the busiest generator thread's CPU demand (run plus run-queue wait,
    per second) of each process, and ``red`` when one is at ``busy_at`` or above (then the
    generator, not the server, may set the pace: the capacity search's own rule)."""
    known = {k: v for k, v in shares.items() if v is not None}
    busiest = max(known.values()) if known else None
    return {
        "share": busiest,
        "text": share_text(busiest) if busiest is not None else "measuring",
        "busy_at": busy_at,
        "busy_text": share_text(busy_at),
        "red": busiest is not None and busiest >= busy_at,
        "processes": [{"id": k, "share": v, "text": share_text(v) if v is not None else "measuring"} for k, v in sorted(shares.items())],
    }


# -- a capacity search --------------------------------------------------------------------------------
CAPACITY_PERCENTILES = ("p50", "p90", "p99")
VERDICT_SYMBOLS = {"pass": "circle", "fail": "cross", "inconclusive": "square"}


def _slo_lines(texts: Iterable[str]) -> list[dict[str, Any]]:
    lines = []
    for text in texts:
        try:
            t = parse(text)
        except ThresholdError:
            continue
        if t.is_latency and t.op in ("<", "<="):
            lines.append({"y": t.value, "label": f"SLO {t.text} ({latency_text(t.value)})", "color": "#b00020"})
    return lines


def capacity_view(progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """A capacity search so far (``capacity.json``'s shape, see
    :func:`mcpfast.locust.capacity_shape.progress`): its steps as rows and its curve (latency
    percentiles against the achieved rate, each point marked by the step's verdict, the SLO's
    latency bounds as lines); None when no search runs."""
    if progress is None:
        return None
    unit = str(progress.get("unit") or "requests/s")
    steps = sorted(progress.get("steps") or [], key=lambda s: s.get("step", 0))
    rows = []
    for s in steps:
        p = s.get("latency_us") or {}
        rows.append(
            {
                "step": s.get("step"),
                "offered": f"{float(s.get('offered') or 0):,.0f}",
                "achieved": f"{float(s.get('achieved') or 0):,.0f}",
                **{name: latency_text(p[name]) if p.get(name) else "–" for name in CAPACITY_PERCENTILES},
                "generator": share_text(float(s.get("generator_cpu") or 0)),
                "verdict": str(s.get("verdict") or ""),
                "reasons": "; ".join(str(r) for r in s.get("reasons") or []),
            }
        )
    title = f"Capacity search: latency against achieved {unit}"
    hlines = _slo_lines(progress.get("slo") or [])
    # the curve runs along the achieved rate (a bisection's steps come back below its last one)
    done = sorted((s for s in steps if (s.get("latency_us") or {}).get("p50")), key=lambda s: float(s.get("achieved") or 0))
    if not done:
        chart = _empty_chart(title, "The first step is running: its point appears when its window closes.")
    else:
        series: list[dict[str, Any]] = []
        xs: list[float] = []
        values: list[float] = [float(h["y"]) for h in hlines]
        for i, name in enumerate(CAPACITY_PERCENTILES):
            pts = [(float(s["achieved"]), float(s["latency_us"][name]), str(s.get("verdict"))) for s in done if s["latency_us"].get(name)]
            series.append(
                {
                    "label": name,
                    "color": _color(i),
                    "points": [[x, y] for x, y, _ in pts],
                    "symbols": [VERDICT_SYMBOLS.get(v, "circle") for _, _, v in pts],
                }
            )
            xs += [x for x, _, _ in pts]
            values += [y for _, y, _ in pts]
        x = linear_axis(0.0, max(xs) * 1.1, f"achieved {unit}")
        chart = {"title": title, "x": x, "y": latency_axis(min(values), max(values)), "series": series, "hlines": hlines, "empty": None}
    return {
        "status": str(progress.get("status") or "running"),
        "sentence": str(progress.get("sentence") or ""),
        "unit": unit,
        "slo": [str(t) for t in progress.get("slo") or []],
        "steps": rows,
        "chart": chart,
    }
