"""``mcpfast bench``: the loadtest families through the Locust swarm, one ``locust`` subprocess per
family and transport (so gevent's monkey-patching never touches this process), against the
embedded reference server or a target; everything each run leaves is kept in ``--out``
(``mcpfast/bench/README.md`` lists the files). The numbers come from the µs HDR histograms and
Locust's final JSON, both written when the test stops: Locust's ``_stats.csv`` is rewritten once a
second by a background writer and can miss the last second, so it only feeds the progress line.
"""

from __future__ import annotations

import datetime as _dt
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mcpfast.bench.procs import (
    Sampler,
    ServerProcess,
    child_env,
    log_path,
    log_tail,
    machine_info,
    reference_server,
    rss_kib,
    stop_process,
)
from mcpfast.client.probe import child_pids
from mcpfast.locust.locustfiles import LOCUSTFILES
from mcpfast.locust.report_page import generator_bound
from mcpfast.results import files
from mcpfast.results.page import bench_page
from mcpfast.results.report import GENERATOR_BOUND_NOTE, format_summary, ms, redraw_bench

__all__ = ["FAMILIES", "BenchConfig", "Progress", "family_result", "main_row", "run_bench"]

FAMILIES = ("handshake", "tools_call", "sse_streaming", "session_churn")
TRANSPORTS = ("stdio", "http")
QUICK_DURATION = 8.0
QUICK_USERS = 4
DEFAULT_DURATION = 30.0
DEFAULT_USERS = 8
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
LOCUST_GRACE = 45.0  # seconds past --duration before a locust subprocess is killed
MEMORY_INTERVAL = 0.25


@dataclass
class BenchConfig:
    out: Path
    transports: tuple[str, ...] = TRANSPORTS
    users: int = DEFAULT_USERS
    duration: float = DEFAULT_DURATION
    rate: float = 0.0
    target: str | None = None  # HTTP endpoint URL (no embedded HTTP server then)
    target_command: str | None = None  # stdio server command (instead of the embedded one)
    server_pid: int = 0  # with --target: the target server's pid, for churn memory
    families: tuple[str, ...] = FAMILIES
    protocol_version: str | None = None
    churn_delete_share: float = 0.5
    quick: bool = False
    loadtests: Path = LOCUSTFILES
    python: str = sys.executable
    command_line: list[str] = field(default_factory=lambda: list(sys.argv))
    locust_args: tuple[str, ...] = ()
    engine: str | None = None  # --mcp-engine of the swarm; None: native when the core has it, else python
    thresholds: tuple[str, ...] = ()  # --threshold: CI gates (mcpfast.locust.thresholds) on every family's run

    def resolved_engine(self) -> str:
        if self.engine:
            return self.engine
        from mcpfast.locust.options import native_available

        return "native" if native_available() else "python"


class Progress:
    """One line per family on stderr: redrawn in place on a terminal, else its first and last state."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.drawn: str | None = None  # the key of the line a terminal shows unfinished
        self.seen: set[str] = set()

    def update(self, key: str, text: str, final: bool = False) -> None:
        line = f"{key:<24} {text}"
        if self.tty:
            start = "\r\x1b[2K" if self.drawn == key else "\n" if self.drawn else ""
            self.stream.write(start + line + ("\n" if final else ""))
            self.drawn = None if final else key
        elif final or key not in self.seen:
            self.stream.write(line + "\n")
        self.seen.add(key)
        self.stream.flush()

    def note(self, text: str) -> None:
        self.stream.write(("\n" if self.drawn else "") + text + "\n")
        self.drawn = None
        self.stream.flush()


def _live_counts(prefix: Path) -> tuple[int, int] | None:
    """(requests, failures) of the Aggregated row of Locust's periodically written ``_stats.csv``."""
    for row in files.read_csv(Path(f"{prefix}_stats.csv")):
        if row.get("Name") == "Aggregated":
            try:
                return int(row["Request Count"]), int(row["Failure Count"])
            except (KeyError, ValueError):
                return None
    return None


_FIRST = ("initialize", "notifications/initialized", "server/discover")


def _row_order(key: tuple[str, str]) -> tuple[str, int, str]:
    """Rows in session order: the handshake first, DELETE last, the rest by name."""
    kind, name = key
    if name in _FIRST:
        return kind, _FIRST.index(name), ""
    if name == "DELETE":
        return kind, 9, ""
    return kind, 5, name


