"""``mcpfast report RUN`` and ``mcpfast compare RUN_A RUN_B``: plots and ratio tables from the
files a bench run saved (``summary.json``, ``<family>-<transport>_histograms.json``,
``_stats_history.csv``, ``_memory.csv``, ``_churn.json``); nothing is measured again."""

from __future__ import annotations

import bisect
import csv
import json
import math
from pathlib import Path
from typing import Any

from mcpfast.bench import plots
from mcpfast.bench.procs import read_json

__all__ = [
    "compare_rows",
    "compare_runs",
    "generate_plots",
    "handshake_phases",
    "load_histograms",
    "load_summary",
    "memory_series",
    "render_compare",
]

HANDSHAKE_ORDER = ("initialize", "notifications/initialized", "server/discover", "first call", "DELETE")

GENERATOR_BOUND_NOTE = "generator-bound: this figure is a floor"


def generator_label(fam: dict[str, Any]) -> str:
    """``"73% of 1 core"`` (+ the generator-bound note) for tables and plot titles."""
    gen = fam.get("generator")
    if not gen:
        return ""
    cores = gen.get("cores") or 1
    text = f"generator {100 * gen['cpu_share']:.0f}% of {cores} core{'s' if cores != 1 else ''}"
    return f"{text}, {GENERATOR_BOUND_NOTE}" if gen.get("bound") else text


def load_summary(run: Path) -> dict[str, Any]:
    path = Path(run) / "summary.json"
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise SystemExit(f"mcpfast: {path} not found (is {run} a bench run directory?)") from None
    except ValueError as exc:
        raise SystemExit(f"mcpfast: {path} is not valid JSON: {exc}") from None
    if data.get("format") != "mcpfast-bench":
        raise SystemExit(f"mcpfast: {path} is not an mcpfast bench summary")
    return data


def _prefix(run: Path, fam: dict[str, Any]) -> Path:
    return Path(run) / (fam.get("prefix") or f"{fam['family']}-{fam['transport']}")


