"""``report.html``: one self-contained page per run, the verdict first (pure Python, no Locust
import).

A plain ``locust`` run writes ``<prefix>_report.html`` beside its ``_histograms.json`` at test
stop (:mod:`mcpfast.locust.stats`, from :func:`write_run_page`); ``mcpfast bench`` and ``mcpfast
capacity`` write ``report.html`` in their folder from the same pieces
(:mod:`mcpfast.results.page`). The page opens from a file with no network: its style is inline,
its charts inline SVG (:mod:`mcpfast.locust.svg`), its pictures data URIs, and it runs no script;
its figures are also in a JSON block (``<script type="application/json" id="report-data">``) for
a program to read.

What a run shows, in this order: the verdict (thresholds, failures and their reasons, a
generator that set the pace, missing workers), the facts of the run, the table per request name
(µs histograms: whole µs below 1 ms, ms below 1 s, by :func:`mcpfast.locust.units.latency_text`,
on every axis too), latency by percentile, p50 and p99 per interval and requests per second per
interval (both from the interval log, ``.hlog``), the handshake phases and the failures with
their reasons. A run with no request says so and draws no chart; a file from an older version
missing a part says which part is missing.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from mcpfast.locust import intervals as iv
from mcpfast.locust import svg, webui_view
from mcpfast.locust.histogram import HistogramSet
from mcpfast.locust.hlog import IntervalLog
from mcpfast.locust.units import latency_text

__all__ = [
    "GENERATOR_BOUND",
    "PERCENTILES",
    "Verdict",
    "facts",
    "figure",
    "generator_bound",
    "page",
    "run_blocks",
    "run_facts",
    "run_verdict",
    "table",
    "timeline_charts",
    "write_run_page",
]

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
GENERATOR_BOUND = 0.9
"""Share of its cores above which the load generator, not the server, set a run's pace (its
figures are then a floor): the run page's and ``mcpfast bench``'s rule."""
TIMELINE_NAMES = 4  # the busiest names a timeline draws besides the aggregate
NO_LOG = "No interval log (.hlog) beside these histograms (a run of an older mcpfast, or the file is gone): no timeline."

CSS = """
:root { color-scheme: light dark; --fg: #1d1d1f; --muted: #666; --line: #ddd; --bg: #fff; --panel: #fafafa;
        --red: #c62828; --ok: #2e7d32; --warn: #b26a00; }
@media (prefers-color-scheme: dark) { :root { --fg: #e8e8e8; --muted: #aaa; --line: #444; --bg: #121212; --panel: #1c1c1c; } }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg);
       margin: 0 auto; padding: 16px 20px 40px; max-width: 1280px; }
h1 { font-size: 20px; margin: 0 0 10px; } h2 { font-size: 16px; margin: 26px 0 8px; border-bottom: 1px solid var(--line); }
h3 { font-size: 14px; margin: 0 0 4px; font-weight: 600; }
.muted { color: var(--muted); }
.verdict { border-left: 6px solid var(--ok); background: var(--panel); padding: 10px 14px; margin: 8px 0 14px; }
.verdict.failed { border-color: var(--red); } .verdict.warn { border-color: var(--warn); }
.verdict .headline { font-size: 17px; font-weight: 600; margin: 0 0 4px; }
.verdict ul { margin: 4px 0 0; padding-left: 20px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 4px 0 10px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 10px; text-align: right; white-space: nowrap; }
th { font-weight: 600; } td.text, th.text { text-align: left; white-space: normal; word-break: break-word; }
tr.fail td { color: var(--red); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; word-break: break-word; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
.chart { flex: 1 1 480px; min-width: 360px; max-width: 760px; background: var(--panel); border: 1px solid var(--line);
         border-radius: 4px; padding: 8px; margin: 0; }
.chart svg { width: 100%; height: auto; display: block; }
.chart svg text { fill: var(--fg); font-size: 11px; }
.chart svg .grid { stroke: var(--line); stroke-width: 1; } .chart svg .axis { stroke: var(--muted); stroke-width: 1; }
.legend { display: flex; flex-wrap: wrap; gap: 2px 14px; font-size: 12px; margin-top: 4px; }
.legend span.swatch { display: inline-block; width: 18px; height: 0; border-top: 2px solid; vertical-align: middle; margin-right: 4px; }
.legend span.swatch.dash { border-top-style: dashed; }
p.empty { color: var(--muted); font-style: italic; margin: 8px 0; }
img.plot { max-width: 100%; border: 1px solid var(--line); margin: 6px 0; }
"""


# -- pieces of a page ---------------------------------------------------------------------------------
@dataclass
class Verdict:
    """What the page says first: ``state`` ``ok``, ``warn`` or ``failed``, one headline, then
    the lines that explain it."""

    state: str
    headline: str
    lines: list[str] = field(default_factory=list)

    def html(self) -> str:
        items = "".join(f"<li>{escape(line)}</li>" for line in self.lines)
        return (
            f'<section class="verdict {escape(self.state)}" id="verdict"><p class="headline">{escape(self.headline)}</p>'
            + (f"<ul>{items}</ul>" if items else "")
            + "</section>"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "headline": self.headline, "lines": list(self.lines)}


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], text: int | Iterable[int] = 2, failed: Iterable[bool] = ()) -> str:
    """A table whose text columns (the first ``text``, or those listed) are left-aligned, the
    rest figures; every cell escaped; a row marked in ``failed`` is drawn red."""
    marks = list(failed)
    texts = set(range(text)) if isinstance(text, int) else set(text)
    head = "".join(f'<th class="{"text" if i in texts else ""}">{escape(str(h))}</th>' for i, h in enumerate(header))
    body = []
    for n, row in enumerate(rows):
        cells = "".join(f'<td class="{"text" if i in texts else ""}">{escape("" if c is None else str(c))}</td>' for i, c in enumerate(row))
        body.append(f'<tr class="{"fail" if n < len(marks) and marks[n] else ""}">{cells}</tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def facts(pairs: Iterable[tuple[str, Any]]) -> str:
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in pairs if v not in (None, ""))
    return f'<dl class="facts">{items}</dl>'


def figure(path: Path, caption: str) -> str:
    """A PNG inlined as a data URI (nothing when the file is missing)."""
    try:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return ""
    return f'<img class="plot" alt="{escape(caption)}" title="{escape(caption)}" src="data:image/png;base64,{data}">'


def _json_block(data: Any) -> str:
    # < > & escaped: no text of the data can end the block or open markup
    text = json.dumps(data, separators=(",", ":"), default=str).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="report-data">{text}</script>'


def page(title: str, verdict: Verdict, body: Sequence[str], data: dict[str, Any] | None = None) -> str:
    """The whole document: the title, the verdict, then ``body`` (HTML pieces, in order)."""
    made = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return "".join(
        [
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
            f"<h1>{escape(title)}</h1>",
            verdict.html(),
            *body,
            f'<p class="muted">Written {made} by mcpfast from the run\'s saved files (µs HDR histograms and their interval log).</p>',
            _json_block({"format": "mcpfast-report", "verdict": verdict.to_dict(), **(data or {})}),
            "</body></html>\n",
        ]
    )


# -- one run's figures --------------------------------------------------------------------------------
def _sets(data: dict[str, Any]) -> tuple[HistogramSet, HistogramSet]:
    ok, failed = HistogramSet(), HistogramSet()
    for target, key in ((ok, "histograms"), (failed, "failed_histograms")):
        for (request_type, name), h in iv.histograms_by_key(data.get(key) or []).items():
            target.get(request_type, name).merge(h)
    return ok, failed


def _label(key: tuple[str, str], keys: Iterable[tuple[str, str]]) -> str:
    """A chart's name for a key: its name, with its type when another type has the same name."""
    return key[1] if sum(1 for k in keys if k[1] == key[1]) == 1 else f"{key[0]} {key[1]}"


def generator_bound(gen: dict[str, Any] | None) -> bool:
    share = (gen or {}).get("cpu_share")
    return share is not None and float(share) > GENERATOR_BOUND


def timeline_charts(log: IntervalLog | None, keys: Sequence[tuple[str, str]], origin: float | None) -> list[dict[str, Any]]:
    """p50 and p99 per interval, and requests per second per interval, of the aggregate and the
    busiest :data:`TIMELINE_NAMES` of ``keys``, from the interval log; seconds since
    ``origin`` (the test's start) on x."""
    titles = ("p50 and p99 per interval", "Requests per second per interval")
    if log is None:
        return [{"title": t, "empty": NO_LOG, "series": [], "hlines": []} for t in titles]
    found = iv.series(log, keys, origin)
    grid = found.get(iv.AGGREGATED, [])
    if not grid:
        return [
            {"title": t, "empty": "No interval with a request in the log: nothing to draw.", "series": [], "hlines": []} for t in titles
        ]
    busiest = sorted((k for k in found if k != iv.AGGREGATED), key=lambda k: -sum(p.count for p in found[k]))[:TIMELINE_NAMES]
    shown = [iv.AGGREGATED, *busiest] if len(busiest) > 1 else busiest
    latency: list[dict[str, Any]] = []
    rate: list[dict[str, Any]] = []
    for i, key in enumerate(shown):
        color = "#222222" if key == iv.AGGREGATED else webui_view.COLORS[i % len(webui_view.COLORS)]
        label = "Aggregated" if key == iv.AGGREGATED else _label(key, keys)
        pts = found[key]
        for p, dash in ((50.0, True), (99.0, False)):
            points = [[round(q.start + q.length, 3), float(q.percentile(p))] for q in pts]
            latency.append({"label": f"{label} p{p:g}", "color": color, "dash": dash, "points": points})
        rate.append({"label": label, "color": color, "points": [[round(t, 3), round(r, 3)] for t, r in iv.rates(pts, grid)]})
    ends = [q.start + q.length for q in grid]
    x = webui_view.linear_axis(min(0.0, min(q.start for q in grid)), max(max(ends), 1.0), "seconds since the test started", " s")
    values = [pt[1] for s in latency for pt in s["points"]]
    top_rate = max([pt[1] for s in rate for pt in s["points"]] + [1.0])
    rate_axis = webui_view.linear_axis(0.0, top_rate * 1.05, "requests per second")
    return [
        {
            "title": titles[0],
            "x": x,
            "y": webui_view.latency_axis(min(values), max(values)),
            "series": latency,
            "hlines": [],
            "empty": None,
        },
        {"title": titles[1], "x": x, "y": rate_axis, "series": rate, "hlines": [], "empty": None},
    ]


def _count(n: int) -> str:
    return f"{n:,}"


def run_blocks(
    data: dict[str, Any], log: IntervalLog | None, reasons: Sequence[tuple[str, str, str, int]] = ()
) -> tuple[str, dict[str, Any]]:
    """One run's table, charts, phases and failures as HTML, and the charts' specifications
    (``data``: a ``_histograms.json``; ``log``: its interval log; ``reasons``: Locust's
    ``(type, name, reason, count)`` of the failures)."""
    ok, failed = _sets(data)
    rows, total = webui_view.name_rows(ok, failed, PERCENTILES)
    if total is None:
        return '<p class="empty">No request completed in this run: no table, no chart.</p>', {}
    header = ["Type", "Name", "Requests", "Fails", *(f"p{p:g}" for p in PERCENTILES), "Max"]

    def cells(r: webui_view.NameRow) -> list[str]:
        figures = [latency_text(r.values[p]) for p in PERCENTILES] + [latency_text(r.max)] if r.values else ["–"] * (len(PERCENTILES) + 1)
        return [r.request_type, r.name, _count(r.requests), _count(r.failures), *figures]

    keys = [(r.request_type, r.name) for r in rows if r.ok.total_count]
    duration = data.get("duration_s")
    html = [table(header, [cells(r) for r in [*rows, total]], failed=[r.failures > 0 for r in [*rows, total]])]
    if duration:
        html.append(f'<p class="muted">{_count(total.requests)} requests in {float(duration):.1f} s ({total.requests / float(duration):,.0f}/s); '
                    f"percentiles of the successful requests, {escape(str(data.get('latency_origin') or 'from the send time'))}.</p>")  # fmt: skip
    charts = [webui_view.percentile_chart([(_label(k, keys), ok.get(*k)) for k in keys])]
    charts += timeline_charts(log, keys, data.get("start_time"))
    html.append('<div class="charts">' + "".join(svg.chart(c) for c in charts) + "</div>")
    phases = webui_view.phases(rows)
    if phases:
        html.append("<h3>Handshake phases</h3>")
        html.append(table(["Type", "Phase", "Requests", "Fails", "p50", "p99"], [[p["type"], p["name"], p["requests"], p["failures"], p["p50"], p["p99"]] for p in phases]))  # fmt: skip
    fails = webui_view.failures(failed, reasons)
    if fails:
        html.append('<h3>Failures by reason <span class="muted">(latencies of the failed requests)</span></h3>')
        body = [
            [f["type"] if not i else "", f["name"] if not i else "", f["count_text"] if not i else "", r["reason"], r["count"],
             *((f["p50"], f["p99"], f["max"]) if not i else ("", "", ""))]
            for f in fails
            for i, r in enumerate(f["reasons"] or [{"reason": "(no reason recorded)", "count": ""}])
        ]  # fmt: skip
        html.append(table(["Type", "Name", "Fails", "Reason", "Times", "p50", "p99", "Max"], body, text=4))
    return "".join(html), {"charts": charts, "requests": total.requests, "failures": total.failures}


def run_verdict(data: dict[str, Any], reasons: Sequence[tuple[str, str, str, int]] = (), has_log: bool = True) -> Verdict:
    """The verdict of one run: its thresholds, its failures (the commonest reasons named), no
    request at all, missing workers, a generator that set the pace."""
    ok, failed = _sets(data)
    requests, failures = ok.total_count + failed.total_count, failed.total_count
    lines: list[str] = []
    state = "ok"
    gates = data.get("thresholds") or []
    broken = [g for g in gates if not g.get("passed")]
    for g in broken:
        lines.append(f"threshold failed: {g.get('threshold')} (measured {_measured(g)})")
    if broken:
        state = "failed"
    if failures:
        state = "failed"
        top = sorted(reasons, key=lambda r: -r[3])[:3]
        lines += [f"{name}: {reason} ({count:,})" for _t, name, reason, count in top]
    if data.get("complete") is False:
        lines.append(f"written without the final figures of workers {', '.join(map(str, data.get('missing_workers') or []))}")
        state = "failed" if state == "failed" else "warn"
    gen = data.get("generator") or {}
    if generator_bound(gen):
        lines.append(f"the load generator used {float(gen['cpu_share']):.0%} of its {gen.get('cores')} cores: it may have set the pace, "
                     "so these figures are a floor")  # fmt: skip
        state = "failed" if state == "failed" else "warn"
    if not has_log:
        lines.append(NO_LOG)
    if not requests:
        return Verdict("failed", "No request completed: nothing was measured", lines)
    duration = float(data.get("duration_s") or 0)
    rate = f" in {duration:.1f} s ({requests / duration:,.0f}/s)" if duration else ""
    if failures:
        headline = f"FAILED: {failures:,} of {requests:,} requests failed ({failures / requests:.2%}){rate}"
    elif broken:
        headline = f"FAILED: {len(broken)} of {len(gates)} thresholds failed; {requests:,} requests{rate}, none failed"
    else:
        passed = f"; {len(gates)} threshold{'s' if len(gates) != 1 else ''} passed" if gates else ""
        headline = f"OK: {requests:,} requests{rate}, none failed{passed}"
    return Verdict(state, headline, lines)


def _measured(gate: dict[str, Any]) -> str:
    value = gate.get("measured")
    if gate.get("measured_unit") == "us" and isinstance(value, (int, float)) and math.isfinite(value):
        return latency_text(float(value))
    return str(gate.get("measured_text") or value)


def run_facts(data: dict[str, Any]) -> str:
    """The run's facts: target, times, model, generator, versions."""
    gen = data.get("generator") or {}
    start = data.get("start_time")
    return facts(
        [
            ("target", data.get("host")),
            ("started", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(start))) if start else None),
            ("duration", f"{float(data['duration_s']):.1f} s" if data.get("duration_s") else None),
            ("latency", data.get("latency_origin")),
            ("runner", data.get("runner")),
            ("generator", f"{float(gen['cpu_share']):.0%} of {gen.get('cores')} cores" if gen.get("cpu_share") is not None else None),
            ("versions", " ".join(f"{k} {data[k + '_version']}" for k in ("mcpfast", "locust") if data.get(k + "_version"))),
        ]
    )


def write_run_page(path: str | Path, data: dict[str, Any], log: IntervalLog | None, reasons: Sequence[tuple[str, str, str, int]] = (), title: str | None = None) -> Path:  # fmt: skip
    """``<prefix>_report.html`` of one run (``data``: its ``_histograms.json``); written
    atomically; returns its path."""
    path = Path(path)
    blocks, figures = run_blocks(data, log, reasons)
    verdict = run_verdict(data, reasons, has_log=log is not None)
    body = ["<h2>The run</h2>", run_facts(data), "<h2>Latency per request name</h2>", blocks]
    text = page(title or f"mcpfast run {path.name.removesuffix('_report.html')}", verdict, body, {"run": figures})
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
