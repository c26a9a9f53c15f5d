"""PNG plots of a bench run (matplotlib, Agg backend; no display needed).

Every function takes plain data (histograms, rows of a CSV, samples) and a path, draws one
figure, saves it and returns the path; :mod:`mcpfast.bench.report` reads a run directory and
feeds them.

* :func:`percentile_plot` - latency against percentile, both on log axes ("nines" on x), one
  line per request name, from the µs HDR histograms;
* :func:`timeline_plot` - throughput and p99 over time, from Locust's ``_stats_history.csv``;
* :func:`handshake_plot` - p50/p90/p99 of each handshake phase, per transport;
* :func:`sse_plot` - time to first event and inter-event gap (percentile curves);
* :func:`memory_plot` - server memory against open sessions (session churn);
* :func:`compare_plot` - two runs on one percentile plot (A dashed, B solid);
* :func:`soak_plot` - a soak's RSS, open sessions, latency and rate per interval, with the
  fitted slopes;
* :func:`grouped_bar_plot` - one bar per series in each group (e.g. throughput per scenario per
  server), optionally with a reference line (e.g. a ratio of 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcpfast.bench.procs import least_squares

__all__ = [
    "compare_plot",
    "grouped_bar_plot",
    "handshake_plot",
    "memory_plot",
    "percentile_curve",
    "percentile_plot",
    "soak_plot",
    "sse_plot",
    "throughput",
    "timeline_plot",
]

MAX_NINES = 6  # 99.9999%
DPI = 110


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def percentile_curve(h: Any, steps_per_decade: int = 20) -> tuple[list[float], list[float]]:
    """(x, y) of a percentile curve: x = 1 / (1 - p) ("nines"; 10 = p90, 100 = p99), y = ms.

    Percentiles are taken log-spaced in (1 - p) down to one sample (1 / count), plus the max.
    """
    n = int(h.total_count)
    if n <= 0:
        return [], []
    top = min(math.log10(n), MAX_NINES)
    k_max = max(int(top * steps_per_decade), 1)
    ps = [100.0 * (1.0 - 10 ** (-k / steps_per_decade)) for k in range(k_max + 1)]
    values = h.percentiles(ps)
    xs = [1.0 / (1.0 - p / 100.0) if p < 100.0 else float(n) for p in ps]
    ys = [v / 1000.0 for v in values]
    xs.append(max(float(n), xs[-1]))
    ys.append(h.max / 1000.0)
    return xs, ys


def _nines_axis(ax: Any, max_x: float) -> None:
    ax.set_xscale("log")
    ticks, labels = [], []
    for k, label in enumerate(["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"]):
        x = 10.0**k
        if x <= max(max_x, 10.0) * 1.01:
            ticks.append(x)
            labels.append(label)
    ticks[0], labels[0] = 1.0, "0%"
    ax.set_xticks(ticks)
    ax.set_xticklabels(labels)
    ax.minorticks_off()
    ax.set_xlim(1.0, max(max_x, 10.0) * 1.2)
    ax.set_xlabel("percentile")


def _finish(fig: Any, path: Path) -> Path:
    plt = _plt()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def percentile_plot(curves: dict[str, Any], path: Path, title: str) -> Path:
    """One line per name; ``curves`` maps a label to a Histogram (µs)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5))
    max_x = 10.0
    drawn = 0
    for label, h in sorted(curves.items()):
        xs, ys = percentile_curve(h)
        if not xs:
            continue
        ax.plot(xs, ys, label=f"{label} (n={h.total_count})", linewidth=1.4)
        max_x = max(max_x, xs[-1])
        drawn += 1
    if drawn:
        _nines_axis(ax, max_x)
        ax.set_yscale("log")
        ax.set_ylabel("latency (ms, log)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    else:
        _empty(ax, "no requests")
    ax.set_title(title)
    return _finish(fig, path)


def _float(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def timeline_plot(history: Sequence[dict[str, str]], path: Path, title: str, max_names: int = 8) -> Path:
    """Throughput and p99 over time from ``_stats_history.csv`` rows (one a second).

    Throughput is the difference of ``Total Request Count`` between consecutive rows over their
    time difference (exact, unlike Locust's smoothed ``Requests/s``); p99 is Locust's ``99%``
    column (ms, its recent-window percentile, rounded).
    """
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    series: dict[str, list[tuple[float, float | None, float | None]]] = {}
    t0: float | None = None
    for row in history:
        t = _float(row.get("Timestamp"))
        if t is None:
            continue
        t0 = t if t0 is None else min(t0, t)
        name = row.get("Name") or "?"
        series.setdefault(name, []).append((t, _float(row.get("Total Request Count")), _float(row.get("99%"))))
    # a name appears in the history once it has requests: before that its count was 0
    rates = {name: throughput(pts if t0 is None or pts[0][0] <= t0 else [(t0, 0.0, None), *pts]) for name, pts in series.items()}
    if t0 is None or not series:
        _empty(ax1, "no history")
        _empty(ax2, "no history")
    else:
        others = sorted((n for n in series if n != "Aggregated"), key=lambda n: -max([r for _, r in rates[n]] or [0.0]))
        for name in ["Aggregated", *others[:max_names]]:
            pts = series.get(name)
            if not pts:
                continue
            style: dict[str, Any] = {"linewidth": 2.2, "color": "black"} if name == "Aggregated" else {"linewidth": 1.0}
            ax1.plot([t - t0 for t, _ in rates[name]], [r for _, r in rates[name]], label=name, **style)
            p99 = [p[2] if p[2] is not None else math.nan for p in pts]
            for i, v in enumerate(p99):  # Locust reports 0 until its percentile window has data
                if v:
                    break
                p99[i] = math.nan
            ax2.plot([p[0] - t0 for p in pts], p99, label=name, **style)
        ax1.set_ylabel("requests/s")
        ax2.set_ylabel("p99 (ms, Locust window)")
        ax2.set_yscale("symlog", linthresh=1.0)
        ax2.set_xlabel("seconds since start")
        for ax in (ax1, ax2):
            ax.grid(True, alpha=0.3)
        ax1.legend(fontsize=7, loc="best")
    ax1.set_title(title)
    return _finish(fig, path)


def throughput(points: Sequence[tuple[float, float | None, Any]]) -> list[tuple[float, float]]:
    """(t, requests/s) between consecutive (t, cumulative count, ...) points; rows with the
    same timestamp or no count are skipped."""
    out: list[tuple[float, float]] = []
    prev: tuple[float, float] | None = None
    for t, count, *_ in points:
        if count is None:
            continue
        if prev is not None and t > prev[0]:
            out.append((t, max(count - prev[1], 0.0) / (t - prev[0])))
        if prev is None or t > prev[0]:
            prev = (t, count)
    return out


def handshake_plot(phases: dict[str, list[tuple[str, dict[str, Any]]]], path: Path, title: str) -> Path:
    """Grouped bars per phase: p50, p90, p99 (ms, log).  ``phases`` maps a transport to
    ``[(phase label, row)]`` where a row has ``p50_us``/``p90_us``/``p99_us``/``count``."""
    plt = _plt()
    n = max(len(phases), 1)
    fig, axes = plt.subplots(1, n, figsize=(6 * n, 4.5), squeeze=False)
    for ax, (transport, items) in zip(axes[0], sorted(phases.items()) or [("-", [])], strict=False):
        if not items:
            _empty(ax, "no handshake data")
            ax.set_title(f"{transport}")
            continue
        width = 0.26
        xs = range(len(items))
        for i, (key, color) in enumerate((("p50_us", "#4c72b0"), ("p90_us", "#dd8452"), ("p99_us", "#c44e52"))):
            vals = [max((row.get(key) or 0) / 1000.0, 1e-3) for _, row in items]
            bars = ax.bar([x + (i - 1) * width for x in xs], vals, width, label=key[:-3], color=color)
            if key == "p50_us":
                for bar, v in zip(bars, vals, strict=True):
                    ax.annotate(f"{v:.3g}", (bar.get_x() + bar.get_width() / 2, v), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{label}\n(n={row.get('count')})" for label, row in items], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("latency (ms, log)")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(f"handshake phases, {transport}")
    fig.suptitle(title)
    return _finish(fig, path)


def sse_plot(data: dict[str, dict[str, dict[str, Any]]], path: Path, title: str) -> Path:
    """Per transport, two panels: time to first event and inter-event gap (percentile curves).

    ``data[transport]["first"|"gap"]`` maps a label (``sse:first-event`` ...) to a Histogram.
    """
    plt = _plt()
    transports = sorted(data) or ["-"]
    fig, axes = plt.subplots(len(transports), 2, figsize=(11, 4.2 * len(transports)), squeeze=False)
    for row_axes, transport in zip(axes, transports, strict=True):
        for ax, kind, label in ((row_axes[0], "first", "time to first event"), (row_axes[1], "gap", "inter-event gap")):
            curves = (data.get(transport) or {}).get(kind) or {}
            max_x, drawn = 10.0, 0
            for name, h in sorted(curves.items()):
                xs, ys = percentile_curve(h)
                if xs:
                    p50 = h.percentiles([50.0])[0] / 1000.0
                    ax.plot(xs, ys, label=f"{name} (n={h.total_count}, p50 {p50:.3g} ms)")
                    max_x = max(max_x, xs[-1])
                    drawn += 1
            if drawn:
                _nines_axis(ax, max_x)
                ax.set_yscale("log")
                ax.set_ylabel("ms (log)")
                ax.grid(True, which="both", alpha=0.3)
                ax.legend(fontsize=7, loc="upper left")
            else:
                _empty(ax, "no events")
            ax.set_title(f"{label}, {transport}")
    fig.suptitle(title)
    return _finish(fig, path)


def memory_plot(series: dict[str, dict[str, Any]], path: Path, title: str) -> Path:
    """Server RSS (MiB) against open sessions, one panel per transport.

    ``series[transport]`` has ``sessions`` and ``rss_kib`` (equal-length lists), ``xlabel`` and
    optionally ``note`` and ``fit`` (default True: a least-squares line gives KiB per session
    when the session count varies).
    """
    plt = _plt()
    transports = sorted(series) or ["-"]
    fig, axes = plt.subplots(1, len(transports), figsize=(6.5 * len(transports), 4.5), squeeze=False)
    for ax, transport in zip(axes[0], transports, strict=True):
        s = series.get(transport) or {}
        xs, ys = list(s.get("sessions") or []), [v / 1024.0 for v in s.get("rss_kib") or []]
        if not xs:
            _empty(ax, "no memory samples")
            ax.set_title(transport)
            continue
        ax.scatter(xs, ys, s=10, alpha=0.7, label="samples")
        fit = least_squares(xs, [v * 1024.0 for v in ys]) if s.get("fit", True) else None
        text = s.get("note") or ""
        if fit is not None:
            a, b, _ = fit
            lo, hi = min(xs), max(xs)
            ax.plot([lo, hi], [(a + b * lo) / 1024.0, (a + b * hi) / 1024.0], color="#c44e52", label=f"fit: {b:.2f} KiB/session")
        ax.set_xlabel(s.get("xlabel") or "open sessions")
        ax.set_ylabel("server RSS (MiB)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
        ax.set_title(f"server memory, {transport}" + (f"\n{text}" if text else ""), fontsize=9)
    fig.suptitle(title)
    return _finish(fig, path)


def compare_plot(panels: dict[str, dict[str, tuple[Any | None, Any | None]]], path: Path, label_a: str, label_b: str) -> Path:
    """Two runs on percentile plots: one panel per family/transport, one colour per request
    name, run A dashed and run B solid.  ``panels[panel][name] = (hist_a, hist_b)``."""
    plt = _plt()
    keys = sorted(panels) or ["-"]
    cols = 2 if len(keys) > 1 else 1
    rows = math.ceil(len(keys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols, 4.5 * rows), squeeze=False)
    flat = [ax for r in axes for ax in r]
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0", "C1", "C2", "C3"])
    for ax, key in zip(flat, keys, strict=False):
        max_x, drawn = 10.0, 0
        for i, (name, (ha, hb)) in enumerate(sorted((panels.get(key) or {}).items())):
            color = colors[i % len(colors)]
            for h, style, who in ((ha, "--", label_a), (hb, "-", label_b)):
                if h is None:
                    continue
                xs, ys = percentile_curve(h)
                if xs:
                    ax.plot(xs, ys, style, color=color, linewidth=1.3, label=f"{name} [{who}]")
                    max_x = max(max_x, xs[-1])
                    drawn += 1
        if drawn:
            _nines_axis(ax, max_x)
            ax.set_yscale("log")
            ax.set_ylabel("latency (ms, log)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6, loc="best")
        else:
            _empty(ax, "no shared data")
        ax.set_title(key)
    for ax in flat[len(keys) :]:
        ax.set_visible(False)
    fig.suptitle(f"{label_a} (dashed) vs {label_b} (solid)")
    return _finish(fig, path)


def grouped_bar_plot(
    groups: Sequence[str],
    series: dict[str, Sequence[float | None]],
    path: Path,
    title: str,
    ylabel: str,
    *,
    log: bool = True,
    reference: float | None = None,
    value_format: str | None = None,
) -> Path:
    """One group of bars per entry of ``groups``, one bar per series (``series[label][i]`` is the
    value in group ``i``; None or non-positive on a log axis: no bar), the value written above
    each bar (``value_format``, default: no decimals from 100 up, else 3 significant digits), and
    an optional horizontal ``reference`` line."""
    plt = _plt()
    labels = list(series)
    width = 0.8 / max(len(labels), 1)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.3 * len(groups) * max(len(labels), 1) * 0.6 + 2.0), 5))
    drawn = 0
    for i, label in enumerate(labels):
        values = list(series[label])
        xs, ys = [], []
        for g, v in enumerate(values):
            if v is None or not math.isfinite(v) or (log and v <= 0):
                continue
            xs.append(g - 0.4 + width * (i + 0.5))
            ys.append(v)
        if not xs:
            continue
        bars = ax.bar(xs, ys, width=width * 0.95, label=label)
        for bar, v in zip(bars, ys, strict=True):
            text = value_format.format(v) if value_format else (f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}")
            ax.annotate(
                text,
                (bar.get_x() + bar.get_width() / 2, v),
                ha="center",
                va="bottom",
                fontsize=6,
                xytext=(0, 1),
                textcoords="offset points",
            )
        drawn += 1
    if drawn:
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, rotation=20, ha="right", fontsize=8)
        if log:
            ax.set_yscale("log")
        if reference is not None:
            ax.axhline(reference, color="0.3", linewidth=1.0, linestyle="--")
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    else:
        _empty(ax, "no data")
    ax.set_title(title)
    return _finish(fig, path)


def soak_plot(intervals: Sequence[dict[str, Any]], fits: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """A soak's per-interval figures against time (minutes, at each interval's end): server RSS,
    open sessions, tools/call p50/p99 and the request rate, in four panels; the warm-up interval
    shaded, and the fitted line of every slope check (``fits``, from
    :func:`mcpfast.bench.soak.find_slope`: ``series``, ``intercept``, ``slope_per_h``,
    ``x_from_h``, ``x_to_h``; red when it is a finding) drawn over its series."""
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    (ax_rss, ax_sessions), (ax_latency, ax_rate) = axes
    minutes = [r["end_s"] / 60.0 for r in intervals]
    by_series = {f["series"]: f for f in fits if f.get("slope_per_h") is not None}

    def line(ax: Any, series: str, scale: float, color: str | None) -> None:
        fit = by_series.get(series)
        if fit is None or fit["slope_per_h"] < 0:  # a falling line is no leak, and bends away on a log axis
            return
        x0, x1 = fit["x_from_h"], fit["x_to_h"]
        a, b = fit["intercept"], fit["slope_per_h"]
        color = "#c44e52" if fit["finding"] else (color or "0.35")
        label = f"fit {series}: {100 * fit['relative_per_h']:+.1f} %/h" + (" (slope found)" if fit["finding"] else "")
        # sampled, and cut where it falls to zero: a falling line has no place on a log axis
        xs = [x0 + (x1 - x0) * i / 40 for i in range(41)]
        pts = [(x * 60.0, (a + b * x) * scale) for x in xs if a + b * x > 0]
        if pts:
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
    p50_color = points(ax_latency, "call_p50_us", 1 / 1000.0, "tools/call p50")
    p99_color = points(ax_latency, "call_p99_us", 1 / 1000.0, "tools/call p99")
    line(ax_latency, "tools/call p50", 1 / 1000.0, p50_color)
    line(ax_latency, "tools/call p99", 1 / 1000.0, p99_color)
    ax_latency.set_ylabel("latency from intended send (ms)")
    ax_latency.set_yscale("log")
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
    fig.suptitle(title)
    return _finish(fig, path)