def family_result(prefix: Path) -> dict[str, Any]:
    """Rows and totals of one family run, from ``<prefix>_histograms.json`` and ``_locust.json``.

    One row per (request type, name): ``count`` is the number of samples in the µs histograms
    (successes + failures), ``locust_count``/``failures`` Locust's own final counts, ``rps`` the
    count over the test duration; percentiles in µs over the successful requests (over the
    failed ones when nothing succeeded).
    """
    hist = files.read_json(Path(f"{prefix}_histograms.json")) or {}
    loc = files.read_json(Path(f"{prefix}_locust.json"))
    duration = float(hist.get("duration_s") or 0.0)
    ok, bad = files.histograms(prefix), files.histograms(prefix, failed=True)
    locust_by_key = {(e.get("method") or "", e.get("name") or ""): e for e in loc or []}
    rows: list[dict[str, Any]] = []
    for key in sorted(set(ok) | set(bad) | set(locust_by_key), key=_row_order):
        n_ok = ok[key].total_count if key in ok else 0
        n_bad = bad[key].total_count if key in bad else 0
        h = ok[key] if n_ok else bad.get(key)
        le = locust_by_key.get(key) or {}
        row: dict[str, Any] = {
            "type": key[0],
            "name": key[1],
            "count": n_ok + n_bad,
            "ok": n_ok,
            "failures": int(le.get("num_failures", n_bad)),
            "histogram_failures": n_bad,
            "locust_count": int(le["num_requests"]) if le else None,
            "rps": round((n_ok + n_bad) / duration, 3) if duration > 0 else None,
        }
        if h is not None and h.total_count:
            row.update({f"p{p:g}_us": v for p, v in zip(PERCENTILES, h.percentiles(PERCENTILES), strict=True)})
            row.update(min_us=h.min, max_us=h.max, mean_us=round(h.mean, 1))
        else:
            row.update({f"p{p:g}_us": None for p in PERCENTILES}, min_us=None, max_us=None, mean_us=None)
        rows.append(row)
    return {
        "rows": rows,
        "requests": sum(r["locust_count"] if r["locust_count"] is not None else r["count"] for r in rows),
        "failures": sum(r["failures"] for r in rows),
        "duration_s": duration or None,
        "latency_origin": hist.get("latency_origin"),
        "validation": hist.get("validation"),
        "pacer": {k: v for k, v in (hist.get("pacer") or {}).items() if k != "lag"},
        "have_histograms": bool(hist),
        "generator": hist.get("generator"),
    }


def locust_argv(
    cfg: BenchConfig, family: str, transport: str, prefix: Path, *, host: str | None, command: str | None, server_pid: int
) -> list[str]:
    argv = [
        cfg.python, "-m", "locust",
        "-f", str(cfg.loadtests / f"{family}.py"),
        "--headless",
        "-u", str(cfg.users),
        "-r", str(cfg.users),
        "-t", f"{max(round(cfg.duration), 1)}s",
        "--csv", str(prefix),
        "--csv-full-history",
        "--html", f"{prefix}.html",
        "--json-file", f"{prefix}_locust",  # Locust appends ".json"
        "--only-summary",
        "--loglevel", "INFO",
        "--mcp-histogram-out", str(prefix),
        "--mcp-no-report",  # the bench writes one report.html for every family
        "--mcp-engine", cfg.resolved_engine(),
    ]  # fmt: skip
    argv += ["--mcp-command", command or ""] if transport == "stdio" else ["--host", host or ""]
    if cfg.rate > 0:
        argv += ["--mcp-rate", f"{cfg.rate:g}"]
    if cfg.protocol_version:
        argv += ["--mcp-protocol-version", cfg.protocol_version]
    if family == "session_churn":
        argv += ["--mcp-churn-delete-share", f"{cfg.churn_delete_share:g}"]
        if server_pid:
            argv += ["--mcp-server-pid", str(server_pid)]
    return argv + list(cfg.locust_args)


