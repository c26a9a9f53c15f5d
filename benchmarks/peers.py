"""``make bench-peers``: mcpfast against the official Python and TypeScript SDK servers, same swarm.

    python -m benchmarks.peers --out bench_results/peers            # 12 s per family (stdio 25 s), 8 users (~9 min)
    python -m benchmarks.peers --out /tmp/peers --quick             # 5 s (stdio 10 s), 4 users (~4 min)
    python -m benchmarks.peers --server mcpfast --server typescript-sdk --transport http --family tools_call

For each transport (Streamable HTTP, stdio), each family of ``mcpfast bench`` (handshake,
tools_call, sse_streaming, session_churn) and each server (``mcpfast``, ``python-sdk``,
``typescript-sdk``: :mod:`benchmarks.peer_servers`), in that order so that the servers take
turns and slow drifts of the machine hit all of them, one ``mcpfast bench`` run
(:func:`mcpfast.bench.run.run_bench`, one family, the server as ``--target``/``--target-command``):

* the server runs on ``--server-cpus`` (default core 0, :func:`benchmarks.harness.pinned`); over HTTP a fresh
  server per family, started and checked (``initialize``) before the swarm starts; over stdio
  the swarm starts one pinned server process per user (per session in the session families);
* the generator (this process's bench thread, hence every ``locust`` child) runs on
  ``--generator-cpus`` (default core 1, :func:`benchmarks.harness.affinity`);
* over stdio every user is a server process, so the stdio families run longer (``--stdio-duration``)
  and the rate of tools_call and sse_streaming is taken once every user's session is up
  (:func:`steady_rate`; the process start is what handshake and session_churn measure);
* the SDK servers answer JSON in handshake, tools_call and session_churn and SSE in
  sse_streaming (they have one reply mode per server, and JSON drops the progress
  notifications); mcpfast picks per request.

Everything ``mcpfast bench`` writes lands in ``<out>/<server>/`` (a normal bench run directory
with a merged ``summary.json`` and its plots: ``mcpfast report``/``mcpfast compare`` work on it).
``<out>/summary.json`` holds every number, the scenarios (the main request of each
family/transport per server) and mcpfast's ratio to each peer; ``<out>/README.md`` the tables,
the machine, the versions and the exact commands; the PNGs compare the servers.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from benchmarks.harness import GENERATOR_CPU, SERVER_CPU, affinity, loadavg, machine_was_busy, parse_cpus
from benchmarks.peer_servers import PEERS, PeerNotAvailable, peer_versions, start_http
from mcpfast.bench.procs import log_path, machine_info
from mcpfast.bench.run import FAMILIES, BenchConfig, main_row, run_bench
from mcpfast.locust.argtypes import finite_positive, int_at_least
from mcpfast.results import plots
from mcpfast.results.files import SUMMARY_FORMAT, SUMMARY_VERSION, histograms, read_json, write_summary
from mcpfast.results.report import generate_plots

__all__ = ["PeersConfig", "main", "ratio_rows", "render_readme", "run_peers"]

SERVERS = ("mcpfast", "python-sdk", "typescript-sdk")
REFERENCE = "mcpfast"
DEFAULT_DURATION = 12.0
DEFAULT_STDIO_DURATION = 25.0  # 8 Python SDK processes take ~10 s to start on one core
DEFAULT_USERS = 8
QUICK_DURATION = 5.0
QUICK_STDIO_DURATION = 10.0
QUICK_USERS = 4
#: Families whose requests emit nothing before their reply: the SDK peers answer them as JSON.
JSON_FAMILIES = ("handshake", "tools_call", "session_churn")
#: Families whose main request runs on open sessions: their rate is taken once every user's
#: session is up (over stdio the server processes start first; see :func:`steady_rate`).
CALL_FAMILIES = ("tools_call", "sse_streaming")
MAKE_COMMAND = "make bench-peers"
DEFAULT_COMMAND = "python -m benchmarks.peers --out bench_results/peers"
FORMAT = "mcpfast-peers"
FORMAT_VERSION = 1
WHAT = {
    "handshake": "sessions/s: initialize + initialized + first tools/call echo + DELETE (stdio: a process per session)",
    "tools_call": "tools/call echo on an open session",
    "sse_streaming": "tools/call stream (10 progress notifications, then the result)",
    "session_churn": "sessions/s: open, first call, then DELETE or abandon (half each; stdio: a process per session)",
}


@dataclass
class PeersConfig:
    out: Path
    servers: tuple[str, ...] = SERVERS
    transports: tuple[str, ...] = ("http", "stdio")
    families: tuple[str, ...] = ("handshake", "tools_call", "sse_streaming", "session_churn")
    users: int = DEFAULT_USERS
    duration: float = DEFAULT_DURATION
    stdio_duration: float | None = None  # None: duration
    server_cpus: str | None = SERVER_CPU  # None: not pinned
    generator_cpus: str | None = GENERATOR_CPU
    quick: bool = False
    make_plots: bool = True
    server_plots: bool = True  # also each server directory's own mcpfast bench plots
    command_line: list[str] = field(default_factory=lambda: list(sys.argv))
    locust_args: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------------ run


def _first_line(path: Path) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            line = fh.readline().rstrip("\n")
    except OSError:
        return None
    return line[2:] if line.startswith("$ ") else None


def _history(path: Path) -> dict[str, list[tuple[float, int]]]:
    """``{name: [(timestamp, cumulative count)]}`` from Locust's ``_stats_history.csv``."""
    import csv

    out: dict[str, list[tuple[float, int]]] = {}
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                try:
                    out.setdefault(row["Name"], []).append((float(row["Timestamp"]), int(row["Total Request Count"])))
                except (KeyError, TypeError, ValueError):
                    continue
    except OSError:
        pass
    return out


