"""``report.html`` of a bench run and of a capacity search, from the files they saved (the page is
drawn by :mod:`mcpfast.locust.report_page`, the pieces a plain ``locust`` run's page has too).

A bench's page: the verdict (its problems, failed thresholds, generator-bound families, notes),
the run's facts, one table of every request name of every family, the thresholds, then a section
per family and transport (its table, latency by percentile, p50/p99 and requests per second per
interval from its ``.hlog``, handshake phases, failures with their reasons) and the bench's
other plots inlined. A capacity search's: the verdict (the search's sentence), the curve and the
steps, then the search's µs histograms as one run. A folder written by an older mcpfast (no
interval log, fields missing) gets the page with what it has, each missing part named.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from mcpfast.locust import report_page as rp
from mcpfast.locust import svg, webui_view
from mcpfast.locust.units import latency_text
from mcpfast.results import files

__all__ = ["PAGE", "bench_page", "capacity_page"]

PAGE = "report.html"
INLINED = (("handshake-phases.png", "handshake phases"), ("sse.png", "streaming"), ("churn-memory.png", "session churn: server memory"))
CAPACITY_STATES = {"found": "ok", "at_least": "ok", "bracket": "ok", "inconclusive": "warn"}  # any other: failed


def _write(path: Path, text: str) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def _latency(us: Any) -> str:
    return latency_text(float(us)) if isinstance(us, (int, float)) else "–"


def _verdict(summary: dict[str, Any]) -> rp.Verdict:
    families = [f for f in summary.get("families") or [] if isinstance(f, dict)]
    problems = [str(p) for p in summary.get("problems") or []]
    gates = summary.get("thresholds") or []
    bound = [f"{f.get('family')}/{f.get('transport')}" for f in families if (f.get("generator") or {}).get("bound")]
    requests = sum(int(f.get("requests") or 0) for f in families)
    lines = list(problems)
    if bound:
        lines.append(f"generator-bound (the generator, not the server, set the pace; a floor): {', '.join(bound)}")
    lines += [f"note: {n}" for n in summary.get("notes") or []]
    ran = [f for f in families if f.get("status") != "not run"]
    if "ok" not in summary:
        lines.append("this summary.json has no verdict (an older mcpfast): read the tables")
    if problems or summary.get("ok") is False:
        head = f"FAILED: {len(problems) or 'a'} problem{'s' if len(problems) != 1 else ''} in {len(ran)} family run{'s' if len(ran) != 1 else ''}"
        return rp.Verdict("failed", head, lines)
    passed = f"; {len(gates)} threshold{'s' if len(gates) != 1 else ''} passed" if gates else ""
    head = f"OK: {len(ran)} family runs, {requests:,} requests, none failed{passed}"
    return rp.Verdict("warn" if bound else "ok", head, lines)


def _facts(summary: dict[str, Any]) -> str:
    cfg, m = summary.get("config") or {}, summary.get("machine") or {}
    model = cfg.get("model")
    if model and cfg.get("rate"):
        model = f"{model} at {cfg['rate']:g}/s"
    return rp.facts(
        [
            ("command", " ".join(map(str, summary.get("command_line") or []))),
            ("started", summary.get("started_at")),
            ("load", f"{cfg.get('users')} users, {cfg.get('duration_s')} s per family, {model} model" if cfg else None),
            ("transports", ", ".join(cfg.get("transports_run") or [])),
            ("engine", cfg.get("engine")),
            ("HTTP target", cfg.get("http_target")),
            ("stdio command", cfg.get("stdio_command")),
            ("machine", f"{m.get('nproc')} cpus ({m.get('cpu_model')}), Python {m.get('python')}" if m else None),
            ("mcpfast", f"{m.get('mcpfast_version')} ({m.get('mcpfast_core')} core)" if m.get("mcpfast_version") else None),
            ("wall time", f"{summary['wall_time_s']} s" if summary.get("wall_time_s") else None),
        ]
    )


def _summary_table(summary: dict[str, Any]) -> str:
    percentiles = ("p50", "p90", "p99", "p99.9")
    header = ["Family", "Transport", "Request", "Count", "Fails", "Requests/s", *percentiles, "Max"]
    rows, failed = [], []
    for r in summary.get("rows") or []:
        rps = r.get("rps")
        rows.append(
            [
                r.get("family"),
                r.get("transport"),
                r.get("name"),
                f"{int(r.get('count') or 0):,}",
                f"{int(r.get('failures') or 0):,}",
                f"{rps:,.1f}" if isinstance(rps, (int, float)) else "–",
                *(_latency(r.get(f"{p}_us")) for p in percentiles),
                _latency(r.get("max_us")),
            ]
        )
        failed.append(bool(r.get("failures")))
    if not rows:
        return '<p class="empty">No request name in this summary: nothing ran, or it was written by an older mcpfast.</p>'
    return rp.table(header, rows, text=3, failed=failed)


def _thresholds(gates: list[dict[str, Any]]) -> str:
    body = [[g.get("threshold"), g.get("run") or "", g.get("measured_text"), "pass" if g.get("passed") else "FAIL"] for g in gates]
    return "<h2>Thresholds</h2>" + rp.table(
        ["Threshold", "Run", "Measured", "Result"], body, text=2, failed=[not g.get("passed") for g in gates]
    )


def _family(run: Path, fam: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    label = f"{fam.get('family')}/{fam.get('transport')}"
    head = f'<h2 id="{escape(label.replace("/", "-"))}">{escape(str(fam.get("family")))} over {escape(str(fam.get("transport")))}</h2>'
    status = [f"status {fam.get('status', 'unknown')}"]
    gen = fam.get("generator") or {}
    if gen.get("cpu_share") is not None:
        status.append(
            f"generator {float(gen['cpu_share']):.0%} of {gen.get('cores')} cores" + (" (bound: a floor)" if gen.get("bound") else "")
        )
    churn = fam.get("churn") or {}
    if churn.get("sessions_opened"):
        status.append(
            f"{churn['sessions_opened']:,} sessions opened, {churn.get('sessions_deleted')} deleted, {churn.get('sessions_abandoned')} abandoned"
        )
    status += [str(p) for p in fam.get("problems") or []]
    html = [head, f'<p class="muted">{escape("; ".join(status))}</p>']
    if fam.get("status") == "not run" or fam.get("family") == "*":
        return "".join(html), {}
    prefix = files.prefix(run, fam)
    data = files.read_json(Path(f"{prefix}_histograms.json"))
    if not isinstance(data, dict):
        return "".join(
            [*html, f'<p class="empty">No {escape(prefix.name)}_histograms.json: no figures for this run (see its log).</p>']
        ), {}
    log = files.interval_log(prefix)
    blocks, figures = rp.run_blocks(data, log, files.failure_reasons(prefix))
    if log is None:
        html.append(f'<p class="empty">{escape(rp.NO_LOG)}</p>')
    return "".join([*html, blocks]), figures


def bench_page(run: Path, summary: dict[str, Any] | None = None) -> Path:
    """``<run>/report.html`` of a bench run (``summary``: its ``summary.json``, read when not given)."""
    run = Path(run)
    summary = summary if summary is not None else files.load_summary(run)
    body = ["<h2>The run</h2>", _facts(summary), "<h2>Every request name</h2>", _summary_table(summary)]
    if summary.get("thresholds"):
        body.append(_thresholds(summary["thresholds"]))
    figures: dict[str, Any] = {}
    for fam in summary.get("families") or []:
        html, figures[f"{fam.get('family')}/{fam.get('transport')}"] = _family(run, fam)
        body.append(html)
    pictures = [rp.figure(run / name, caption) for name, caption in INLINED if name in (summary.get("plots") or [])]
    if any(pictures):
        body += ["<h2>More plots</h2>", *pictures]
    title = f"mcpfast bench {summary.get('run') or run.name}"
    return _write(run / PAGE, rp.page(title, _verdict(summary), body, {"families": figures}))


def capacity_page(folder: Path, result: dict[str, Any]) -> Path:
    """``<folder>/report.html`` of a capacity search (``result``: its ``capacity.json``)."""
    folder = Path(folder)
    status = str(result.get("status") or "unknown")
    lines = [f"SLO: {' and '.join(map(str, result.get('slo') or []))}"]
    if result.get("why") and str(result["why"]) not in str(result.get("sentence")):
        lines.append(f"the search ended: {result['why']}")
    verdict = rp.Verdict(CAPACITY_STATES.get(status, "failed"), str(result.get("sentence") or f"search {status}"), lines)
    view = webui_view.capacity_view(result) or {}
    body = ['<div class="charts">', svg.chart(view["chart"]), "</div>"] if view else []
    columns = ["Step", "Offered", "Achieved", "p50", "p90", "p99", "Generator", "Verdict", "Why"]
    keys = ["step", "offered", "achieved", "p50", "p90", "p99", "generator", "verdict", "reasons"]
    steps = view.get("steps") or []
    body.append(
        rp.table(columns, [[s.get(k) for k in keys] for s in steps], text=(7, 8), failed=[s.get("verdict") == "fail" for s in steps])
    )
    prefix = folder / "capacity"
    data = files.read_json(Path(f"{prefix}_histograms.json"))
    figures: dict[str, Any] = {"capacity": view.get("chart")}
    body.append("<h2>The search's requests, every step together</h2>")
    if isinstance(data, dict):
        blocks, figures["run"] = rp.run_blocks(data, files.interval_log(prefix), [])
        body += [rp.run_facts(data), blocks]
    else:
        body.append(
            '<p class="empty">No capacity_histograms.json in this folder (a search of an older mcpfast): the steps above are all.</p>'
        )
    return _write(folder / PAGE, rp.page(f"mcpfast capacity {folder.name}", verdict, body, figures))
