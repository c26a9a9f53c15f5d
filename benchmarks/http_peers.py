"""``make bench-http``: mcpfast's Streamable HTTP server against the official SDK servers, in one run.

Every server (mcpfast on its native HTTP server, the official Python SDK server, the official
TypeScript SDK server; all with the same demo tools, ``benchmarks.peer_servers``) is
started pinned to core 0 and measured by ``mcpfast-load`` (the Rust generator in
``rust/mcpfast-load``) pinned to core 1, one scenario at a time, each on a fresh server:

* **calls**: ``tools/call echo`` with JSON replies from ``--sessions`` sessions (32), each on
  its own keep-alive connection, one call in flight per session (closed loop), for
  ``--duration`` seconds after ``--warmup``;
* **handshakes**: ``initialize`` + ``notifications/initialized`` + ``DELETE`` cycles on 32
  connections for ``--duration`` seconds;
* **memory**: the server's RSS with ``--hold`` (1,000) idle sessions open, against its RSS
  after a warm-up of create-and-delete cycles: KB per idle session;
* **churn**: ``--cycles`` (100,000) create-and-delete cycles, the server's RSS read every
  ``--cycles / 10``: growth from the first reading to the last.

The two rate scenarios run ``--rounds`` times (3); each round measures every server in turn,
then mcpfast under each ``--runners`` HTTP server (``benchmarks.harness.alternate``: the order
reversed every other round), so a drift of the shared machine touches all of them alike; the
median round is reported and every round is kept.

The server's CPU time (``/proc/PID/stat``, every thread) is read around each measured window,
so the report also gives CPU microseconds per call and per handshake, which move less than
rates on a shared machine. Output in ``--out`` (``bench_results/http/peers``): ``summary.json``
(every number, the machine, the versions, the commands), ``results.md`` (tables with
mcpfast's ratio to each peer), ``http_peers.png``, and each server's log.

The SDK servers answer in their JSON reply mode (``json_response``); their churn runs
``--peer-cycles`` cycles (they manage ~500 handshakes/s, so 100,000 would take minutes each).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import GENERATOR_CPU, ROOT, SERVER_CPU, Record, alternate, cpu_seconds, head, pinned, process_tree, results_dir
from benchmarks.peer_servers import PEERS, PeerNotAvailable, peer_versions, start_http
from mcpfast.bench.procs import ServerProcess, log_path, rss_kib
from mcpfast.locust.argtypes import int_at_least
from mcpfast.results.files import write_summary
from mcpfast.transports.http_runner import DEFAULT_RUNNER, RUNNERS

__all__ = ["GENERATOR_CPU", "SERVER_CPU", "failure_count", "load_binary", "main", "measure_rate", "median_round", "run"]

CARGO_PROFILE = os.environ.get("MCPFAST_CARGO_PROFILE") or "release"
"""The cargo profile of the generator binary: release, but ``make test``'s (``dev``) in its tests,
which check what it does, not how fast."""
LOAD_BIN = ROOT / "target" / ("debug" if CARGO_PROFILE == "dev" else CARGO_PROFILE) / "mcpfast-load"
SERVERS = ("mcpfast", "python-sdk", "typescript-sdk")
TARGETS = {"calls_per_second": 40_000, "handshakes_per_second": 10_000, "kb_per_session": 4.0}


def load_binary() -> Path:
    """The generator, built (``CARGO_PROFILE``) when missing or older than its sources."""
    sources = [p for p in (ROOT / "rust" / "mcpfast-load").rglob("*") if p.is_file()]
    newest = max((p.stat().st_mtime for p in sources), default=0.0)
    if not LOAD_BIN.exists() or LOAD_BIN.stat().st_mtime < newest:
        subprocess.run(["cargo", "build", "--profile", CARGO_PROFILE, "--quiet", "-p", "mcpfast-load"], cwd=ROOT, check=True)
    return LOAD_BIN


def rss_kb(pid: int) -> int:
    """The server's VmRSS in KiB; a server that is gone is an error here, not a zero."""
    value = rss_kib(pid)
    if value is None:
        raise RuntimeError(f"no VmRSS for pid {pid}")
    return value