def steady_rate(history_csv: Path, request: str, users: int) -> dict[str, Any] | None:
    """Requests/s of ``request`` once every user's session is up: from the first second of
    Locust's per-second history in which ``initialize`` has reached ``users`` to its last row.

    None when that never happened or left less than a second.  Over HTTP this is nearly the whole
    run; over stdio it leaves out the server processes' start (measured by the session families),
    during which the first servers already answer calls while the others still start on the core.
    """
    hist = _history(history_csv)
    up = next((t for t, c in hist.get("initialize", []) if c >= users), None)
    points = hist.get(request, [])
    if up is None or not points:
        return None
    end_t, end_c = points[-1]
    start_c = max((c for t, c in points if t <= up), default=0)
    if end_t - up < 1.0:
        return None
    return {"rps": (end_c - start_c) / (end_t - up), "from_s": up, "to_s": end_t, "count": end_c - start_c}


def run_one(cfg: PeersConfig, server: str, transport: str, family: str, log: TextIO) -> dict[str, Any]:
    """One family against one server over one transport; returns the family entry of the bench
    summary plus ``server``, ``rows`` and the exact commands."""
    peer = PEERS[server]
    sdir = cfg.out / server
    sdir.mkdir(parents=True, exist_ok=True)
    duration = cfg.stdio_duration if (transport == "stdio" and cfg.stdio_duration) else cfg.duration
    entry: dict[str, Any] = {"server": server, "family": family, "transport": transport, "duration_s": duration}
    bench = BenchConfig(
        out=sdir, transports=(transport,), users=cfg.users, duration=duration, families=(family,),
        quick=cfg.quick, command_line=cfg.command_line, locust_args=cfg.locust_args,
    )  # fmt: skip
    running = None
    try:
        if transport == "http":
            json_response = family in JSON_FAMILIES
            running = start_http(
                server, cpus=cfg.server_cpus, json_response=json_response, log_path=log_path(sdir, f"server-{family}-http.log")
            )
            bench.target, bench.server_pid = running.url, running.pid
            entry.update(reply_mode=running.reply_mode, server_argv=shlex.join(running.argv))
        else:
            peer.check()
            bench.target_command = peer.stdio_command(cfg.server_cpus)
            entry.update(reply_mode="stdio", server_argv=bench.target_command)
    except (PeerNotAvailable, RuntimeError) as exc:
        entry.update(status="not run", problems=[f"server did not start: {exc}"], rows=[], requests=0, failures=0)
        return entry
    try:
        with affinity(cfg.generator_cpus):
            run_bench(bench, stream=log, make_plots=False)
    finally:
        exited = running.proc.poll() if running is not None and running.proc is not None else None
        if running is not None:
            running.stop()
    summary = read_json(sdir / "summary.json") or {}
    fams = summary.get("families") or []
    fam = dict(fams[0]) if fams else {"status": "failed", "problems": ["no bench summary"], "requests": 0, "failures": 0}
    entry.update({k: v for k, v in fam.items() if k not in ("family", "transport", "duration_s")})
    entry["duration_s"] = fam.get("duration_s") or duration
    entry["rows"] = [{k: v for k, v in r.items() if k not in ("family", "transport")} for r in summary.get("rows", [])]
    entry["locust_argv"] = _first_line(log_path(sdir, f"{family}-{transport}.log"))
    main = _main_request(family, entry["rows"])
    if family in CALL_FAMILIES and main is not None:
        entry["steady"] = steady_rate(sdir / f"{family}-{transport}_stats_history.csv", main["name"], cfg.users)
    problems = list(entry.get("problems") or [])
    if exited is not None:
        problems.append(f"the server exited during the run (code {exited}); see logs/server-{family}-http.log")
    entry["problems"] = problems
    if problems and entry.get("status") in (None, "ok"):
        entry["status"] = "failed"
    return entry


