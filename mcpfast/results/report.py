"""What a bench run shows: its table and summary text, ``mcpfast report RUN`` (every plot again)
and ``mcpfast compare RUN_A RUN_B`` (ratio table and one percentile plot), all from the files
the run saved (:mod:`mcpfast.bench.files`); nothing is measured again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcpfast.bench import files, plots

__all__ = [
    "GENERATOR_BOUND_NOTE",
    "compare_rows",
    "compare_runs",
    "format_summary",
    "generate_plots",
    "generator_label",
    "handshake_phases",
    "memory_series",
    "ms",
    "render_compare",
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
    lines.append(f"wall time {summary.get('wall_time_s')} s; results in {summary.get('run')}/summary.json")
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
    DELETEd so far (cumulative counts of Locust's history, interpolated).  stdio: a session is a
    server process; x = live server processes, y = their summed RSS.
    """
    prefix = files.prefix(run, fam)
    samples = files.read_csv(Path(f"{prefix}_memory.csv"))
    if not samples:
        return None
    rss = [int(s["rss_kib"]) for s in samples]
    if fam["transport"] == "http":
        import numpy

        history = files.history(prefix)
        ts = [float(s["timestamp"]) for s in samples]

        def counted(name: str) -> Any:
            pts = [(t, n) for t, n, _ in history.get(name, []) if n is not None]
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
        curves = {name: h for (_t, name), h in files.histograms(prefix).items()}
        gen = generator_label(fam)
        gen = f"\n{gen}" if gen else ""
        title = f"{family} over {transport}: latency by percentile (µs HDR histograms){gen}"
        made.append(plots.percentile_plot(curves, run / f"latency-{family}-{transport}.png", title))
        title = f"{family} over {transport}: throughput and p99{gen}"
        made.append(plots.timeline_plot(files.history(prefix), run / f"timeline-{family}-{transport}.png", title))
        if family == "handshake":
            handshake[transport] = handshake_phases(
                [r for r in summary.get("rows", []) if (r["family"], r["transport"]) == (family, transport)]
            )
        elif family == "sse_streaming":
            sse[transport] = {
                "first": {n: h for n, h in curves.items() if n.endswith("first-event")},
                "gap": {n: h for n, h in curves.items() if n.endswith(":gap")},
            }
        elif family == "session_churn" and (series := memory_series(run, fam)) is not None:
            memory[transport] = series
    if handshake:
        title = "handshake: initialize / initialized / first call / DELETE"
        made.append(plots.handshake_plot(handshake, run / "handshake-phases.png", title))
    if sse:
        made.append(plots.sse_plot(sse, run / "sse.png", "streaming: time to first event and gap between events"))
    if any(f["family"] == "session_churn" for f in families):
        made.append(plots.memory_plot(memory, run / "churn-memory.png", "session churn: server memory against open sessions"))
    return made


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per (family, transport, type, name) present in both summaries: rps, p50 and
    p99 of each run and the ratios B/A (None where A has no value or 0)."""
    index_a = {(r["family"], r["transport"], r["type"], r["name"]): r for r in a.get("rows", [])}
    out = []
    for r in b.get("rows", []):
        key = (r["family"], r["transport"], r["type"], r["name"])
        ra = index_a.get(key)
        if ra is None:
            continue
        entry: dict[str, Any] = {"family": key[0], "transport": key[1], "type": key[2], "name": key[3]}
        for field in ("rps", "p50_us", "p99_us"):
            va, vb = ra.get(field), r.get(field)
            entry.update({f"{field}_a": va, f"{field}_b": vb, f"{field}_ratio": vb / va if va and vb is not None else None})
        out.append(entry)
    return out


def render_compare(entries: list[dict[str, Any]], label_a: str, label_b: str) -> str:
    header = ["family", "transport", "request", "rps A", "rps B", "B/A", "p50 A ms", "p50 B ms", "B/A", "p99 A ms", "p99 B ms", "B/A"]

    def ratio(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    body = [
        [
            e["family"],
            e["transport"],
            e["name"],
            "-" if e["rps_a"] is None else f"{e['rps_a']:.1f}",
            "-" if e["rps_b"] is None else f"{e['rps_b']:.1f}",
        ]
        + [ratio(e["rps_ratio"])]
        + [cell for p in ("p50", "p99") for cell in (ms(e[f"{p}_us_a"]), ms(e[f"{p}_us_b"]), ratio(e[f"{p}_us_ratio"]))]
        for e in entries
    ]
    lines = [f"A = {label_a}, B = {label_b}; ratios are B/A (rps > 1: B faster; latency < 1: B faster)", table(header, body, left=3)]
    if not body:
        lines.append("(no request name in common)")
    return "\n".join(lines)


def compare_runs(run_a: Path, run_b: Path, out: Path | None = None) -> tuple[str, Path, list[dict[str, Any]]]:
    """Ratio table text, the comparison PNG (``compare-<a>-vs-<b>.png`` in ``out`` or RUN_B) and
    the entries (also saved next to the PNG as JSON)."""
    run_a, run_b = Path(run_a), Path(run_b)
    sa, sb = files.load_summary(run_a), files.load_summary(run_b)
    label_a, label_b = run_a.resolve().name, run_b.resolve().name
    entries = compare_rows(sa, sb)
    panels: dict[str, dict[str, tuple[Any, Any]]] = {}
    fams_a = {(f["family"], f["transport"]): f for f in sa.get("families", []) if f.get("family") != "*"}
    for fb in sb.get("families", []):
        fa = fams_a.get((fb.get("family"), fb.get("transport")))
        if fa is not None:
            ha, hb = files.histograms(files.prefix(run_a, fa)), files.histograms(files.prefix(run_b, fb))
            if shared := sorted(set(ha) & set(hb)):
                panels[f"{fb['family']}/{fb['transport']}"] = {name: (ha[(t, name)], hb[(t, name)]) for t, name in shared}
    target = Path(out) if out is not None else run_b
    target.mkdir(parents=True, exist_ok=True)
    png = plots.compare_plot(panels, target / f"compare-{label_a}-vs-{label_b}.png", label_a, label_b)
    files.write_json(target / f"compare-{label_a}-vs-{label_b}.json", {"a": str(run_a), "b": str(run_b), "entries": entries})
    return render_compare(entries, label_a, label_b), png, entries