def run_family(
    cfg: BenchConfig,
    family: str,
    transport: str,
    progress: Progress,
    *,
    host: str | None = None,
    command: str | None = None,
    server_pid: int = 0,
) -> dict[str, Any]:
    label = f"{family}/{transport}"
    prefix = cfg.out / f"{family}-{transport}"
    for stale in cfg.out.glob(f"{family}-{transport}[._]*"):
        stale.unlink()
    argv = locust_argv(cfg, family, transport, prefix, host=host, command=command, server_pid=server_pid)
    log_file = log_path(cfg.out, f"{family}-{transport}.log")
    progress.update(label, "starting")
    t0 = time.monotonic()
    with open(log_file, "w", encoding="utf-8") as log:
        log.write("$ " + shlex.join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=str(cfg.out), env=child_env())
        # HTTP: the server's VmRSS; stdio: the summed VmRSS of the locust process's children (a server per user)
        server_memory = transport == "http" and server_pid

        def memory() -> tuple[int, int] | None:
            rss = [r for pid in ([server_pid] if server_memory else child_pids(proc.pid)) if (r := rss_kib(pid)) is not None]
            return (sum(rss), len(rss)) if rss else None

        sampler = Sampler(memory, MEMORY_INTERVAL)
        sampler.start()
        deadline = t0 + cfg.duration + LOCUST_GRACE
        killed = False
        try:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    stop_process(proc)
                    killed = True
                    break
                live = _live_counts(prefix)
                elapsed = time.monotonic() - t0
                state = f"running {elapsed:4.0f}s/{cfg.duration:g}s" if elapsed <= cfg.duration else "stopping"
                progress.update(label, f"{state}  requests {live[0]}  failures {live[1]}" if live else state)
                try:
                    proc.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    pass
        finally:  # Ctrl-C or any error: the locust child (and its stdio servers) must not outlive us
            if proc.poll() is None:
                stop_process(proc)
            sampler.stop()
    wall = time.monotonic() - t0
    if sampler.rows:
        rows = [["timestamp", "rss_kib", "processes"], *([f"{t:.3f}", rss, n] for t, rss, n in sampler.rows)]
        Path(f"{prefix}_memory.csv").write_text("".join(",".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")
    result = family_result(prefix)
    problems: list[str] = []
    if killed:
        problems.append(f"locust did not stop within {cfg.duration + LOCUST_GRACE:g} s and was killed")
    if not result["have_histograms"]:
        problems.append("no µs histogram file was written (see the .log)")
    if result["requests"] == 0:
        problems.append("no requests")
    if result["failures"]:
        names = ", ".join(f"{r['name']} ({r['failures']})" for r in result["rows"] if r["failures"])
        problems.append(f"{result['failures']} failures: {names}")
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not result["failures"]):
        problems.append(f"locust exited with code {proc.returncode}: {log_tail(log_file, 3)}")
    status = "ok" if not problems else "failed"
    detail = ""
    if main_rows := [r for r in result["rows"] if r["count"]]:
        top = main_row(family, main_rows)
        detail = f"p50 {ms(top.get('p50_us'))} ms  p99 {ms(top.get('p99_us'))} ms ({top['name']})"
    done = "done" if status == "ok" else "FAILED"
    progress.update(label, f"{done} {wall:4.1f}s  requests {result['requests']}  failures {result['failures']}  {detail}", final=True)
    return {
        "family": family,
        "transport": transport,
        "status": status,
        "problems": problems,
        "exit_code": proc.returncode,
        "wall_time_s": round(wall, 2),
        **{k: result[k] for k in ("duration_s", "requests", "failures", "latency_origin", "validation", "pacer")},
        "churn": files.read_json(Path(f"{prefix}_churn.json")),
        "engine": cfg.resolved_engine(),
        "generator": generator_use(result.get("generator")),
        "server_pid": server_pid or None,
        "memory_samples": len(sampler.rows),
        "memory_source": "server process VmRSS" if server_memory else "sum of VmRSS of the stdio server processes",
        "target": host if transport == "http" else command,
        "prefix": prefix.name,
        "files": sorted(p.name for p in cfg.out.glob(f"{family}-{transport}[._]*")),
        "_rows": result["rows"],
    }


def generator_use(gen: dict[str, Any] | None) -> dict[str, Any] | None:
    """The generator's CPU (the Locust process: its Python thread plus the native engine's
    threads) as a share of the cores it could run on, and whether that made it the bottleneck."""
    if not gen or gen.get("cpu_share") is None:
        return None
    bound = generator_bound(gen)
    return {**gen, "bound": bound, "note": GENERATOR_BOUND_NOTE if bound else None}


MAIN_REQUEST = {"handshake": "initialize", "session_churn": "initialize"}


def main_row(family: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The request that characterises a family in the progress line: ``initialize`` for the
    session families, the (non-first) ``tools/call`` otherwise, else the most frequent."""
    want = MAIN_REQUEST.get(family)
    for r in rows:
        if (want and r["name"] == want) or (not want and r["name"].startswith("tools/call:") and "(first)" not in r["name"]):
            return r
    return max(rows, key=lambda r: r["count"])


def _skipped_family(family: str, transport: str, why: str) -> dict[str, Any]:
    counts = {"requests": 0, "failures": 0, "files": [], "churn": None}
    return {"family": family, "transport": transport, "status": "not run", "problems": [why], "exit_code": None, **counts}


def run_bench(cfg: BenchConfig, stream: TextIO | None = None, make_plots: bool = True) -> int:
    """Run the bench; write ``summary.json`` (and plots); print the table; return the exit code.

    ``summary.json`` holds: ``command_line``, ``machine`` (:func:`machine_info`), ``config``
    (users, duration, rate, transports requested and run, families, targets), ``notes``
    (e.g. HTTP not available), ``families`` (status, problems, requests, failures, churn numbers,
    files per family/transport), ``rows`` (every number of the table, µs), ``plots``, ``ok``.
    """
    out = sys.stdout if stream is None else stream
    cfg.out.mkdir(parents=True, exist_ok=True)
    progress = Progress()
    started = time.time()
    t0 = time.monotonic()
    notes: list[str] = []
    families: list[dict[str, Any]] = []
    transports_run: list[str] = []
    stdio_command = cfg.target_command or f"{shlex.quote(cfg.python)} -m mcpfast serve --transport stdio"
    for transport in (t for t in TRANSPORTS if t in cfg.transports):
        server: ServerProcess | None = None
        host, pid = (cfg.target, cfg.server_pid) if transport == "http" else (None, 0)
        if transport == "http" and not cfg.target:
            server = reference_server(cfg.python, log_path(cfg.out, "server-http.log"))
            progress.update("server/http", f"starting on 127.0.0.1:{server.port}")
            try:
                server.start()
            except RuntimeError as exc:  # the process exited or never listened
                note = f"HTTP transport not available, not run: {exc}"
                progress.update("server/http", "not available", final=True)
                progress.note(note)
                if cfg.transports == ("http",):  # asked for alone: its absence fails the run (else it is a note)
                    families.append(_skipped_family("*", "http", note))
                notes.append(note)
                continue
            progress.update("server/http", f"embedded HTTP server pid {server.pid} at {server.url}", final=True)
            host, pid = server.url, server.pid
        try:
            transports_run.append(transport)
            for i, family in enumerate(cfg.families):
                families.append(run_family(cfg, family, transport, progress, host=host, command=stdio_command, server_pid=pid))
                if server is not None and (code := server.exited()) is not None:
                    note = f"the embedded HTTP server exited during {family} ({code}): {log_tail(server.log_path, 3)}"
                    notes.append(note)
                    progress.note(note)
                    families += [_skipped_family(rest, "http", "server exited earlier") for rest in cfg.families[i + 1 :]]
                    break
        finally:
            if server is not None:
                server.stop()
    rows = [{"family": f["family"], "transport": f["transport"], **r} for f in families for r in f.pop("_rows", [])]
    problems = [f"{f['family']}/{f['transport']}: {p}" for f in families for p in f["problems"]]
    if not families:
        problems.append("nothing ran")
    summary: dict[str, Any] = {
        "format": files.SUMMARY_FORMAT,
        "format_version": files.SUMMARY_VERSION,
        "run": cfg.out.name,
        "command_line": cfg.command_line,
        "started_at": _dt.datetime.fromtimestamp(started, _dt.UTC).isoformat(timespec="seconds"),
        "wall_time_s": None,
        "machine": machine_info(),
        "config": {
            "quick": cfg.quick,
            "users": cfg.users,
            "spawn_rate": cfg.users,
            "duration_s": cfg.duration,
            "rate": cfg.rate,
            "model": "open" if cfg.rate > 0 else "closed",
            "families": list(cfg.families),
            "transports_requested": list(cfg.transports),
            "transports_run": transports_run,
            "protocol_version": cfg.protocol_version or "2025-11-25 (swarm default)",
            "churn_delete_share": cfg.churn_delete_share,
            "http_target": cfg.target or ("embedded" if "http" in transports_run else None),
            "stdio_command": stdio_command if "stdio" in transports_run else None,
            "locust_args": list(cfg.locust_args),
            "engine": cfg.resolved_engine(),
        },
        "notes": notes,
        "families": families,
        "rows": rows,
        "problems": problems,
        "ok": not problems,
        "plots": [],
    }
    if cfg.thresholds:
        from mcpfast.locust.thresholds import evaluate_runs

        # the gates read each family's µs histograms, the same as the table
        runs = {
            f"{f['family']}/{f['transport']}": files.read_json(cfg.out / f"{f['prefix']}_histograms.json")
            for f in families
            if f.get("prefix")
        }
        gates = summary["thresholds"] = evaluate_runs(list(cfg.thresholds), {k: v for k, v in runs.items() if isinstance(v, dict)})
        if failed := [f"{g['threshold']} [{g['run']}]" for g in gates if not g["passed"]]:
            problems.append("thresholds failed: " + ", ".join(failed))
            summary["ok"] = False
    summary["wall_time_s"] = round(time.monotonic() - t0, 2)
    files.write_summary(cfg.out, summary)
    try:  # the page always (no matplotlib needed), the PNGs unless --no-plots
        if make_plots:
            redraw_bench(cfg.out, summary)
        else:
            bench_page(cfg.out, summary)
    except Exception as exc:  # a drawing bug must not lose the measurements
        problems.append(f"plots: {type(exc).__name__}: {exc}")
        summary["ok"] = False
    summary["wall_time_s"] = round(time.monotonic() - t0, 2)
    files.write_summary(cfg.out, summary)
    out.write(format_summary(summary) + "\n")
    if summary.get("thresholds"):
        from mcpfast.locust.thresholds import render_runs

        out.write(render_runs(summary["thresholds"]) + "\n")
    out.flush()
    return 0 if summary["ok"] else 1
