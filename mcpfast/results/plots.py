"""PNG plots of a bench run, a soak and a capacity search (matplotlib, Agg backend; no display needed).

Every plot function takes plain data (histograms, series, rows) and a path, draws one figure,
saves it and returns the path; :mod:`mcpfast.results.report` reads a run's files and feeds them.
The panels are drawn by helpers the plots share (and the maintainer benchmarks use):
:func:`subplots` and :func:`save` around every figure, :func:`curves` for latency against
percentile (log axes, "nines" on x, from µs HDR histograms), :func:`bars` for grouped bars,
:func:`latency_scale` for every latency axis (µs below 1 ms, ms below 1 s: the labels of
:func:`mcpfast.locust.units.latency_text`, never scientific notation) and :func:`empty` for a
panel with nothing to show. Latencies are given in µs throughout.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mcpfast.locust import intervals as iv
from mcpfast.locust.histogram import Histogram
from mcpfast.locust.thresholds import parse
from mcpfast.locust.units import latency_text
from mcpfast.results.noise import least_squares

__all__ = [
    "bars",
    "capacity_plot",
    "compare_plot",
    "curves",
    "empty",
    "handshake_plot",
    "latency_scale",
    "memory_plot",
    "percentile_curve",
    "percentile_plot",
    "save",
    "soak_plot",
    "sse_plot",
    "subplots",
    "timeline_figure",
    "timeline_plot",
]

MAX_NINES = 6  # 99.9999%
DPI = 110
RED = "#c44e52"
CAPACITY_PERCENTILES = (("p50", "#4c72b0"), ("p90", "#55a868"), ("p99", RED), ("p99.9", "#8172b2"))
VERDICT_MARKERS = {"pass": ("o", "passed"), "fail": ("X", "failed"), "inconclusive": ("^", "inconclusive (generator)")}
Series = dict[tuple[str, str], list[iv.Point]]
"""``{(type, name): [interval]}`` of a run's interval log (:func:`mcpfast.locust.intervals.series`)."""


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def subplots(rows: int, cols: int, panel: tuple[float, float], **kw: Any) -> tuple[Any, Any]:
    """A figure of ``rows`` x ``cols`` panels of ``panel`` (width, height) inches: ``(fig, axes[r][c])``."""
    return _plt().subplots(rows, cols, figsize=(panel[0] * cols, panel[1] * rows), squeeze=False, **kw)


def save(fig: Any, path: Path, title: str | None = None) -> Path:
    """Give the figure its title, save it as a PNG at ``path`` and close it."""
    if title:
        fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    _plt().close(fig)
    return path


def empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def latency_scale(ax: Any, label: str = "latency") -> None:
    """A log latency axis on y for values in µs (call it once the data is drawn): ticks at 1, 2
    and 5 of each decade (more within a narrow range) labelled by :func:`latency_text` (``50
    µs``, ``2 ms``), no minor labels, never scientific notation."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    if lo < 0.8:  # nothing is below 1 µs (the histograms' floor): no "0 µs" ticks under a flat 1 µs line
        lo, hi = 0.8, max(hi, 10.0)
        ax.set_ylim(lo, hi)
    decades = math.log10(hi / lo)
    subs = (1.0, 2.0, 3.0, 5.0, 7.0) if decades < 1.5 else (1.0, 2.0, 5.0) if decades <= 3 else (1.0,)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: latency_text(v)))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel(f"{label} (log)")


def percentile_curve(h: Histogram, steps_per_decade: int = 20) -> tuple[list[float], list[float]]:
    """(x, y) of a percentile curve: x = 1 / (1 - p) ("nines"; 10 = p90, 100 = p99), y = µs.

    Percentiles are taken log-spaced in (1 - p) down to one sample (1 / count), plus the max.
    """
    n = int(h.total_count)
    if n <= 0:
        return [], []
    k_max = max(int(min(math.log10(n), MAX_NINES) * steps_per_decade), 1)
    ps = [100.0 * (1.0 - 10 ** (-k / steps_per_decade)) for k in range(k_max + 1)]
    xs = [1.0 / (1.0 - p / 100.0) if p < 100.0 else float(n) for p in ps]
    ys = [float(v) for v in h.percentiles(ps)]
    return [*xs, max(float(n), xs[-1])], [*ys, float(h.max)]


Line = tuple[str, Histogram | None] | tuple[str, Histogram | None, dict[str, Any]]
"""A percentile curve's label, histogram and (optional) plot style."""


