"""``mcpfast bench``: run the loadtest families through the Locust swarm and keep everything.

For each transport (stdio, Streamable HTTP) and each family (handshake, tools_call,
sse_streaming, session_churn) one ``locust`` subprocess runs headless for ``--duration``
seconds; gevent's monkey-patching therefore never touches this process.  The embedded reference
server is used unless a target is given: over stdio the swarm spawns ``mcpfast serve --transport
stdio`` per user (``--mcp-command``); over HTTP this process starts ``mcpfast serve --transport
http`` on a free 127.0.0.1 port (if the installed CLI serves HTTP at all), waits for the port and
stops it at the end.

Numbers come from the µs HDR histograms (``<prefix>_histograms.json``) and Locust's final JSON
stats (``<prefix>_locust.json``), both written when the test stops.  Locust's ``_stats.csv`` is
rewritten once a second by a background writer and can miss the last second of a run: it is kept
as an artifact but not used for the summary.

Output: ``<out>/summary.json`` (see :func:`run_bench`), the Locust CSV/HTML/JSON per family, the
histogram JSONs, a memory sample CSV per family and the PNG plots (:mod:`mcpfast.bench.report`).
"""

from __future__ import annotations

import csv
import datetime as _dt
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from mcpfast.bench.procs import (
    ServerProcess,
    child_env,
    child_pids,
    log_path,
    log_tail,
    machine_info,
    read_json,
    reference_server,
    rss_kib,
    stop_process,
    write_summary,
)
from mcpfast.bench.report import GENERATOR_BOUND_NOTE, generator_label
from mcpfast.locust.locustfiles import LOCUSTFILES

__all__ = [
    "FAMILIES",
    "BenchConfig",
    "family_result",
    "machine_info",
    "main_row",
    "render_table",
    "run_bench",
]

FAMILIES = ("handshake", "tools_call", "sse_streaming", "session_churn")
TRANSPORTS = ("stdio", "http")
QUICK_DURATION = 8.0
QUICK_USERS = 4
DEFAULT_DURATION = 30.0
DEFAULT_USERS = 8
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
SUMMARY_FORMAT = "mcpfast-bench"
SUMMARY_VERSION = 1
SERVER_START_TIMEOUT = 20.0
GENERATOR_BOUND = 0.9  # share of its cores above which a family's generator limited the figure
LOCUST_GRACE = 45.0  # seconds past --duration before a locust subprocess is killed
MEMORY_INTERVAL = 0.25


def default_loadtests() -> Path:
    return LOCUSTFILES


@dataclass
class BenchConfig:
    out: Path
    transports: tuple[str, ...] = ("stdio", "http")
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
    loadtests: Path = field(default_factory=default_loadtests)
    python: str = sys.executable
    command_line: list[str] = field(default_factory=lambda: list(sys.argv))
    locust_args: tuple[str, ...] = ()
    transport_explicit: bool = True  # False: "both" by default -> a missing HTTP is a note
    engine: str | None = None  # --mcp-engine of the swarm; None: native when the core has it, else python
    thresholds: tuple[str, ...] = ()  # --threshold: CI gates (mcpfast.locust.thresholds) on every family's run

    def resolved_engine(self) -> str:
        if self.engine:
            return self.engine
        from mcpfast.locust.options import native_available

        return "native" if native_available() else "python"


# ------------------------------------------------------------------------------------ machine


# ---------------------------------------------------------------------------------- processes


class MemorySampler(threading.Thread):
    """Samples the server's memory every ``interval`` s until stopped.

    HTTP: VmRSS of one server process (``pid``).  stdio: the sum over the children of the
    locust process (one server process per user), and how many there are.
    """

    def __init__(self, pid_fn: Any, interval: float = MEMORY_INTERVAL) -> None:
        super().__init__(daemon=True, name="mcpfast-bench-memory")
        self.pid_fn = pid_fn  # () -> list[int]
        self.interval = interval
        self.rows: list[tuple[float, int, int]] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def sample(self) -> None:
        total, n = 0, 0
        for pid in self.pid_fn():
            rss = rss_kib(pid)
            if rss is not None:
                total += rss
                n += 1
        if n:
            self.rows.append((time.time(), total, n))

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=2.0)

    def write(self, path: Path) -> None:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["timestamp", "rss_kib", "processes"])
            for t, rss, n in self.rows:
                w.writerow([f"{t:.3f}", rss, n])


# ------------------------------------------------------------------------------------ progress