def _merge_server_summary(cfg: PeersConfig, server: str, runs: list[dict[str, Any]], machine: dict[str, Any]) -> dict[str, Any]:
    """``<out>/<server>/summary.json`` in ``mcpfast bench`` format, from its per-family runs."""
    families: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for r in runs:
        fam = {k: v for k, v in r.items() if k not in ("server", "rows")}
        families.append(fam)
        rows.extend({"family": r["family"], "transport": r["transport"], **row} for row in r.get("rows", []))
    problems = [f"{r['family']}/{r['transport']}: {p}" for r in runs for p in r.get("problems", [])]
    return {
        "format": SUMMARY_FORMAT,
        "format_version": SUMMARY_VERSION,
        "run": server,
        "command_line": cfg.command_line,
        "machine": machine,
        "config": {
            "quick": cfg.quick,
            "users": cfg.users,
            "spawn_rate": cfg.users,
            "duration_s": cfg.duration,
            "stdio_duration_s": cfg.stdio_duration or cfg.duration,
            "rate": 0.0,
            "model": "closed",
            "families": list(cfg.families),
            "transports_requested": list(cfg.transports),
            "transports_run": sorted({r["transport"] for r in runs if r.get("status") != "not run"}),
            "server": server,
            "server_cpus": cfg.server_cpus,
            "generator_cpus": cfg.generator_cpus,
        },
        "notes": [f"made by benchmarks.peers: one mcpfast bench run per family, server {server}"],
        "families": families,
        "rows": rows,
        "problems": problems,
        "ok": not problems,
        "plots": [],
    }


