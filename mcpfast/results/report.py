"""What a run shows: a bench's table and summary text, and ``mcpfast report RUN`` (every plot and
``report.html`` again, of a bench run or a capacity search), all from the files the run saved
(:mod:`mcpfast.results.files`); nothing is measured again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcpfast.locust import intervals as iv
from mcpfast.results import files, plots

__all__ = [
    "GENERATOR_BOUND_NOTE",
    "format_summary",
    "generate_plots",
    "generator_label",
    "handshake_phases",
    "memory_series",
    "ms",
    "redraw_bench",
    "redraw_capacity",
    "render_table",
    "table",
]

HANDSHAKE_ORDER = ("initialize", "notifications/initialized", "server/discover", "first call", "DELETE")
GENERATOR_BOUND_NOTE = "generator-bound: this figure is a floor"


def ms(us: Any) -> str:
    """µs as ms with µs resolution; ``-`` for no value."""
    return "-" if us is None else f"{us / 1000.0:.3f}"


def table(header: Sequence[str], body: Sequence[Sequence[str]], left: int, groups: int = 0) -> str:
    """Aligned text columns: the first ``left`` left-aligned, the rest right-aligned; a blank line
    where the first ``groups`` cells change from one row to the next."""
    widths = [max([len(header[i])] + [len(b[i]) for b in body]) for i in range(len(header))]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i < left else c.rjust(widths[i]) for i, c in enumerate(cells)).rstrip()

    lines = [fmt(header), fmt(["-" * w for w in widths])]
    for i, b in enumerate(body):
        if groups and i and b[:groups] != body[i - 1][:groups]:
            lines.append("")
        lines.append(fmt(b))
    return "\n".join(lines)


def generator_label(fam: dict[str, Any]) -> str:
    """``"73% of 1 core"`` (+ the generator-bound note) for tables and plot titles."""
    gen = fam.get("generator")
    if not gen:
        return ""
    cores = gen.get("cores") or 1
    text = f"generator {100 * gen['cpu_share']:.0f}% of {cores} core{'s' if cores != 1 else ''}"
    return f"{text}, {GENERATOR_BOUND_NOTE}" if gen.get("bound") else text


def render_table(summary: dict[str, Any]) -> str:
    """The summary table: one line per (family, transport, request name); latencies in ms (µs
    resolution, from the HDR histograms)."""
    header = ["family", "transport", "request", "count", "fail", "rps", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "gen cpu"]
    body: list[list[str]] = []
    for fam in summary.get("families", []):
        rows = [r for r in summary.get("rows", []) if r["family"] == fam["family"] and r["transport"] == fam["transport"]]
        gen = fam.get("generator") or {}
        gen_cell = "-" if not gen else f"{100 * gen['cpu_share']:.0f}%{' BOUND' if gen.get('bound') else ''}"
        if not rows:
            body.append([fam["family"], fam["transport"], f"({fam.get('status')})", "0", "0", "-", "-", "-", "-", "-", gen_cell])
        for i, r in enumerate(rows):
            rps = "-" if r["rps"] is None else f"{r['rps']:.1f}"
            latencies = [ms(r.get(f"p{p}_us")) for p in ("50", "90", "99", "99.9")]
            body.append(
                [r["family"], r["transport"], r["name"], str(r["count"]), str(r["failures"]), rps, *latencies, gen_cell if not i else ""]
            )
    return table(header, body, left=3, groups=2)


def format_summary(summary: dict[str, Any]) -> str:
    """What ``mcpfast bench`` and ``mcpfast report`` print: the run, the machine, the table, the
    generator and churn lines, the notes, and OK or the problems."""
    cfg = summary.get("config", {})
    m = summary.get("machine", {})
    lines = [
        f"mcpfast bench {summary.get('run')}: {cfg.get('users')} users, {cfg.get('duration_s'):g} s per family, "
        f"{cfg.get('model')} model{' at ' + format(cfg.get('rate'), 'g') + '/s' if cfg.get('rate') else ''}; "
        f"transports run: {', '.join(cfg.get('transports_run') or []) or 'none'}",
        f"machine: {m.get('nproc')} cpus ({m.get('cpu_model')}), Python {m.get('python')}, "
        f"mcpfast {m.get('mcpfast_version')} ({m.get('mcpfast_core')} core)",
        "",
        render_table(summary),
        "",
    ]
    families = summary.get("families", [])
    lines += [f"{f['family']}/{f['transport']} ({f.get('engine')} engine): {generator_label(f)}" for f in families if f.get("generator")]
    for fam in families:
        churn = fam.get("churn") or {}
        if churn:
            per = churn.get("server_rss_kib_per_abandoned_session")
            rss = churn.get("server_rss_kib_start"), churn.get("server_rss_kib_end")
            lines.append(
                f"session churn/{fam['transport']}: {churn.get('sessions_opened')} opened ({churn.get('opened_per_s')}/s), "
                f"{churn.get('sessions_deleted')} deleted, {churn.get('sessions_abandoned')} abandoned"
                + ("" if per is None else f", server RSS {rss[0]} -> {rss[1]} KiB ({per} KiB per abandoned session)")
            )
    lines += [f"note: {note}" for note in summary.get("notes", [])]
    if summary.get("plots"):
        lines.append(f"plots: {', '.join(summary['plots'])}")
    lines.append(
        f"wall time {summary.get('wall_time_s')} s; results in {summary.get('run')}/summary.json, the page {summary.get('run')}/report.html"
    )
    if summary.get("problems"):
        lines += ["FAILED:", *(f"  - {p}" for p in summary["problems"])]
    else:
        lines.append("OK: every family ran with requests and without failures")
    return "\n".join(lines)


def handshake_phases(rows: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The handshake family's rows in phase order: initialize, initialized (or discover),
    first call, DELETE."""

    def phase(name: str) -> str | None:
        if name.startswith("tools/call:") and name.endswith("(first)"):
            return "first call"
        return name if name in HANDSHAKE_ORDER else None

    found = {phase(r["name"]): (r["name"], r) for r in rows if r.get("count")}
    return [found[p] for p in HANDSHAKE_ORDER if p in found]