class Progress:
    """One line per family on stderr; redrawn in place on a terminal, appended otherwise."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.lines: dict[str, str] = {}
        self._drawn_key: str | None = None

    def update(self, key: str, text: str, final: bool = False) -> None:
        line = f"{key:<24} {text}"
        if self.tty:
            if self._drawn_key == key:
                self.stream.write("\r\x1b[2K" + line)
            else:
                if self._drawn_key is not None:
                    self.stream.write("\n")
                self.stream.write(line)
                self._drawn_key = key
            if final:
                self.stream.write("\n")
                self._drawn_key = None
            self.stream.flush()
        elif final or key not in self.lines:
            self.stream.write(line + "\n")
            self.stream.flush()
        self.lines[key] = line

    def note(self, text: str) -> None:
        if self.tty and self._drawn_key is not None:
            self.stream.write("\n")
            self._drawn_key = None
        self.stream.write(text + "\n")
        self.stream.flush()


def _live_counts(stats_csv: Path) -> tuple[int, int] | None:
    """(requests, failures) of the Aggregated row of Locust's periodically written CSV."""
    try:
        with open(stats_csv, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if row.get("Name") == "Aggregated":
                    return int(row["Request Count"]), int(row["Failure Count"])
    except (OSError, ValueError, KeyError):
        return None
    return None


# ------------------------------------------------------------------------------------- results


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
    from mcpfast.locust.histogram import Histogram

    hist = read_json(Path(f"{prefix}_histograms.json")) or {}
    loc = read_json(Path(f"{prefix}_locust.json"))
    duration = float(hist.get("duration_s") or 0.0)
    ok: dict[tuple[str, str], Any] = {}
    bad: dict[tuple[str, str], Any] = {}
    for field_name, target in (("histograms", ok), ("failed_histograms", bad)):
        for entry in hist.get(field_name) or []:
            target[(entry["type"], entry["name"])] = Histogram.from_dict(entry)
    locust_by_key: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in loc or []:
        locust_by_key[(entry.get("method") or "", entry.get("name") or "")] = entry
    rows: list[dict[str, Any]] = []
    for key in sorted(set(ok) | set(bad) | set(locust_by_key), key=_row_order):
        h_ok, h_bad = ok.get(key), bad.get(key)
        h = h_ok if h_ok is not None and h_ok.total_count else h_bad
        n_ok = h_ok.total_count if h_ok is not None else 0
        n_bad = h_bad.total_count if h_bad is not None else 0
        le = locust_by_key.get(key) or {}
        count = n_ok + n_bad
        row: dict[str, Any] = {
            "type": key[0],
            "name": key[1],
            "count": count,
            "ok": n_ok,
            "failures": int(le.get("num_failures", n_bad)),
            "histogram_failures": n_bad,
            "locust_count": int(le["num_requests"]) if le else None,
            "rps": round(count / duration, 3) if duration > 0 else None,
        }
        values = h.percentiles(PERCENTILES) if h is not None and h.total_count else [None] * len(PERCENTILES)
        for p, v in zip(PERCENTILES, values, strict=True):
            row[f"p{p:g}_us"] = v
        row["min_us"] = h.min if h is not None and h.total_count else None
        row["max_us"] = h.max if h is not None and h.total_count else None
        row["mean_us"] = round(h.mean, 1) if h is not None and h.total_count else None
        rows.append(row)
    requests = sum(r["locust_count"] if r["locust_count"] is not None else r["count"] for r in rows)
    failures = sum(r["failures"] for r in rows)
    return {
        "rows": rows,
        "requests": requests,
        "failures": failures,
        "duration_s": duration or None,
        "latency_origin": hist.get("latency_origin"),
        "validation": hist.get("validation"),
        "pacer": {k: v for k, v in (hist.get("pacer") or {}).items() if k not in ("lag",)},
        "histograms_complete": hist.get("complete"),
        "have_histograms": bool(hist),
        "have_locust_json": loc is not None,
        "generator": hist.get("generator"),
    }


def _ms(us: Any) -> str:
    return "-" if us is None else f"{us / 1000.0:.3f}"


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
            body.append(
                [
                    r["family"],
                    r["transport"],
                    r["name"],
                    str(r["count"]),
                    str(r["failures"]),
                    "-" if r["rps"] is None else f"{r['rps']:.1f}",
                    _ms(r.get("p50_us")),
                    _ms(r.get("p90_us")),
                    _ms(r.get("p99_us")),
                    _ms(r.get("p99.9_us")),
                    gen_cell if i == 0 else "",
                ]
            )
    widths = [max(len(header[i]), *(len(b[i]) for b in body)) if body else len(header[i]) for i in range(len(header))]
    right = {3, 4, 5, 6, 7, 8, 9, 10}

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip()

    lines = [fmt(header), fmt(["-" * w for w in widths])]
    prev = None
    for b in body:
        if prev is not None and (b[0], b[1]) != prev:
            lines.append("")
        lines.append(fmt(b))
        prev = (b[0], b[1])
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- run


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
        "--mcp-engine", cfg.resolved_engine(),
    ]  # fmt: skip
    if transport == "stdio":
        argv += ["--mcp-command", command or ""]
    else:
        argv += ["--host", host or ""]
    if cfg.rate > 0:
        argv += ["--mcp-rate", f"{cfg.rate:g}"]
    if cfg.protocol_version:
        argv += ["--mcp-protocol-version", cfg.protocol_version]
    if family == "session_churn":
        argv += ["--mcp-churn-delete-share", f"{cfg.churn_delete_share:g}"]
        if server_pid:
            argv += ["--mcp-server-pid", str(server_pid)]
    argv += list(cfg.locust_args)
    return argv


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
        if transport == "http" and server_pid:
            sampler = MemorySampler(lambda: [server_pid])
        else:
            sampler = MemorySampler(lambda: child_pids(proc.pid))
        sampler.start()
        deadline = t0 + cfg.duration + LOCUST_GRACE
        killed = False
        try:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    stop_process(proc)
                    killed = True
                    break
                live = _live_counts(Path(f"{prefix}_stats.csv"))
                elapsed = time.monotonic() - t0
                state = f"running {elapsed:4.0f}s/{cfg.duration:g}s" if elapsed <= cfg.duration else "stopping"
                if live:
                    progress.update(label, f"{state}  requests {live[0]}  failures {live[1]}")
                else:
                    progress.update(label, state)
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
        sampler.write(Path(f"{prefix}_memory.csv"))
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
    churn = read_json(Path(f"{prefix}_churn.json"))
    generator = generator_use(result.get("generator"))
    status = "ok" if not problems else "failed"
    p50 = p99 = None
    main_rows = [r for r in result["rows"] if r["count"]]
    if main_rows:
        top = main_row(family, main_rows)
        p50, p99 = top.get("p50_us"), top.get("p99_us")
        detail = f"p50 {_ms(p50)} ms  p99 {_ms(p99)} ms ({top['name']})"
    else:
        detail = ""
    progress.update(
        label,
        f"{'done' if status == 'ok' else 'FAILED'} {wall:4.1f}s  requests {result['requests']}  failures {result['failures']}  {detail}",
        final=True,
    )
    files = sorted(p.name for p in cfg.out.glob(f"{family}-{transport}[._]*"))
    return {
        "family": family,
        "transport": transport,
        "status": status,
        "problems": problems,
        "exit_code": proc.returncode,
        "wall_time_s": round(wall, 2),
        "duration_s": result["duration_s"],
        "requests": result["requests"],
        "failures": result["failures"],
        "latency_origin": result["latency_origin"],
        "validation": result["validation"],
        "pacer": result["pacer"],
        "churn": churn,
        "engine": cfg.resolved_engine(),
        "generator": generator,
        "server_pid": server_pid or None,
        "memory_samples": len(sampler.rows),
        "memory_source": "server process VmRSS" if (transport == "http" and server_pid) else "sum of VmRSS of the stdio server processes",
        "target": host if transport == "http" else command,
        "prefix": prefix.name,
        "files": files,
        "_rows": result["rows"],
    }