def _main_request(family: str, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    counted = [r for r in rows if r.get("count")]
    return main_row(family, counted) if counted else None


def _ratio(a: Any, b: Any) -> float | None:
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    if b == 0 or not math.isfinite(a) or not math.isfinite(b):
        return None
    return a / b


def ratio_rows(runs: list[dict[str, Any]], servers: Sequence[str], reference: str = REFERENCE) -> list[dict[str, Any]]:
    """One scenario per (family, transport): each server's main request (rps, p50, p99, ...) and
    the reference's ratio to every other server: ``rps`` = ref/peer (> 1: the reference serves
    more), ``p50``/``p99`` = ref/peer (< 1: the reference answers sooner)."""
    scenarios: list[dict[str, Any]] = []
    keys: list[tuple[str, str]] = []
    for r in runs:
        if (r["family"], r["transport"]) not in keys:
            keys.append((r["family"], r["transport"]))
    for family, transport in keys:
        per: dict[str, Any] = {}
        request = None
        for r in runs:
            if (r["family"], r["transport"]) != (family, transport):
                continue
            main = _main_request(family, r.get("rows", []))
            if main is not None:
                request = request or main["name"]
            steady = r.get("steady")
            per[r["server"]] = {
                "status": r.get("status"),
                "problems": r.get("problems", []),
                "reply_mode": r.get("reply_mode"),
                "request": main["name"] if main else None,
                **{k: (main or {}).get(k) for k in ("count", "failures", "rps", "p50_us", "p90_us", "p99_us", "p99.9_us", "mean_us")},
                "rps_run": (main or {}).get("rps"),
                "rps_basis": "run",
            }
            if family in CALL_FAMILIES:
                if steady is not None:
                    per[r["server"]].update(rps=steady["rps"], rps_basis="sessions up", steady=steady)
                else:
                    per[r["server"]]["rps_basis"] = "run (sessions never all up)"
        ratios: dict[str, Any] = {}
        ref = per.get(reference)
        for server in servers:
            if server == reference or server not in per:
                continue
            peer = per[server]
            ratios[server] = {
                "rps": _ratio((ref or {}).get("rps"), peer.get("rps")),
                "p50": _ratio((ref or {}).get("p50_us"), peer.get("p50_us")),
                "p99": _ratio((ref or {}).get("p99_us"), peer.get("p99_us")),
            }
        scenarios.append(
            {"family": family, "transport": transport, "request": request, "what": WHAT.get(family), "servers": per, "ratios": ratios}
        )
    return scenarios


# -------------------------------------------------------------------------------------- report


def _ms(us: Any) -> str:
    return "-" if us is None else f"{float(us) / 1000.0:.3f}"


def _num(x: Any, digits: int = 1) -> str:
    return "-" if x is None else f"{float(x):.{digits}f}"


def _x(r: Any) -> str:
    return "-" if r is None else f"{float(r):.2f}"


def _md_table(header: list[str], body: list[list[str]], right_from: int) -> list[str]:
    lines = ["| " + " | ".join(header) + " |"]
    lines.append("| " + " | ".join("---:" if i >= right_from else "---" for i in range(len(header))) + " |")
    lines.extend("| " + " | ".join(row) + " |" for row in body)
    return lines


def render_ratio_table(summary: dict[str, Any]) -> str:
    peers = [s for s in summary["config"]["servers"] if s != REFERENCE]
    header = ["scenario", "request"]
    for p in peers:
        header += [f"rps ÷ {p}", f"p50 ÷ {p}", f"p99 ÷ {p}"]
    body = []
    for sc in summary["scenarios"]:
        row = [f"{sc['family']}/{sc['transport']}", f"`{sc['request']}`"]
        for p in peers:
            ratio = sc["ratios"].get(p) or {}
            row += [_x(ratio.get("rps")), _x(ratio.get("p50")), _x(ratio.get("p99"))]
        body.append(row)
    return "\n".join(_md_table(header, body, 2))


def render_numbers_table(summary: dict[str, Any]) -> str:
    servers = summary["config"]["servers"]
    header = [
        "scenario",
        "request",
        "server",
        "reply",
        "count",
        "fail",
        "rps",
        "rps basis",
        "rps run",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
    ]
    body = []
    for sc in summary["scenarios"]:
        for s in servers:
            d = sc["servers"].get(s)
            if d is None:
                continue
            status = "" if d.get("status") == "ok" else f" ({d.get('status')})"
            body.append([
                f"{sc['family']}/{sc['transport']}", f"`{d.get('request') or sc['request']}`", s + status,
                d.get("reply_mode") or "-", str(d.get("count") or 0), str(d.get("failures") or 0), _num(d.get("rps")),
                d.get("rps_basis") or "-", _num(d.get("rps_run")), _ms(d.get("p50_us")), _ms(d.get("p90_us")), _ms(d.get("p99_us")), _ms(d.get("p99.9_us")),
            ])  # fmt: skip
    return "\n".join(_md_table(header, body, 4))


def render_console(summary: dict[str, Any]) -> str:
    """The ratio table as plain text (what the command prints)."""
    peers = [s for s in summary["config"]["servers"] if s != REFERENCE]
    header = ["scenario", "request"] + [f"{k} {p}" for p in peers for k in ("rps÷", "p50÷", "p99÷")]
    body = []
    for sc in summary["scenarios"]:
        row = [f"{sc['family']}/{sc['transport']}", str(sc["request"])]
        for p in peers:
            ratio = sc["ratios"].get(p) or {}
            row += [_x(ratio.get("rps")), _x(ratio.get("p50")), _x(ratio.get("p99"))]
        body.append(row)
    widths = [max([len(header[i])] + [len(b[i]) for b in body]) for i in range(len(header))]

    def fmt(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(cells)).rstrip()

    lines = ["mcpfast ÷ peer (rps > 1: mcpfast serves more; p50/p99 < 1: mcpfast answers sooner)", fmt(header)]
    lines.append(fmt(["-" * w for w in widths]))
    lines.extend(fmt(b) for b in body)
    return "\n".join(lines)


def _loadavg(values: Any) -> str:
    return ", ".join(f"{x:.2f}" for x in values) if values else "?"


def render_readme(summary: dict[str, Any]) -> str:
    cfg, m, v = summary["config"], summary["machine"], summary["versions"]
    servers = cfg["servers"]
    mem = m.get("mem_total_kib")
    lines = [
        "# mcpfast against the official SDK servers",
        "",
        f"Made by `{shlex.join(summary['command_line'])}` on {summary['started_at']}, {summary['wall_time_s']:.0f} s "
        f"wall time (`{MAKE_COMMAND}` runs `{DEFAULT_COMMAND}`). Nothing here is edited by hand: rerun the command "
        "to refresh it.",
        "",
        "The same demo app (tools `echo`, `add`, `stream`, the `demo://readme` resource, the `summarise` prompt) on "
        "three servers, measured by the same Locust swarm (`loadtests/`, through `mcpfast bench`), one family at a time, "
        f"{cfg['users']} users, closed model, {cfg['duration_s']:g} s per family over HTTP and "
        f"{cfg['stdio_duration_s']:g} s over stdio, servers taking turns within each family:",
        "",
    ]
    for s in servers:
        info = summary["servers"][s]
        lines.append(f"- **{s}**: {info['description']} ({info['package']} {info.get('version')})")
    lines += [
        "",
        f"Server pinned to CPU {cfg['server_cpus']} (`taskset -c`), generator (locust) to CPU {cfg['generator_cpus']}."
        if cfg["server_cpus"] is not None
        else "No CPU pinning (`--no-pin`).",
        "",
        "## mcpfast ÷ peer",
        "",
        "Each scenario's main request (the one `mcpfast bench` reports per family). `rps ÷ peer` > 1: mcpfast completes "
        "more per second; `p50 ÷ peer`, `p99 ÷ peer` < 1: mcpfast answers sooner. With a fixed number of users "
        "(closed model) throughput and latency are two views of the same run.",
        "",
        render_ratio_table(summary),
        "",
        "## Numbers",
        "",
        "Latency in ms from the swarm's µs HDR histograms (successful requests). `rps run` = count / run time (what "
        "`mcpfast bench` prints); `rps` = the rate the ratios use: the same for handshake and session_churn, and for "
        "tools_call and sse_streaming the rate once every user's session was up (`sessions up`: from the first second "
        "of Locust's per-second history in which `initialize` had reached the user count), so that over stdio the "
        "server processes' start does not count as call time. `reply`: "
        "how the server answered POSTs (`json+sse`: JSON unless notifications precede the reply, mcpfast; `json`/`sse`: "
        "the mode the SDK server was started in).",
        "",
        render_numbers_table(summary),
        "",
        "What each scenario measures:",
        "",
    ]
    lines += [f"- `{fam}`: {WHAT[fam]}" for fam in cfg["families"] if fam in WHAT]
    lines += [""]
    churn = [(r["server"], r.get("churn") or {}) for r in summary["runs"] if r["family"] == "session_churn" and r["transport"] == "http"]
    if any(c for _s, c in churn):
        lines += ["Session churn over HTTP, server memory (VmRSS, KiB):", ""]
        body = [
            [
                s,
                str(c.get("sessions_opened")),
                str(c.get("sessions_abandoned")),
                str(c.get("server_rss_kib_start")),
                str(c.get("server_rss_kib_end")),
                str(c.get("server_rss_kib_per_abandoned_session")),
            ]
            for s, c in churn
            if c
        ]
        lines += _md_table(["server", "sessions opened", "abandoned", "RSS start", "RSS end", "KiB per abandoned session"], body, 1)
        lines += [""]
    lines += ["## Problems and limits", ""]
    if summary["problems"]:
        lines += [f"- **{p}**" for p in summary["problems"]]
    else:
        lines += ["- Every scenario ran on every server with requests and without failures."]
    lines += [f"- {n}" for n in summary["notes"]]
    lines += [
        "",
        "## Plots",
        "",
        "- `throughput.png`: the main request's requests/s per scenario per server (log scale)",
        "- `ratios.png`: mcpfast ÷ peer throughput per scenario (above 1: mcpfast faster)",
        "- `latency-<family>-<transport>.png`: the main request's latency against percentile, one line per server",
        "- `<server>/`: the full `mcpfast bench` output of each server (every request name, Locust CSV/HTML, µs "
        "histograms, per-family plots; `mcpfast report <out>/<server>` redraws them, `mcpfast compare <out>/mcpfast "
        "<out>/python-sdk` gives the per-name ratios). Locust's HTML reports (`<family>-<transport>.html`, about 1 MB "
        "each) are written too but not committed (`.gitignore`).",
        "",
        "## Machine and versions",
        "",
        f"- CPU: {m.get('cpu_model')}, {m.get('cpu_count')} cores ({m.get('nproc')} usable), "
        f"memory {mem // 1024 if mem else '?'} MiB, {m.get('platform')}; load average (1, 5, 15 min) at the start "
        f"{_loadavg(summary.get('loadavg_start'))}, at the end {_loadavg(summary.get('loadavg_end'))} (the machine is "
        "shared: other work moves absolute numbers by 10-30%; read the ratios)"
        + ("; **the machine was busy** during this run" if summary.get("machine_was_busy") else ""),
        f"- Python {m.get('python')}, Node {v.get('node')} (`{v.get('node_executable')}`)",
        f"- mcpfast {v.get('mcpfast')} ({m.get('mcpfast_core')} core), mcp (Python SDK) {v.get('mcp')}, "
        f"mcp-types {v.get('mcp-types')}, uvicorn {v.get('uvicorn')}, @modelcontextprotocol/sdk {v.get('@modelcontextprotocol/sdk')}, "
        f"zod {v.get('zod')}, locust {m.get('locust_version')}, gevent {m.get('gevent_version')}",
        "",
        "## Exact commands",
        "",
        "```sh",
        f"{MAKE_COMMAND}   # runs {DEFAULT_COMMAND}",
        shlex.join(summary["command_line"]) + "   # this run",
    ]
    seen: set[str] = set()
    for r in summary["runs"]:
        srv = r.get("server_argv")
        if srv and srv not in seen:
            seen.add(srv)
            where = "stdio, one per user/session" if r["transport"] == "stdio" else f"HTTP, {r['family']}"
            lines.append(f"# {r['server']} ({where})")
            lines.append(srv)
    example = next((r for r in summary["runs"] if r.get("locust_argv")), None)
    if example is not None:
        lines.append(
            f"# the swarm, e.g. {example['family']}/{example['transport']} against {example['server']} "
            f"(every run's command is in summary.json, and the first line of <server>/logs/<family>-<transport>.log)"
        )
        lines.append(example["locust_argv"])
    lines += ["```", ""]
    return "\n".join(lines)


def _bar_plot(
    groups: list[str],
    series: dict[str, list[float | None]],
    path: Path,
    title: str,
    ylabel: str,
    reference: float | None = None,
    value_format: str | None = None,
) -> Path:
    """One group of bars per scenario, one bar per series (log axis), with an optional horizontal
    ``reference`` line (a ratio of 1)."""
    width = max(7.0, 0.78 * len(groups) * max(len(series), 1) + 2.0)
    fig, axes = plots.subplots(1, 1, (width, 5))
    ax = axes[0][0]
    if plots.bars(ax, groups, series, value_format=value_format, rotation=20):
        if reference is not None:
            ax.axhline(reference, color="0.3", linewidth=1.0, linestyle="--")
        ax.set_ylabel(ylabel)
    return plots.save(fig, path, title)


def draw_plots(out: Path, summary: dict[str, Any]) -> list[Path]:
    servers = summary["config"]["servers"]
    peers = [s for s in servers if s != REFERENCE]
    scenarios = summary["scenarios"]
    groups = [f"{sc['family']}/{sc['transport']}" for sc in scenarios]
    made = [
        _bar_plot(
            groups, {s: [(sc["servers"].get(s) or {}).get("rps") for sc in scenarios] for s in servers},
            out / "throughput.png", "main request per second, per scenario and server", "requests/s (log)",
        ),
        _bar_plot(
            groups, {f"mcpfast ÷ {p}": [(sc["ratios"].get(p) or {}).get("rps") for sc in scenarios] for p in peers},
            out / "ratios.png", "throughput ratio mcpfast ÷ peer (above 1: mcpfast faster)", "ratio (log)",
            reference=1.0, value_format="{:.2f}",
        ),
    ]  # fmt: skip
    for sc in scenarios:
        curves = {}
        for s in servers:
            d = sc["servers"].get(s) or {}
            if not d.get("request"):
                continue
            hists = histograms(out / s / f"{sc['family']}-{sc['transport']}")
            h = next((h for (_t, name), h in hists.items() if name == d["request"]), None)
            if h is not None and h.total_count:
                curves[s] = h
        title = f"{sc['family']} over {sc['transport']}: {sc['request']} latency by percentile"
        made.append(plots.percentile_plot(curves, out / f"latency-{sc['family']}-{sc['transport']}.png", title))
    return made


# ---------------------------------------------------------------------------------------- main


def run_peers(cfg: PeersConfig, stream: TextIO | None = None) -> int:
    """Run every scenario on every server; write ``summary.json``, ``README.md`` and the plots;
    print the ratio table; return 0 when everything ran without failures, else 1."""
    out_stream = sys.stdout if stream is None else stream
    cfg.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    t0 = time.monotonic()
    loadavg_start = loadavg()
    machine = machine_info()
    versions = peer_versions()
    notes: list[str] = []
    unavailable: dict[str, str] = {}
    for s in cfg.servers:
        try:
            PEERS[s].check()
        except PeerNotAvailable as exc:
            unavailable[s] = str(exc)
    runs: list[dict[str, Any]] = []
    with open(log_path(cfg.out, "bench.log"), "w", encoding="utf-8") as log:
        for transport in cfg.transports:
            for family in cfg.families:
                for server in cfg.servers:
                    if server in unavailable:
                        runs.append(
                            {
                                "server": server,
                                "family": family,
                                "transport": transport,
                                "status": "not run",
                                "problems": [unavailable[server]],
                                "rows": [],
                                "requests": 0,
                                "failures": 0,
                            }
                        )
                        continue
                    log.write(f"\n===== {server} {family}/{transport}\n")
                    log.flush()
                    print(f"== {server}: {family}/{transport}", file=sys.stderr, flush=True)
                    runs.append(run_one(cfg, server, transport, family, log))
    for s in cfg.servers:
        sruns = [r for r in runs if r["server"] == s]
        merged = _merge_server_summary(cfg, s, sruns, machine)
        (cfg.out / s).mkdir(parents=True, exist_ok=True)
        write_summary(cfg.out / s, merged)
        if cfg.make_plots and cfg.server_plots and any(r.get("rows") for r in sruns):
            try:
                merged["plots"] = [p.name for p in generate_plots(cfg.out / s, merged)]
            except Exception as exc:  # a plotting bug must not lose the measurements
                merged["problems"].append(f"plots: {type(exc).__name__}: {exc}")
            write_summary(cfg.out / s, merged)
    scenarios = ratio_rows(runs, cfg.servers)
    problems = [f"{r['server']} {r['family']}/{r['transport']}: {p}" for r in runs for p in r.get("problems", [])]
    for sc in scenarios:
        for p, ratio in sc["ratios"].items():
            if REFERENCE in cfg.servers and any(v is None for v in ratio.values()):
                problems.append(f"{sc['family']}/{sc['transport']}: no ratio mcpfast ÷ {p} (a side has no number)")
    if "json" in {r.get("reply_mode") for r in runs}:
        notes.append(
            "The SDK servers take one reply mode per server; they were started with JSON replies for handshake, "
            "tools_call and session_churn and with SSE (their default) for sse_streaming, since JSON mode drops "
            "the progress notifications the stream tool sends. mcpfast chooses per request (JSON unless something "
            "precedes the reply)."
        )
    if "stdio" in cfg.transports:
        notes.append(
            "Over stdio a session is a server process: `initialize` in handshake and session_churn includes starting "
            "the interpreter and importing the SDK (Python), or starting Node; DELETE and the GET stream do not exist."
        )
    if "http" in cfg.transports and "session_churn" in cfg.families:
        notes.append(
            "Session churn abandons half of the sessions: mcpfast runs with --max-sessions 1000000 and the Python SDK "
            "with max_sessions=1000000 (its default cap is 10,000); the TypeScript SDK has no cap. None of them ends "
            "an abandoned session within the run (Python SDK idle timeout 30 min, mcpfast's default, TypeScript none)."
        )
    if "http" in cfg.transports and "sse_streaming" in cfg.families:
        notes.append(
            "sse_streaming over HTTP: each user also holds its session's standalone GET stream open beside its calls, "
            "on a connection of its own, for the session's whole life (loadtests/sse_streaming.py); its latencies (and "
            "the sse:first-event / sse:gap rows in each server's directory) say more than its rate."
        )
    if "http" in cfg.transports:
        notes.append(
            "No warm-up: each HTTP server is started fresh for each family and checked with one initialize; the "
            "first seconds of a run include Node's JIT compilation and Python's first-call costs."
        )
    for sc in scenarios:
        for name, d in sc["servers"].items():
            if d.get("rps_basis") == "run (sessions never all up)":
                notes.append(
                    f"{sc['family']}/{sc['transport']} on {name}: not every user's session was up at a whole second "
                    f"before the end of the run, so its rate is over the whole run (start included)."
                )
    if cfg.server_cpus is None:
        notes.append("No CPU pinning: the server and the swarm shared every CPU.")
    loadavg_end = loadavg()
    summary: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "command_line": cfg.command_line,
        "started_at": _dt.datetime.fromtimestamp(started, _dt.UTC).isoformat(timespec="seconds"),
        "wall_time_s": None,
        "loadavg_start": loadavg_start,
        "loadavg_end": loadavg_end,
        "machine_was_busy": machine_was_busy(loadavg_start, loadavg_end, machine.get("nproc")),
        "machine": machine,
        "versions": versions,
        "config": {
            "servers": list(cfg.servers),
            "transports": list(cfg.transports),
            "families": list(cfg.families),
            "users": cfg.users,
            "duration_s": cfg.duration,
            "stdio_duration_s": cfg.stdio_duration or cfg.duration,
            "model": "closed",
            "quick": cfg.quick,
            "server_cpus": cfg.server_cpus,
            "generator_cpus": cfg.generator_cpus,
            "json_families": list(JSON_FAMILIES),
            "reference": REFERENCE,
            "locust_args": list(cfg.locust_args),
            "ratio_definition": "mcpfast value ÷ peer value (rps > 1 and latency < 1 favour mcpfast)",
        },
        "servers": {
            s: {
                "description": PEERS[s].description,
                "package": PEERS[s].package,
                "version": versions.get(PEERS[s].package),
                "stdio_command": _stdio_command(s, cfg.server_cpus),
                "dir": s,
            }
            for s in cfg.servers
        },
        "scenarios": scenarios,
        "runs": runs,
        "notes": notes,
        "problems": problems,
        "ok": not problems,
        "plots": [],
    }
    summary["wall_time_s"] = round(time.monotonic() - t0, 2)
    write_summary(cfg.out, summary)
    if cfg.make_plots:
        try:
            summary["plots"] = [p.name for p in draw_plots(cfg.out, summary)]
        except Exception as exc:  # keep the numbers
            summary["problems"].append(f"plots: {type(exc).__name__}: {exc}")
            summary["ok"] = False
    summary["wall_time_s"] = round(time.monotonic() - t0, 2)
    write_summary(cfg.out, summary)
    (cfg.out / "README.md").write_text(render_readme(summary), encoding="utf-8")
    out_stream.write(render_console(summary) + "\n")
    for p in summary["problems"]:
        out_stream.write(f"problem: {p}\n")
    out_stream.write(f"wall time {summary['wall_time_s']:.0f} s; results in {cfg.out}/README.md and summary.json\n")
    out_stream.flush()
    return 0 if summary["ok"] else 1