def curves(ax: Any, lines: Iterable[Line], *, legend_size: float = 8, nothing: str = "no requests") -> int:
    """Latency against percentile on ``ax``, one line per ``(label, histogram[, plot style])``
    (an empty or missing histogram: no line), on log axes with "nines" on x; ``nothing`` is
    written on a panel without a line. Returns the lines drawn."""
    max_x, drawn = 10.0, 0
    for label, h, *style in lines:
        xs, ys = percentile_curve(h) if h is not None else ([], [])
        if xs:
            ax.plot(xs, ys, label=label, **{"linewidth": 1.4, **(style[0] if style else {})})
            max_x, drawn = max(max_x, xs[-1]), drawn + 1
    if not drawn:
        empty(ax, nothing)
        return 0
    ax.set_xscale("log")
    nines = [(10.0**k, label) for k, label in enumerate(["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"])]
    ticks = [(x, label) for x, label in nines if x <= max_x * 1.01]
    ax.set_xticks([x for x, _ in ticks])
    ax.set_xticklabels([label for _, label in ticks])
    ax.minorticks_off()
    ax.set_xlim(1.0, max_x * 1.2)
    ax.set_xlabel("percentile")
    latency_scale(ax)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=legend_size, loc="best")
    return drawn


def bars(
    ax: Any,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    log: bool = True,
    colors: Sequence[str] | None = None,
    value_format: str | None = None,
    rotation: float = 0,
    value_text: Any = None,
) -> int:
    """One group of bars per entry of ``groups``, one bar per series (``series[label][i]`` is its
    value in group ``i``; None, or not above 0 on a log axis: no bar), the value written above
    each bar (``value_text(v)``, else ``value_format``, default: no decimals from 100 up, else 3
    significant digits). Returns the series drawn (0: the panel says "no data")."""
    width = 0.8 / max(len(series), 1)
    drawn = 0
    for i, (label, values) in enumerate(series.items()):
        pts = [(g - 0.4 + width * (i + 0.5), v) for g, v in enumerate(values) if v is not None and math.isfinite(v) and (v > 0 or not log)]
        if not pts:
            continue
        style = {"color": colors[i]} if colors else {}
        drawn_bars = ax.bar([x for x, _ in pts], [v for _, v in pts], width=width * 0.95, label=label, **style)
        for bar, (_, v) in zip(drawn_bars, pts, strict=True):
            text = value_text(v) if value_text else value_format.format(v) if value_format else f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, v), ha="center", va="bottom", fontsize=6)
        drawn += 1
    if not drawn:
        empty(ax, "no data")
        return 0
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=rotation, ha="right" if rotation else "center", fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.grid(True, axis="y", which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return drawn


def percentile_plot(hists: dict[str, Histogram], path: Path, title: str) -> Path:
    """One line per name; ``hists`` maps a label to a Histogram (µs)."""
    fig, axes = subplots(1, 1, (8, 5))
    curves(axes[0][0], [(f"{label} (n={h.total_count})", h) for label, h in sorted(hists.items())])
    return save(fig, path, title)


def timeline_figure(series: Series | None, title: str, max_names: int = 12) -> Any:
    """The figure of :func:`timeline_plot` (a test reads its lines): requests per second and p99
    per interval of the run's interval log, the aggregate and the busiest ``max_names`` names.
    ``series`` None: the run has no interval log, and both panels say so."""
    fig, axes = subplots(2, 1, (8, 3), sharex=True)
    ax1, ax2 = axes[0][0], axes[1][0]
    grid = (series or {}).get(iv.AGGREGATED, [])
    if not grid:
        why = "no interval log (.hlog): a run of an older mcpfast" if series is None else "no interval with a request"
        empty(ax1, why)
        empty(ax2, why)
        fig.suptitle(title)
        return fig
    assert series is not None
    others = sorted((k for k in series if k != iv.AGGREGATED), key=lambda k: -sum(p.count for p in series[k]))
    twins = {k[1] for k in others if sum(1 for o in others if o[1] == k[1]) > 1}
    for key in [iv.AGGREGATED, *others[:max_names]]:
        pts = series[key]
        label = "Aggregated" if key == iv.AGGREGATED else (f"{key[0]} {key[1]}" if key[1] in twins else key[1])
        style: dict[str, Any] = {"linewidth": 2.2, "color": "black"} if key == iv.AGGREGATED else {"linewidth": 1.0}
        if len(pts) < 3:
            style["marker"] = "o"
        rates = list(iv.rates(pts, grid))
        ax1.plot([t for t, _ in rates], [r for _, r in rates], label=label, **style)
        ax2.plot([p.start + p.length for p in pts], [p.percentile(99.0) for p in pts], label=label, **style)
    ax1.set_ylabel("requests/s")
    ax1.set_ylim(bottom=0)
    latency_scale(ax2, "p99 per interval")
    ax2.set_xlabel("seconds since start (end of each interval)")
    for ax in (ax1, ax2):
        ax.grid(True, alpha=0.3)
    ax1.legend(fontsize=7, loc="best")
    fig.suptitle(title)
    return fig


def timeline_plot(series: Series | None, path: Path, title: str, max_names: int = 12) -> Path:
    """Throughput and p99 over time from the run's µs interval histograms (:data:`Series`; one
    point per interval a name had requests in, so no latency reads 0 for want of requests)."""
    return save(timeline_figure(series, title, max_names), path)


def handshake_plot(phases: dict[str, list[tuple[str, dict[str, Any]]]], path: Path, title: str) -> Path:
    """Grouped bars per phase: p50, p90, p99 (ms, log).  ``phases`` maps a transport to
    ``[(phase label, row)]`` where a row has ``p50_us``/``p90_us``/``p99_us``/``count``."""
    items = sorted(phases.items()) or [("-", [])]
    fig, axes = subplots(1, len(items), (6, 4.5))
    for ax, (transport, rows) in zip(axes[0], items, strict=True):
        groups = [f"{label}\n(n={row.get('count')})" for label, row in rows]
        values = {p: [row.get(f"{p}_us") for _, row in rows] for p in ("p50", "p90", "p99")}
        if bars(ax, groups, values, colors=("#4c72b0", "#dd8452", RED), value_text=latency_text):
            latency_scale(ax)
        ax.set_title(f"handshake phases, {transport}")
    return save(fig, path, title)


def sse_plot(data: dict[str, dict[str, dict[str, Histogram]]], path: Path, title: str) -> Path:
    """Per transport, two panels: time to first event and inter-event gap (percentile curves).

    ``data[transport]["first"|"gap"]`` maps a label (``sse:first-event`` ...) to a Histogram.
    """
    transports = sorted(data) or ["-"]
    fig, axes = subplots(len(transports), 2, (5.5, 4.2))
    for row_axes, transport in zip(axes, transports, strict=True):
        for ax, kind, label in ((row_axes[0], "first", "time to first event"), (row_axes[1], "gap", "inter-event gap")):
            hists = sorted(((data.get(transport) or {}).get(kind) or {}).items())
            lines = [(f"{n} (n={h.total_count}, p50 {latency_text(h.percentiles([50.0])[0])})", h) for n, h in hists if h.total_count]
            curves(ax, lines, legend_size=7, nothing="no events")
            ax.set_title(f"{label}, {transport}")
    return save(fig, path, title)


def memory_plot(series: dict[str, dict[str, Any]], path: Path, title: str) -> Path:
    """Server RSS (MiB) against open sessions, one panel per transport.

    ``series[transport]`` has ``sessions`` and ``rss_kib`` (equal-length lists), ``xlabel`` and
    optionally ``note`` and ``fit`` (default True: a least-squares line gives KiB per session
    when the session count varies).
    """
    transports = sorted(series) or ["-"]
    fig, axes = subplots(1, len(transports), (6.5, 4.5))
    for ax, transport in zip(axes[0], transports, strict=True):
        s = series.get(transport) or {}
        xs, kib = list(s.get("sessions") or []), list(s.get("rss_kib") or [])
        if not xs:
            empty(ax, "no memory samples")
            ax.set_title(transport)
            continue
        ax.scatter(xs, [v / 1024.0 for v in kib], s=10, alpha=0.7, label="samples")
        fit = least_squares(xs, kib) if s.get("fit", True) else None
        if fit is not None:
            a, b, _ = fit
            lo, hi = min(xs), max(xs)
            ax.plot([lo, hi], [(a + b * lo) / 1024.0, (a + b * hi) / 1024.0], color=RED, label=f"fit: {b:.2f} KiB/session")
        ax.set_xlabel(s.get("xlabel") or "open sessions")
        ax.set_ylabel("server RSS (MiB)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
        note = s.get("note")
        ax.set_title(f"server memory, {transport}" + (f"\n{note}" if note else ""), fontsize=9)
    return save(fig, path, title)


def capacity_plot(result: dict[str, Any], path: Path) -> Path:
    """``capacity.png``: each step's latency percentiles against the throughput it achieved, its
    verdict as the marker, the SLO's latency bounds and the capacity (or the bracket) it found."""
    from matplotlib.ticker import FuncFormatter

    fig, axes = subplots(1, 1, (9, 5.5))
    ax, title = axes[0][0], str(result.get("sentence") or "").split("; ")[0]
    steps = sorted((s for s in result.get("steps") or [] if s["latency_us"].get("p50")), key=lambda s: s["achieved"])
    if not steps:
        empty(ax, "no step completed a request")
        return save(fig, path, title)
    for name, color in CAPACITY_PERCENTILES:
        pts = [(s["achieved"], s["latency_us"][name], s["verdict"]) for s in steps if s["latency_us"].get(name)]
        ax.plot([x for x, _, _ in pts], [y for _, y, _ in pts], color=color, linewidth=1.2, alpha=0.7, label=name)
        for verdict, (marker, _) in VERDICT_MARKERS.items():
            mine = [(x, y) for x, y, v in pts if v == verdict]
            ax.scatter([x for x, _ in mine], [y for _, y in mine], marker=marker, color=color, s=36, zorder=3)
    for marker, label in VERDICT_MARKERS.values():  # the verdicts' legend: grey markers standing for every colour
        ax.scatter([], [], marker=marker, color="0.3", label=label)
    for i, t in enumerate(t for t in map(parse, result.get("slo") or []) if t.is_latency):
        ax.axhline(t.value, color="0.25", linestyle=(0, (4, 2 + i)), linewidth=1, label=f"SLO {t.text}")
    good, bad, found = result.get("last_good"), result.get("first_bad"), result.get("capacity")
    if found is not None:
        ax.axvline(found, color="black", linewidth=1.5, label=f"capacity {found:,.0f} {result.get('unit', '')}")
    if good is not None and bad is not None:
        ax.axvspan(good, bad, color="0.85", zorder=0, label=f"last good {good:,.0f} - first bad {bad:,.0f} (offered)")
    elif good is not None and found is None:
        ax.axvline(good, color="black", linestyle=":", linewidth=1.5, label=f"held {good:,.0f} (at least)")
    latency_scale(ax, "latency from the intended send time")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    ax.set_xlabel(f"achieved throughput ({result.get('unit') or 'per second'})")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return save(fig, path, title)


def compare_plot(panels: dict[str, dict[str, tuple[Histogram | None, Histogram | None]]], path: Path, label_a: str, label_b: str) -> Path:
    """Two runs on percentile plots: one panel per family/transport, one colour per request
    name, run A dashed and run B solid.  ``panels[panel][name] = (hist_a, hist_b)``."""
    keys = sorted(panels) or ["-"]
    cols = 2 if len(keys) > 1 else 1
    fig, axes = subplots(math.ceil(len(keys) / cols), cols, (7.5, 4.5))
    flat = [ax for r in axes for ax in r]
    for ax, key in zip(flat, keys, strict=False):
        lines: list[Line] = []
        for i, (name, (ha, hb)) in enumerate(sorted((panels.get(key) or {}).items())):
            lines += [(f"{name} [{label_a}]", ha, {"color": f"C{i % 10}", "linestyle": "--", "linewidth": 1.3})]
            lines += [(f"{name} [{label_b}]", hb, {"color": f"C{i % 10}", "linewidth": 1.3})]
        curves(ax, lines, legend_size=6, nothing="no shared data")
        ax.set_title(key)
    for ax in flat[len(keys) :]:
        ax.set_visible(False)
    return save(fig, path, f"{label_a} (dashed) vs {label_b} (solid)")


def soak_plot(intervals: Sequence[dict[str, Any]], fits: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """A soak's per-interval figures against time (minutes, at each interval's end): server RSS,
    open sessions, tools/call p50/p99 and the request rate, in four panels; the warm-up interval
    shaded, and the fitted line of every slope check (``fits``, from
    :func:`mcpfast.bench.soak.find_slope`: ``series``, ``intercept``, ``slope_per_h``,
    ``x_from_h``, ``x_to_h``; red when it is a finding) drawn over its series."""
    fig, axes = subplots(2, 2, (6, 4), sharex=True)
    (ax_rss, ax_sessions), (ax_latency, ax_rate) = axes
    minutes = [r["end_s"] / 60.0 for r in intervals]
    by_series = {f["series"]: f for f in fits if f.get("slope_per_h") is not None}

    def line(ax: Any, series: str, scale: float, color: str | None) -> None:
        fit = by_series.get(series)
        if fit is None or fit["slope_per_h"] < 0:  # a falling line is no leak, and bends away on a log axis
            return
        x0, x1 = fit["x_from_h"], fit["x_to_h"]
        a, b = fit["intercept"], fit["slope_per_h"]
        label = f"fit {series}: {100 * fit['relative_per_h']:+.1f} %/h" + (" (slope found)" if fit["finding"] else "")
        # sampled, and cut where it falls to zero: a falling line has no place on a log axis
        pts = [(x * 60.0, (a + b * x) * scale) for x in (x0 + (x1 - x0) * i / 40 for i in range(41)) if a + b * x > 0]
        if pts:
            color = RED if fit["finding"] else (color or "0.35")
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "--", color=color, linewidth=1.2, label=label)

    def points(ax: Any, key: str, scale: float, label: str, marker: str = "o") -> str | None:
        """Draw one per-interval series; its colour (for its fitted line), None when it is empty."""
        pts = [(m, r[key] * scale) for m, r in zip(minutes, intervals, strict=True) if r.get(key) is not None]
        if not pts:
            return None
        drawn = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, markersize=4, linewidth=1, label=label)
        import matplotlib.colors

        return str(matplotlib.colors.to_hex(drawn[0].get_color()))

    rss_color = points(ax_rss, "rss_kib", 1 / 1024.0, "RSS at interval end")
    points(ax_rss, "rss_max_kib", 1 / 1024.0, "RSS max in interval", marker=".")
    line(ax_rss, "server RSS", 1 / 1024.0, rss_color)
    ax_rss.set_ylabel("server RSS (MiB)")
    # a flat RSS drawn at full zoom turns a few KiB into a cliff: show at least 4 % of its level
    rss_mib = [r["rss_kib"] / 1024.0 for r in intervals if r.get("rss_kib") is not None]
    if rss_mib:
        lo, hi = min(rss_mib), max(rss_mib)
        pad = max(0.02 * (lo + hi) / 2 - (hi - lo) / 2, (hi - lo) * 0.05)
        ax_rss.set_ylim(lo - pad, hi + pad)
    ax_rss.ticklabel_format(axis="y", useOffset=False)
    points(ax_sessions, "sessions_open", 1.0, "server gauge (interval end)")
    points(ax_sessions, "sessions_open_generator", 1.0, "generator count", marker=".")
    ax_sessions.set_ylabel("open sessions")
    ax_sessions.set_ylim(bottom=0)
    ax_sessions.yaxis.get_major_locator().set_params(integer=True)
    p50_color = points(ax_latency, "call_p50_us", 1.0, "tools/call p50")
    p99_color = points(ax_latency, "call_p99_us", 1.0, "tools/call p99")
    line(ax_latency, "tools/call p50", 1.0, p50_color)
    line(ax_latency, "tools/call p99", 1.0, p99_color)
    latency_scale(ax_latency, "latency from intended send")
    points(ax_rate, "requests_per_s", 1.0, "requests/s")
    ax_rate.set_ylabel("requests per second")
    ax_rate.set_ylim(bottom=0)
    for ax in (ax_rss, ax_sessions, ax_latency, ax_rate):
        if intervals:
            ax.axvspan(intervals[0]["start_s"] / 60.0, intervals[0]["end_s"] / 60.0, color="0.9", zorder=0, label="warm-up")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    for ax in (ax_latency, ax_rate):
        ax.set_xlabel("minutes into the soak")
    return save(fig, path, title)