def generator_use(gen: dict[str, Any] | None) -> dict[str, Any] | None:
    """The generator's CPU (the Locust process: its Python thread plus the native engine's
    threads) as a share of the cores it could run on, and whether that made it the bottleneck."""
    if not gen or gen.get("cpu_share") is None:
        return None
    share = float(gen["cpu_share"])
    return {**gen, "bound": share > GENERATOR_BOUND, "note": GENERATOR_BOUND_NOTE if share > GENERATOR_BOUND else None}


MAIN_REQUEST = {"handshake": "initialize", "session_churn": "initialize"}


def main_row(family: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The request that characterises a family in the progress line: ``initialize`` for the
    session families, the (non-first) ``tools/call`` otherwise, else the most frequent."""
    want = MAIN_REQUEST.get(family)
    for r in rows:
        if (want and r["name"] == want) or (not want and r["name"].startswith("tools/call:") and "(first)" not in r["name"]):
            return r
    return max(rows, key=lambda r: r["count"])


def _resolve_transports(cfg: BenchConfig) -> tuple[str, ...]:
    return tuple(t for t in TRANSPORTS if t in cfg.transports)


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
    for transport in _resolve_transports(cfg):
        server: ServerProcess | None = None
        host = None
        pid = 0
        if transport == "http":
            if cfg.target:
                host, pid = cfg.target, cfg.server_pid
            else:
                server = reference_server(cfg.python, log_path(cfg.out, "server-http.log"))
                progress.update("server/http", f"starting on 127.0.0.1:{server.port}")
                try:
                    server.start()
                    message = f"embedded HTTP server pid {server.pid} at {server.url}"
                except RuntimeError as exc:  # the process exited (e.g. no --transport http) or never listened
                    note = f"HTTP transport not available, not run: {exc}"
                    progress.update("server/http", "not available", final=True)
                    progress.note(note)
                    if cfg.transport_explicit and cfg.transports == ("http",):
                        families.append(_skipped_family("*", "http", note))
                    notes.append(note)
                    continue
                progress.update("server/http", message, final=True)
                host, pid = server.url, server.pid
        try:
            transports_run.append(transport)
            for family in cfg.families:
                families.append(run_family(cfg, family, transport, progress, host=host, command=stdio_command, server_pid=pid))
                if server is not None and server.proc is not None and server.proc.poll() is not None:
                    note = f"the embedded HTTP server exited during {family} ({server.proc.returncode}): {log_tail(server.log_path, 3)}"
                    notes.append(note)
                    progress.note(note)
                    for rest in cfg.families[cfg.families.index(family) + 1 :]:
                        families.append(_skipped_family(rest, "http", "server exited earlier"))
                    break
        finally:
            if server is not None:
                server.stop()
    rows: list[dict[str, Any]] = []
    for fam in families:
        for r in fam.pop("_rows", []):
            rows.append({"family": fam["family"], "transport": fam["transport"], **r})
    problems = [f"{f['family']}/{f['transport']}: {p}" for f in families for p in f["problems"]]
    if not families:
        problems.append("nothing ran")
    summary: dict[str, Any] = {
        "format": SUMMARY_FORMAT,
        "format_version": SUMMARY_VERSION,
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
        gates = _check_thresholds(cfg, families)
        summary["thresholds"] = gates
        if any(not g["passed"] for g in gates):
            summary["problems"].append(
                "thresholds failed: " + ", ".join(f"{g['threshold']} [{g['run']}]" for g in gates if not g["passed"])
            )
            summary["ok"] = False
    summary["wall_time_s"] = round(time.monotonic() - t0, 2)
    write_summary(cfg.out, summary)
    if make_plots:
        try:
            from mcpfast.bench.report import generate_plots

            summary["plots"] = [p.name for p in generate_plots(cfg.out, summary)]
        except Exception as exc:  # a plotting bug must not lose the measurements
            summary["problems"].append(f"plots: {type(exc).__name__}: {exc}")
            summary["ok"] = False
        summary["wall_time_s"] = round(time.monotonic() - t0, 2)
        write_summary(cfg.out, summary)
    out.write(format_summary(summary) + "\n")
    if summary.get("thresholds"):
        from mcpfast.locust.thresholds import render_runs

        out.write(render_runs(summary["thresholds"]) + "\n")
    out.flush()
    return 0 if summary["ok"] else 1


def _check_thresholds(cfg: BenchConfig, families: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """--threshold on each family's ``<prefix>_histograms.json`` (the same µs histograms as the table)."""
    from mcpfast.locust.thresholds import evaluate_runs

    runs = {}
    for fam in families:
        data = read_json(cfg.out / f"{fam.get('prefix') or ''}_histograms.json") if fam.get("prefix") else None
        if isinstance(data, dict):
            runs[f"{fam['family']}/{fam['transport']}"] = data
    return evaluate_runs(list(cfg.thresholds), runs)


def format_summary(summary: dict[str, Any]) -> str:
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
    for fam in summary.get("families", []):
        if fam.get("generator"):
            lines.append(f"{fam['family']}/{fam['transport']} ({fam.get('engine')} engine): {generator_label(fam)}")
    for fam in summary.get("families", []):
        churn = fam.get("churn") or {}
        if churn:
            per = churn.get("server_rss_kib_per_abandoned_session")
            lines.append(
                f"session churn/{fam['transport']}: {churn.get('sessions_opened')} opened "
                f"({churn.get('opened_per_s')}/s), {churn.get('sessions_deleted')} deleted, "
                f"{churn.get('sessions_abandoned')} abandoned"
                + (
                    f", server RSS {churn.get('server_rss_kib_start')} -> {churn.get('server_rss_kib_end')} KiB "
                    f"({per} KiB per abandoned session)"
                    if per is not None
                    else ""
                )
            )
    for note in summary.get("notes", []):
        lines.append(f"note: {note}")
    if summary.get("plots"):
        lines.append(f"plots: {', '.join(summary['plots'])}")
    lines.append(f"wall time {summary.get('wall_time_s')} s; results in {summary.get('run')}/summary.json")
    if summary.get("problems"):
        lines.append("FAILED:")
        lines.extend(f"  - {p}" for p in summary["problems"])
    else:
        lines.append("OK: every family ran with requests and without failures")
    return "\n".join(lines)


def _skipped_family(family: str, transport: str, why: str) -> dict[str, Any]:
    return {
        "family": family,
        "transport": transport,
        "status": "not run",
        "problems": [why],
        "exit_code": None,
        "requests": 0,
        "failures": 0,
        "files": [],
        "churn": None,
        "_rows": [],
    }