def memory_series(run: Path, fam: dict[str, Any]) -> dict[str, Any] | None:
    """Server memory against open sessions for one churn run (None without samples).

    HTTP: one server process; open sessions at each sample = sessions initialised minus sessions
    DELETEd so far (cumulative counts of the interval log, else of Locust's history, interpolated).
    stdio: a session is a server process; x = live server processes, y = their summed RSS.
    """
    prefix = files.prefix(run, fam)
    samples = files.read_csv(Path(f"{prefix}_memory.csv"))
    if not samples:
        return None
    rss = [int(s["rss_kib"]) for s in samples]
    if fam["transport"] == "http":
        import numpy

        history = _cumulative(prefix)
        ts = [float(s["timestamp"]) for s in samples]

        def counted(name: str) -> Any:
            pts = history.get(name, [])
            return numpy.interp(ts, [t for t, _ in pts], [n for _, n in pts]) if pts else numpy.zeros(len(ts))

        sessions = [float(n) for n in numpy.maximum(counted("initialize") - counted("DELETE"), 0.0)]
        churn = fam.get("churn") or files.read_json(Path(f"{prefix}_churn.json")) or {}
        note = (
            f"{churn.get('sessions_abandoned')} sessions abandoned, {churn.get('sessions_deleted')} deleted; "
            f"{churn.get('server_rss_kib_per_abandoned_session')} KiB per abandoned session (start->end RSS)"
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
    steady = sorted(
        int(s["rss_kib"]) / int(s["processes"]) for s in files.read_csv(run / "tools_call-stdio_memory.csv") if int(s["processes"] or 0)
    )
    if steady:
        note += f"\nsteady (tools_call, long-lived processes): median {steady[len(steady) // 2] / 1024:.1f} MiB per process"
    return {"sessions": procs, "rss_kib": rss, "xlabel": "open sessions (live server processes)", "note": note, "fit": False}


def _cumulative(prefix: Path) -> dict[str, list[tuple[float, float]]]:
    """``{name: [(epoch s, requests so far)]}`` from 0 at the run's start: the interval log's
    counts (each interval's at its end), else Locust's history for a run without one."""
    log = files.interval_log(prefix)
    if log is None:
        return {name: [(t, n) for t, n, _ in pts if n is not None] for name, pts in files.history(prefix).items()}
    keys = iv.histograms_by_key((files.read_json(Path(f"{prefix}_histograms.json")) or {}).get("histograms") or [])
    out: dict[str, list[tuple[float, float]]] = {}
    for (_type, name), points in iv.series(log, keys, origin=0.0, aggregated=False).items():
        total, pts = 0.0, [(log.start_time or points[0].start, 0.0)]
        for p in points:
            total += p.count
            pts.append((p.start + p.length, total))
        out[name] = pts
    return out


def generate_plots(run: Path, summary: dict[str, Any] | None = None) -> list[Path]:
    """(Re)draw every plot of a run from its saved files; returns the PNG paths."""
    run = Path(run)
    summary = summary if summary is not None else files.load_summary(run)
    made: list[Path] = []
    handshake: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    sse: dict[str, dict[str, dict[str, Any]]] = {}
    memory: dict[str, dict[str, Any]] = {}
    families = [f for f in summary.get("families", []) if f.get("family") != "*" and f.get("status") != "not run"]
    for fam in families:
        family, transport = fam["family"], fam["transport"]
        prefix = files.prefix(run, fam)
        ok = files.histograms(prefix)
        curves = {name: h for (_t, name), h in ok.items()}
        gen = generator_label(fam)
        gen = f"\n{gen}" if gen else ""
        title = f"{family} over {transport}: latency by percentile (µs HDR histograms){gen}"
        made.append(plots.percentile_plot(curves, run / f"latency-{family}-{transport}.png", title))
        title = f"{family} over {transport}: throughput and p99 per interval{gen}"
        log = files.interval_log(prefix)
        series = None if log is None else iv.series(log, ok, _start(prefix))
        made.append(plots.timeline_plot(series, run / f"timeline-{family}-{transport}.png", title))
        if family == "handshake":
            handshake[transport] = handshake_phases(
                [r for r in summary.get("rows", []) if (r["family"], r["transport"]) == (family, transport)]
            )
        elif family == "sse_streaming":
            sse[transport] = {
                "first": {n: h for n, h in curves.items() if n.endswith("first-event")},
                "gap": {n: h for n, h in curves.items() if n.endswith(":gap")},
            }
        elif family == "session_churn" and (mem := memory_series(run, fam)) is not None:
            memory[transport] = mem
    if handshake:
        title = "handshake: initialize / initialized / first call / DELETE"
        made.append(plots.handshake_plot(handshake, run / "handshake-phases.png", title))
    if sse:
        made.append(plots.sse_plot(sse, run / "sse.png", "streaming: time to first event and gap between events"))
    if any(f["family"] == "session_churn" for f in families):
        made.append(plots.memory_plot(memory, run / "churn-memory.png", "session churn: server memory against open sessions"))
    return made


def _start(prefix: Path) -> float | None:
    data = files.read_json(Path(f"{prefix}_histograms.json"))
    return data.get("start_time") if isinstance(data, dict) else None


def redraw_bench(run: Path, summary: dict[str, Any]) -> list[Path]:
    """Every plot of a bench run and its ``report.html`` (the plots' names kept in ``summary``)."""
    from mcpfast.results.page import bench_page

    made = generate_plots(run, summary)
    summary["plots"] = [p.name for p in made]
    return [*made, bench_page(run, summary)]


def redraw_capacity(folder: Path, result: dict[str, Any] | None = None, plots_too: bool = True) -> list[Path]:
    """A capacity search's ``capacity.png`` (unless ``plots_too`` is false) and ``report.html``,
    from its ``capacity.json`` (``result``, read when not given)."""
    from mcpfast.results.page import capacity_page

    result = result if result is not None else files.read_json(folder / "capacity.json")
    if not isinstance(result, dict) or not isinstance(result.get("steps"), list):
        raise SystemExit(f"mcpfast: {folder / 'capacity.json'} is not a capacity search's result")
    made = [plots.capacity_plot(result, folder / "capacity.png")] if plots_too else []
    return [*made, capacity_page(folder, result)]