def _generator(mode: str, url: str, *args: str, binary: Path = LOAD_BIN) -> list[str]:
    return pinned([str(binary), mode, "--url", url, *args], GENERATOR_CPU)


def _run_json(argv: list[str], timeout: float) -> dict[str, Any]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.strip().startswith("{")]
    if proc.returncode not in (0, 1) or not lines:
        raise RuntimeError(f"{shlex.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return json.loads(lines[-1])


def failure_count(result: dict[str, Any]) -> int:
    failures = result.get("failures", 0)
    return int(failures.get("total", 0)) if isinstance(failures, dict) else int(failures)


def measure_rate(server: ServerProcess, mode: str, args: list[str], timeout: float, binary: Path = LOAD_BIN) -> dict[str, Any]:
    """One rate scenario against ``server``, driven by the ``mcpfast-load`` at ``binary``. The
    generator reads the server's CPU time at the start and end of its measured window
    (``server_cpu``); the CPU over the whole generator run is recorded too."""
    pids = [arg for pid in process_tree(server.pid) for arg in ("--server-pid", str(pid))]
    argv = _generator(mode, server.url, *args, *pids, binary=binary)
    before = cpu_seconds(server.pid, tree=True)
    started = time.monotonic()
    result = _run_json(argv, timeout)
    wall = time.monotonic() - started
    result["server_cpu_seconds"] = round(cpu_seconds(server.pid, tree=True) - before, 3)
    result["run_wall_seconds"] = round(wall, 3)
    result["command"] = shlex.join(argv)
    return result


def measure_memory(server: ServerProcess, hold: int, timeout: float) -> dict[str, Any]:
    """KB of server RSS per idle session: warm up, read RSS, open ``hold`` sessions, read again."""
    warm = _generator("churn", server.url, "--cycles", "300", "--connections", "8")
    _run_json(warm, timeout)
    time.sleep(0.5)
    base = rss_kb(server.pid)
    argv = _generator("hold", server.url, "--sessions", str(hold), "--connections", "32")
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    opened: dict[str, Any] = {}
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        first = proc.stdout.readline()
        if first.strip():
            opened = json.loads(first)
        time.sleep(1.0)
        held = rss_kb(server.pid)
        rest, err = proc.communicate(input="release\n", timeout=timeout)
    finally:
        timer.cancel()
    final_lines = [line for line in rest.splitlines() if line.strip().startswith("{")]
    final = json.loads(final_lines[-1]) if final_lines else {}
    n = int(opened.get("sessions_open", 0))
    if n == 0:
        raise RuntimeError(f"{shlex.join(argv)} opened no session: {err.strip()[-400:]}")
    return {
        "sessions_held": n,
        "rss_before_kb": base,
        "rss_held_kb": held,
        "kb_per_session": round((held - base) / n, 2),
        "opens_per_second": opened.get("opens_per_second"),
        "failures": failure_count(final) + failure_count(opened),
        "deleted": final.get("deleted"),
        "command": shlex.join(argv),
    }


def measure_churn(server: ServerProcess, cycles: int, timeout: float) -> dict[str, Any]:
    """RSS every ``cycles / 10`` create-and-delete cycles."""
    every = max(1, cycles // 10)
    argv = _generator("churn", server.url, "--cycles", str(cycles), "--connections", "32", "--report-every", str(every))
    start_rss = rss_kb(server.pid)
    before = cpu_seconds(server.pid, tree=True)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    samples: list[tuple[int, int]] = []
    final: dict[str, Any] = {}
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            if not line.strip().startswith("{"):
                continue
            data = json.loads(line)
            if "cycles_done" in data:
                samples.append((int(data["cycles_done"]), rss_kb(server.pid)))
            else:
                final = data
        proc.wait(timeout=timeout)
    finally:
        timer.cancel()
    if not samples:
        raise RuntimeError(f"{shlex.join(argv)} reported no progress: {proc.stderr.read()[-400:] if proc.stderr else ''}")
    first, last = samples[0], samples[-1]
    return {
        "cycles_ok": final.get("cycles_ok"),
        "cycles_per_second": final.get("cycles_per_second"),
        "failures": failure_count(final),
        "rss_start_kb": start_rss,
        "rss_samples": samples,
        "growth_kb": last[1] - first[1],
        "growth_from_cycle": first[0],
        "growth_to_cycle": last[0],
        "server_cpu_seconds": round(cpu_seconds(server.pid, tree=True) - before, 3),
        "command": shlex.join(argv),
    }


RATE_KEYS = {"calls": "calls_per_second", "handshakes": "handshakes_per_second"}
"""The rate scenarios (run ``--rounds`` times, servers interleaved) and the figure each one yields."""


def _scenario(name: str, scenario: str, opts: argparse.Namespace) -> Any:
    """The measuring function of one scenario against server ``name``."""
    duration, warmup = str(opts.duration), str(opts.warmup)
    timeout = opts.duration + opts.warmup + 120
    if scenario == "calls":
        return lambda s: measure_rate(
            s,
            "calls",
            [
                "--sessions",
                str(opts.sessions),
                "--duration",
                duration,
                "--warmup",
                warmup,
                "--tool",
                "echo",
                "--arguments",
                '{"text":"hello"}',
            ],
            timeout,
        )
    if scenario == "handshakes":
        return lambda s: measure_rate(s, "handshakes", ["--connections", "32", "--duration", duration, "--warmup", warmup], timeout)
    if scenario == "memory":
        return lambda s: measure_memory(s, opts.hold, timeout)
    cycles = opts.cycles if name == "mcpfast" else opts.peer_cycles
    return lambda s: measure_churn(s, cycles, max(timeout, cycles / 100))


def measure_on_fresh_server(
    name: str, scenario: str, opts: argparse.Namespace, out: Path, *, runner: str | None = None, label: str = ""
) -> dict[str, Any]:
    """One scenario against a freshly started server ``name`` (mcpfast under ``runner``)."""
    tag = f"{name}{f' --runner {runner}' if runner else ''}: {scenario}{label}"
    print(f"[bench-http] {tag} ...", file=sys.stderr, flush=True)
    log = log_path(out, f"server-{name}-runner-{runner}.log" if runner else f"server-{name}-{scenario}.log")
    try:
        with start_http(name, cpus=SERVER_CPU, json_response=True, runner=runner, log_path=log) as server:
            result = _scenario(name, scenario, opts)(server)
    except PeerNotAvailable as exc:
        result = {"error": f"not available: {exc}"}
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        result = {"error": str(exc)}
    print(f"[bench-http] {tag}: {_short(scenario, result)}", file=sys.stderr, flush=True)
    return result


def median_round(rounds: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The round with the median ``key`` (the lower middle of an even count), with every
    round's figures under ``rounds`` and any failing round under ``round_problems``."""
    ok = [r for r in rounds if "error" not in r and isinstance(r.get(key), int | float)]
    problems = [r.get("error") or f"{failure_count(r)} failures" for r in rounds if "error" in r or failure_count(r)]
    chosen: dict[str, Any]
    if not ok:
        chosen = dict(rounds[0]) if rounds else {"error": "no round ran"}
    else:
        chosen = dict(sorted(ok, key=lambda r: r[key])[(len(ok) - 1) // 2])
    chosen["rounds"] = [
        {key: r.get(key), "server_cpu_us": (r.get("server_cpu") or {}).get("us_per_operation"),
         "failures": None if "error" in r else failure_count(r), "error": r.get("error")}
        for r in rounds
    ]  # fmt: skip
    if problems:
        chosen["round_problems"] = problems
    return chosen


def bench_all(opts: argparse.Namespace, out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every scenario against every server, and the calls under each ``--runners`` runner.

    The rate scenarios run ``--rounds`` times; each round measures every server (and runner)
    in turn, in alternating order, so a drift of the shared machine touches all of them alike;
    the median round is reported. Memory and churn run once per server. Each measurement has a
    fresh server.
    """
    rate = [s for s in RATE_KEYS if not opts.only or s in opts.only]
    once = [s for s in ("memory", "churn") if not opts.only or s in opts.only]
    # (server, scenario, runner): the servers' rate scenarios, then mcpfast's calls under each runner
    labels = [(name, scenario, None) for name in opts.servers for scenario in rate]
    labels += [("mcpfast", "calls", runner) for runner in opts.runners]

    def measure(label: tuple[str, str, str | None], rnd: int) -> dict[str, Any]:
        name, scenario, runner = label
        if runner == "granian" and importlib.util.find_spec("granian") is None:
            return {"error": "granian is not installed (pip install 'mcpfast[granian]'; make bench-http does)"}
        note = f" (round {rnd + 1} of {opts.rounds})" if opts.rounds > 1 else ""
        return measure_on_fresh_server(name, scenario, opts, out, runner=runner, label=note)

    done = alternate(labels, opts.rounds, measure) if labels else None
    rounds = done.results if done is not None else {}
    servers = []
    for name in opts.servers:
        result: dict[str, Any] = {"server": name, "reply_mode": PEERS[name].reply_mode(True)}
        for scenario in rate:
            result[scenario] = median_round(rounds[(name, scenario, None)], RATE_KEYS[scenario])
        for scenario in once:
            result[scenario] = measure_on_fresh_server(name, scenario, opts, out)
        servers.append(result)
    runners = {r: median_round(rounds[("mcpfast", "calls", r)], "calls_per_second") for r in opts.runners}
    return servers, runners


def _short(scenario: str, data: dict[str, Any]) -> str:
    if "error" in data:
        return "ERROR " + data["error"][:200]
    if scenario == "calls":
        return f"{data.get('calls_per_second')} calls/s, failures {failure_count(data)}"
    if scenario == "handshakes":
        return f"{data.get('handshakes_per_second')} handshakes/s, failures {failure_count(data)}"
    if scenario == "memory":
        return f"{data['kb_per_session']} KB per idle session"
    return f"{data.get('cycles_ok')} cycles, RSS growth {data['growth_kb']} KB"


# ---------------------------------------------------------------------------------- report


def _value(res: dict[str, Any], scenario: str, key: str) -> float | None:
    data = res.get(scenario) or {}
    value = data.get(key) if "error" not in data else None
    return float(value) if isinstance(value, int | float) else None


def _per_op_us(res: dict[str, Any], scenario: str, count_key: str) -> float | None:
    data = res.get(scenario) or {}
    if "error" in data or not data.get(count_key):
        return None
    window = data.get("server_cpu") or {}
    if isinstance(window.get("us_per_operation"), int | float):
        # the server's CPU over the measured window, per operation counted in that window
        return float(window["us_per_operation"])
    # older results: CPU over the whole generator run (warm-up and set-up included), an upper bound
    total = data.get("calls_total") or data.get("handshakes_total") or data.get(count_key)
    return round(data["server_cpu_seconds"] / float(total) * 1e6, 1) if total else None


def _lat(res: dict[str, Any], scenario: str, key: str, pct: str) -> float | None:
    data = res.get(scenario) or {}
    lat = data.get("latency_us") or data.get("latency") or {}
    block = lat.get(key, lat) if isinstance(lat, dict) else {}
    value = block.get(pct) if isinstance(block, dict) else None
    return float(value) if isinstance(value, int | float) else None


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _ratio(ours: float | None, theirs: float | None, higher_is_better: bool) -> str:
    if ours is None or theirs is None or ours == 0 or theirs == 0:
        return "–"
    ratio = ours / theirs if higher_is_better else theirs / ours
    return f"{ratio:,.1f}x"


def report(summary: dict[str, Any], out: Path) -> str:
    results = {r["server"]: r for r in summary["servers"]}
    names = [n for n in SERVERS if n in results]
    peers = [n for n in names if n != "mcpfast"]
    rows = [
        ("tools/call echo, calls/s (32 sessions)", "calls", "calls_per_second", True, 0),
        ("handshakes/s (initialize, initialized, DELETE)", "handshakes", "handshakes_per_second", True, 0),
        ("KB per idle session (1,000 held)", "memory", "kb_per_session", False, 2),
    ]
    lines = [
        "# Streamable HTTP: mcpfast against the official SDK servers",
        "",
        head(summary),
        "",
        f"Each server pinned to core {SERVER_CPU}, the generator (`mcpfast-load`, Rust) to core {GENERATOR_CPU}." + _rounds_note(summary),
        "",
        "| scenario | " + " | ".join(names) + " | " + " | ".join(f"mcpfast vs {p}" for p in peers) + " | target |",
        "|---|" + "---:|" * (len(names) + len(peers)) + "---|",
    ]
    targets = {"calls": "≥ 40,000", "handshakes": "≥ 10,000", "memory": "≤ 4 KB"}
    for label, scenario, key, higher, digits in rows:
        values = {n: _value(results[n], scenario, key) for n in names}
        cells = [_fmt(values[n], digits) for n in names]
        ratios = [_ratio(values.get("mcpfast"), values[p], higher) for p in peers]
        lines.append(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + f" | {targets[scenario]} |")
    cpu_rows = [("server CPU µs per call", "calls", "calls"), ("server CPU µs per handshake", "handshakes", "handshakes")]
    for label, scenario, count in cpu_rows:
        values = {n: _per_op_us(results[n], scenario, count) for n in names}
        cells = [_fmt(values[n], 1) for n in names]
        ratios = [_ratio(values.get("mcpfast"), values[p], False) for p in peers]
        lines.append(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " | |")
    for pct in ("p50", "p99"):
        values = {n: _lat(results[n], "calls", "tools/call", pct) for n in names}
        cells = [_fmt(values[n], 0) for n in names]
        ratios = [_ratio(values.get("mcpfast"), values[p], False) for p in peers]
        lines.append(f"| tools/call latency {pct} µs (closed loop) | " + " | ".join(cells) + " | " + " | ".join(ratios) + " | |")
    churn_cells = []
    for n in names:
        data = results[n].get("churn") or {}
        if "error" in data or not data:
            churn_cells.append("–")
        else:
            churn_cells.append(f"{data['growth_kb']:+,} KB over cycles {data['growth_from_cycle']:,}–{data['growth_to_cycle']:,}")
    lines.append("| RSS growth in churn (create + DELETE cycles) | " + " | ".join(churn_cells) + " |" + " |" * len(peers) + " none |")
    lines += ["", "Failures (every reply is checked: status, id, result):", ""]
    for n in names:
        parts = []
        for scenario in ("calls", "handshakes", "memory", "churn"):
            data = results[n].get(scenario) or {}
            parts.append(f"{scenario} {'ERROR: ' + data['error'][:120] if 'error' in data else failure_count(data)}")
        lines.append(f"- {n}: " + ", ".join(parts))
    lines += [
        "",
        "CPU in the measured window, as a share of one core: the server (near 1 means it was the",
        "bottleneck) and the generator (well under 1 means it was not):",
        "",
    ]
    for n in names:
        shares = []
        for scenario in ("calls", "handshakes"):
            data = results[n].get(scenario) or {}
            gen = data.get("generator_cpu") or {}
            share = gen.get("window_share_of_one_core", gen.get("share_of_one_core")) if isinstance(gen, dict) else None
            srv = data.get("server_cpu") or {}
            server_share = srv.get("share_of_one_core") if isinstance(srv, dict) else None
            shares.append(
                f"{scenario}: server {server_share if server_share is not None else '–'}, generator {share if share is not None else '–'}"
            )
        lines.append(f"- {n}: " + "; ".join(shares))
    lines += _rounds_table(results, names)
    lines += _runner_table(summary.get("runners") or {})
    lines += [
        "",
        "## Machine and versions",
        "",
        "```json",
        json.dumps({"machine": summary["machine"], "versions": summary["versions"]}, indent=2),
        "```",
        "",
        "## Commands",
        "",
        "Each server was started by `benchmarks.peer_servers.start_http` (its command is the first line of",
        "`logs/server-<name>-<scenario>.log`, not kept in git); the generator commands, per server and scenario, are in `summary.json`",
        "(`command` fields). Regenerate everything with:",
        "",
        "```sh",
        summary["command"],
        "```",
        "",
        "Caveats: a 2-core VM shared with other work; absolute rates move between runs, the ratios measured",
        "in one run move much less. Latencies are closed-loop (one call in flight per session), so they",
        "describe the server at its own saturation point, not at a fixed offered rate.",
        "",
    ]
    text = "\n".join(lines)
    (out / "results.md").write_text(text)
    return text


def _rounds_note(summary: dict[str, Any]) -> str:
    rounds = (summary.get("config") or {}).get("rounds", 1)
    if rounds <= 1:
        return ""
    return (
        f" Rates, their CPU rows and latencies are from the median of {rounds} rounds; each round measured every"
        " server in turn (a fresh process each time), so a drift of the shared machine touches all of them alike."
    )


def _per_round(data: dict[str, Any], key: str) -> str:
    values = [r.get(key) for r in data.get("rounds") or []]
    return " / ".join(_fmt(float(v)) if isinstance(v, int | float) else "–" for v in values) or "–"


def _rounds_table(results: dict[str, Any], names: list[str]) -> list[str]:
    """Every round's rate, per server (``--rounds``)."""
    if not any((results[n].get(s) or {}).get("rounds") for n in names for s in RATE_KEYS):
        return []
    lines = ["", "Every round (in the order run):", "", "| server | calls/s | handshakes/s |", "|---|---|---|"]
    for n in names:
        cells = [_per_round(results[n].get(s) or {}, key) for s, key in RATE_KEYS.items()]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def _runner_table(runners: dict[str, Any]) -> list[str]:
    """The HTTP server comparison (``--runners``) as a table."""
    if not runners:
        return []
    lines = [
        "",
        "## mcpfast under each HTTP server (`mcpfast serve --runner`)",
        "",
        f"The calls scenario above (tools/call echo, 32 sessions, JSON replies), the same app and generator, a fresh "
        f"server per runner. The default is `{DEFAULT_RUNNER}`.",
        "",
        "| runner | calls/s | server CPU µs per call | p50 µs | p99 µs | failures | calls/s, every round |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for name, data in runners.items():
        if "error" in data:
            lines.append(f"| {name} | – | – | – | – | ERROR: {data['error'][:160]} | |")
            continue
        res = {"calls": data}
        lines.append(
            f"| {name} | {_fmt(_value(res, 'calls', 'calls_per_second'))} | {_fmt(_per_op_us(res, 'calls', 'calls'), 1)} "
            f"| {_fmt(_lat(res, 'calls', 'tools/call', 'p50'))} | {_fmt(_lat(res, 'calls', 'tools/call', 'p99'))} "
            f"| {failure_count(data)} | {_per_round(data, 'calls_per_second')} |"
        )
    return lines


def plot(summary: dict[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = {r["server"]: r for r in summary["servers"]}
    names = [n for n in SERVERS if n in results]
    colors = {"mcpfast": "#d62728", "python-sdk": "#1f77b4", "typescript-sdk": "#2ca02c"}
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    panels = [
        ("tools/call echo, calls/s", "calls", "calls_per_second", TARGETS["calls_per_second"]),
        ("handshakes/s", "handshakes", "handshakes_per_second", TARGETS["handshakes_per_second"]),
        ("KB per idle session (1,000 held)", "memory", "kb_per_session", TARGETS["kb_per_session"]),
    ]
    for ax, (title, scenario, key, target) in zip(axes, panels, strict=False):
        values = [_value(results[n], scenario, key) or 0.0 for n in names]
        bars = ax.bar(names, values, color=[colors.get(n, "grey") for n in names])
        ax.set_yscale("log")
        ax.axhline(target, linestyle="--", color="black", linewidth=1, label=f"target {target:,}")
        ax.set_title(title)
        for bar, value in zip(bars, values, strict=True):
            ax.annotate(
                f"{value:,.1f}" if value < 100 else f"{value:,.0f}",
                (bar.get_x() + bar.get_width() / 2, value),
                ha="center",
                va="bottom",
                fontsize=8,
            )
        ax.legend(fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
    ax = axes[3]
    for n in names:
        data = results[n].get("churn") or {}
        samples = data.get("rss_samples") if "error" not in data else None
        if samples:
            ax.plot([c for c, _ in samples], [r / 1024 for _, r in samples], marker="o", label=n, color=colors.get(n))
    ax.set_title("server RSS during churn (MiB)")
    ax.set_xlabel("create + DELETE cycles")
    ax.legend(fontsize=8)
    fig.suptitle("Streamable HTTP, one server core: mcpfast vs the official SDK servers")
    fig.tight_layout()
    path = out / "http_peers.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(opts: argparse.Namespace, record: Record) -> dict[str, Any]:
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    load_binary()
    record.machine.update(server_cpu=SERVER_CPU, generator_cpu=GENERATOR_CPU)
    versions = peer_versions()
    servers, runners = bench_all(opts, out)
    summary = record.finish(config=vars(opts), versions=versions, targets=TARGETS, servers=servers)
    if runners:
        summary["runners"] = runners
    write_summary(out, summary)
    print(report(summary, out))
    if not opts.no_plots:
        plot(summary, out)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.http_peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(results_dir("http/peers")))
    parser.add_argument("--servers", nargs="+", default=list(SERVERS), choices=SERVERS)
    parser.add_argument("--only", nargs="+", choices=("calls", "handshakes", "memory", "churn"), help="a subset of the scenarios")
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per rate scenario")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--hold", type=int, default=1000, help="idle sessions held for the memory scenario")
    parser.add_argument("--cycles", type=int, default=100_000, help="churn cycles against mcpfast")
    parser.add_argument("--peer-cycles", type=int, default=10_000, help="churn cycles against the SDK servers")
    parser.add_argument(
        "--rounds",
        type=int_at_least(1),
        default=3,
        help="rounds of the rate scenarios (servers interleaved in each); the median is reported",
    )
    parser.add_argument(
        "--runners",
        nargs="*",
        default=[],
        choices=RUNNERS,
        help="also run the calls scenario against mcpfast under each of these HTTP servers",
    )
    parser.add_argument("--no-plots", action="store_true")
    opts = parser.parse_args(argv)
    summary = run(opts, Record("http_peers", argv))
    failed = [
        f"{r['server']}/{s}"
        for r in summary["servers"]
        for s in ("calls", "handshakes", "memory", "churn")
        if isinstance(r.get(s), dict) and ("error" in r[s] or failure_count(r[s]) or r[s].get("round_problems"))
    ]
    failed += [f"runner {n}" for n, r in summary.get("runners", {}).items() if "error" in r or failure_count(r) or r.get("round_problems")]
    if failed:
        print("problems: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