def _stdio_command(server: str, cpus: str | None) -> str | None:
    try:
        return PEERS[server].stdio_command(cpus)
    except PeerNotAvailable:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.peers",
        description="mcpfast against the official Python and TypeScript SDK servers: the mcpfast bench families, "
        "server and generator pinned to separate CPUs; summary.json, README.md and plots in --out.",
    )
    parser.add_argument("--out", default="bench_results/peers", help="result directory (default bench_results/peers)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_DURATION:g} s per family, {QUICK_USERS} users")
    parser.add_argument("--duration", type=finite_positive, help=f"seconds per family (default {DEFAULT_DURATION:g})")
    parser.add_argument(
        "--stdio-duration",
        type=finite_positive,
        help=f"seconds per family over stdio (default {DEFAULT_STDIO_DURATION:g}, --quick "
        f"{QUICK_STDIO_DURATION:g}, else --duration when that is given)",
    )
    parser.add_argument("--users", type=int_at_least(1), help=f"users per family (default {DEFAULT_USERS})")
    parser.add_argument("--server", action="append", choices=SERVERS, help="only this server (repeatable)")
    parser.add_argument("--transport", choices=("http", "stdio", "both"), default="both")
    parser.add_argument("--family", action="append", choices=FAMILIES, help="only this family (repeatable)")
    parser.add_argument("--server-cpus", default=SERVER_CPU, help=f"CPU list of the server (default {SERVER_CPU})")
    parser.add_argument("--generator-cpus", default=GENERATOR_CPU, help=f"CPU list of the swarm (default {GENERATOR_CPU})")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the server or the swarm")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument(
        "--no-server-plots",
        action="store_true",
        help="skip each server directory's own plots (`mcpfast report <out>/<server>` draws them later)",
    )
    parser.add_argument("--locust-arg", action="append", default=[], metavar="ARG", help="extra argument for every locust run")
    args = parser.parse_args(argv)
    server_cpus: str | None = None if args.no_pin else args.server_cpus
    generator_cpus: str | None = None if args.no_pin else args.generator_cpus
    if not args.no_pin:
        allowed = os.sched_getaffinity(0)
        try:
            s_set, g_set = parse_cpus(args.server_cpus), parse_cpus(args.generator_cpus)
        except ValueError as exc:
            parser.error(str(exc))
        if not (s_set | g_set) <= allowed:
            parser.error(
                f"CPUs {sorted((s_set | g_set) - allowed)} are not available here (allowed {sorted(allowed)}); "
                "choose --server-cpus/--generator-cpus or --no-pin"
            )
        if s_set & g_set:
            parser.error("--server-cpus and --generator-cpus overlap")
    servers = tuple(s for s in SERVERS if s in args.server) if args.server else SERVERS
    cfg = PeersConfig(
        out=Path(args.out).resolve(),
        servers=servers,
        transports=("http", "stdio") if args.transport == "both" else (args.transport,),
        families=tuple(f for f in FAMILIES if f in args.family) if args.family else FAMILIES,
        users=args.users or (QUICK_USERS if args.quick else DEFAULT_USERS),
        duration=args.duration or (QUICK_DURATION if args.quick else DEFAULT_DURATION),
        stdio_duration=args.stdio_duration
        or (args.duration if args.duration else (QUICK_STDIO_DURATION if args.quick else DEFAULT_STDIO_DURATION)),
        server_cpus=server_cpus,
        generator_cpus=generator_cpus,
        quick=args.quick,
        make_plots=not args.no_plots,
        server_plots=not args.no_server_plots,
        command_line=["python", "-m", "benchmarks.peers", *(sys.argv[1:] if argv is None else argv)],
        locust_args=tuple(args.locust_arg),
    )
    return run_peers(cfg)


if __name__ == "__main__":
    raise SystemExit(main())