def load_histograms(prefix: Path, failed: bool = False) -> dict[tuple[str, str], Any]:
    """``{(type, name): Histogram}`` from ``<prefix>_histograms.json`` (empty when missing)."""
    from mcpfast.locust.histogram import Histogram

    try:
        with open(f"{prefix}_histograms.json", encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    key = "failed_histograms" if failed else "histograms"
    return {(e["type"], e["name"]): Histogram.from_dict(e) for e in data.get(key) or []}


def _read_csv(path: Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except OSError:
        return []


def handshake_phases(rows: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The handshake family's rows in phase order: initialize, initialized (or discover),
    first call, DELETE."""

    def phase(name: str) -> str | None:
        if name.startswith("tools/call:") and name.endswith("(first)"):
            return "first call"
        return name if name in HANDSHAKE_ORDER else None

    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for r in rows:
        p = phase(r["name"])
        if p is not None and r.get("count"):
            found[p] = (r["name"], r)
    return [found[p] for p in HANDSHAKE_ORDER if p in found]


def _cumulative(history: list[dict[str, str]], name: str) -> tuple[list[float], list[float]]:
    """(timestamps, cumulative request counts) of one name; 0 at the history's first row (a name
    appears in Locust's history only once it has requests)."""
    ts: list[float] = []
    counts: list[float] = []
    starts = [float(r["Timestamp"]) for r in history[:1] if r.get("Timestamp")]
    for row in history:
        if row.get("Name") != name:
            continue
        try:
            ts.append(float(row["Timestamp"]))
            counts.append(float(row["Total Request Count"]))
        except (KeyError, ValueError):
            continue
    if ts and starts and starts[0] < ts[0]:
        ts.insert(0, starts[0])
        counts.insert(0, 0.0)
    return ts, counts


def _interp(ts: list[float], vs: list[float], t: float) -> float:
    if not ts:
        return 0.0
    if t <= ts[0]:
        return vs[0]
    if t >= ts[-1]:
        return vs[-1]
    i = bisect.bisect_right(ts, t)
    t0, t1, v0, v1 = ts[i - 1], ts[i], vs[i - 1], vs[i]
    return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def memory_series(run: Path, fam: dict[str, Any]) -> dict[str, Any] | None:
    """Server memory against open sessions for one churn run (None without samples).

    HTTP: one server process; open sessions at each sample = sessions initialised minus sessions
    DELETEd so far (cumulative counts of Locust's history, interpolated).  stdio: a session is a
    server process; x = live server processes, y = their summed RSS.
    """
    prefix = _prefix(run, fam)
    samples = _read_csv(Path(f"{prefix}_memory.csv"))
    if not samples:
        return None
    churn = fam.get("churn") or read_json(Path(f"{prefix}_churn.json")) or {}
    ts = [float(s["timestamp"]) for s in samples]
    rss = [int(s["rss_kib"]) for s in samples]
    if fam["transport"] == "http":
        history = _read_csv(Path(f"{prefix}_stats_history.csv"))
        ti, ci = _cumulative(history, "initialize")
        td, cd = _cumulative(history, "DELETE")
        sessions = [max(_interp(ti, ci, t) - _interp(td, cd, t), 0.0) for t in ts]
        per = churn.get("server_rss_kib_per_abandoned_session")
        note = (
            f"{churn.get('sessions_abandoned')} sessions abandoned, {churn.get('sessions_deleted')} deleted; "
            f"{per} KiB per abandoned session (start->end RSS)"
            if churn
            else ""
        )
        return {"sessions": sessions, "rss_kib": rss, "xlabel": "open sessions (initialised - DELETEd)", "note": note}
    procs = [int(s["processes"]) for s in samples]
    per_proc = [r / p for r, p in zip(rss, procs, strict=True) if p]
    note = (
        f"one process per session (restarted per session); mean {sum(per_proc) / len(per_proc) / 1024:.1f} MiB per process"
        if per_proc
        else ""
    )
    steady = _steady_per_process(Path(run) / "tools_call-stdio_memory.csv")
    if steady is not None:
        note += f"\nsteady (tools_call, long-lived processes): median {steady / 1024:.1f} MiB per process"
    return {"sessions": procs, "rss_kib": rss, "xlabel": "open sessions (live server processes)", "note": note, "fit": False}


def _steady_per_process(path: Path) -> float | None:
    samples = _read_csv(path)
    values = sorted(int(s["rss_kib"]) / int(s["processes"]) for s in samples if int(s["processes"] or 0) > 0)
    return values[len(values) // 2] if values else None


def generate_plots(run: Path, summary: dict[str, Any] | None = None) -> list[Path]:
    """(Re)draw every plot of a run from its saved files; returns the PNG paths."""
    run = Path(run)
    summary = summary if summary is not None else load_summary(run)
    made: list[Path] = []
    families = [f for f in summary.get("families", []) if f.get("family") != "*" and f.get("status") != "not run"]
    handshake: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    sse: dict[str, dict[str, dict[str, Any]]] = {}
    memory: dict[str, dict[str, Any]] = {}
    for fam in families:
        family, transport = fam["family"], fam["transport"]
        prefix = _prefix(run, fam)
        hists = load_histograms(prefix)
        curves = {name: h for (_t, name), h in hists.items()}
        gen = generator_label(fam)
        title = f"{family} over {transport}: latency by percentile (µs HDR histograms)" + (f"\n{gen}" if gen else "")
        made.append(plots.percentile_plot(curves, run / f"latency-{family}-{transport}.png", title))
        history = _read_csv(Path(f"{prefix}_stats_history.csv"))
        made.append(
            plots.timeline_plot(
                history,
                run / f"timeline-{family}-{transport}.png",
                f"{family} over {transport}: throughput and p99" + (f"\n{gen}" if gen else ""),
            )
        )
        rows = [r for r in summary.get("rows", []) if r["family"] == family and r["transport"] == transport]
        if family == "handshake":
            handshake[transport] = [(label, row) for label, row in handshake_phases(rows)]
        elif family == "sse_streaming":
            sse[transport] = {
                "first": {n: h for n, h in curves.items() if n.endswith("first-event")},
                "gap": {n: h for n, h in curves.items() if n.endswith(":gap")},
            }
        elif family == "session_churn":
            series = memory_series(run, fam)
            if series is not None:
                memory[transport] = series
    if handshake:
        made.append(
            plots.handshake_plot(handshake, run / "handshake-phases.png", "handshake: initialize / initialized / first call / DELETE")
        )
    if sse:
        made.append(plots.sse_plot(sse, run / "sse.png", "streaming: time to first event and gap between events"))
    if any(f["family"] == "session_churn" for f in families):
        made.append(plots.memory_plot(memory, run / "churn-memory.png", "session churn: server memory against open sessions"))
    return made


# ---------------------------------------------------------------------------------------- compare


def _ratio(b: Any, a: Any) -> float | None:
    if a is None or b is None:
        return None
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    if a == 0:
        return None
    return b / a


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per (family, transport, type, name) present in both summaries: rps, p50 and
    p99 of each run and the ratios B/A."""
    index_a = {(r["family"], r["transport"], r["type"], r["name"]): r for r in a.get("rows", [])}
    out = []
    for r in b.get("rows", []):
        key = (r["family"], r["transport"], r["type"], r["name"])
        ra = index_a.get(key)
        if ra is None:
            continue
        entry: dict[str, Any] = {"family": key[0], "transport": key[1], "type": key[2], "name": key[3]}
        for field in ("rps", "p50_us", "p99_us"):
            entry[f"{field}_a"] = ra.get(field)
            entry[f"{field}_b"] = r.get(field)
            entry[f"{field}_ratio"] = _ratio(r.get(field), ra.get(field))
        out.append(entry)
    return out


def _fmt_ratio(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}"


def _fmt_num(x: Any, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if x is None else f"{float(x) / scale:.{digits}f}"


def render_compare(entries: list[dict[str, Any]], label_a: str, label_b: str) -> str:
    header = ["family", "transport", "request", "rps A", "rps B", "B/A", "p50 A ms", "p50 B ms", "B/A", "p99 A ms", "p99 B ms", "B/A"]
    body = [
        [
            e["family"],
            e["transport"],
            e["name"],
            _fmt_num(e["rps_a"]),
            _fmt_num(e["rps_b"]),
            _fmt_ratio(e["rps_ratio"]),
            _fmt_num(e["p50_us_a"], 1000.0, 3),
            _fmt_num(e["p50_us_b"], 1000.0, 3),
            _fmt_ratio(e["p50_us_ratio"]),
            _fmt_num(e["p99_us_a"], 1000.0, 3),
            _fmt_num(e["p99_us_b"], 1000.0, 3),
            _fmt_ratio(e["p99_us_ratio"]),
        ]
        for e in entries
    ]
    widths = [max([len(header[i])] + [len(b[i]) for b in body]) for i in range(len(header))]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i < 3 else c.rjust(widths[i]) for i, c in enumerate(cells)).rstrip()

    lines = [f"A = {label_a}, B = {label_b}; ratios are B/A (rps > 1: B faster; latency < 1: B faster)", fmt(header)]
    lines.append(fmt(["-" * w for w in widths]))
    lines.extend(fmt(b) for b in body)
    if not body:
        lines.append("(no request name in common)")
    return "\n".join(lines)


def compare_runs(run_a: Path, run_b: Path, out: Path | None = None) -> tuple[str, Path, list[dict[str, Any]]]:
    """Ratio table text, the comparison PNG (``compare-<a>-vs-<b>.png`` in ``out`` or RUN_B) and
    the entries (also saved next to the PNG as JSON)."""
    run_a, run_b = Path(run_a), Path(run_b)
    sa, sb = load_summary(run_a), load_summary(run_b)
    label_a, label_b = run_a.resolve().name, run_b.resolve().name
    entries = compare_rows(sa, sb)
    text = render_compare(entries, label_a, label_b)
    panels: dict[str, dict[str, tuple[Any, Any]]] = {}
    fams_a = {(f["family"], f["transport"]): f for f in sa.get("families", []) if f.get("family") != "*"}
    for fb in sb.get("families", []):
        key = (fb.get("family"), fb.get("transport"))
        fa = fams_a.get(key)
        if fa is None:
            continue
        ha, hb = load_histograms(_prefix(run_a, fa)), load_histograms(_prefix(run_b, fb))
        shared = sorted(set(ha) & set(hb))
        if shared:
            panels[f"{key[0]}/{key[1]}"] = {name: (ha[(t, name)], hb[(t, name)]) for t, name in shared}
    target = Path(out) if out is not None else run_b
    target.mkdir(parents=True, exist_ok=True)
    png = plots.compare_plot(panels, target / f"compare-{label_a}-vs-{label_b}.png", label_a, label_b)
    with open(target / f"compare-{label_a}-vs-{label_b}.json", "w", encoding="utf-8") as fh:
        json.dump({"a": str(run_a), "b": str(run_b), "entries": entries}, fh, indent=2)
        fh.write("\n")
    return text, png, entries
