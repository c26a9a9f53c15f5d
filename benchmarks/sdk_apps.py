"""``python -m benchmarks.sdk_apps``: the same official-SDK (or FastMCP) app on its own framework
and on mcpfast, side by side.

The app is ``benchmarks.sdk_app`` (an ``MCPServer``, and a ``fastmcp.FastMCP`` when fastmcp is
installed), written against its framework and never changed. Two sides per framework, each
pinned to ``SERVER_CPU``, driven by the same generator (``mcpfast-load``, pinned to
``GENERATOR_CPU``):

* ``own``: the framework's Streamable HTTP app under uvicorn (uvloop, httptools), its default
  settings (``python -m benchmarks.sdk_app --framework F``);
* ``mcpfast``: ``mcpfast serve --transport http --app benchmarks.sdk_app:OBJ``: the object as
  it is, on mcpfast's native HTTP server.

Each of ``--rounds`` rounds starts a fresh server per side (the order alternating) and measures
**calls** (``tools/call echo {"text": "hello"}`` from ``--connections`` sessions, one call in
flight each) and **handshakes** (``initialize`` + ``notifications/initialized`` + ``DELETE``
loops), as ``benchmarks.server_canned`` does: calls/s, handshakes/s, the server's CPU per call
and per handshake (``/proc`` of its process tree over the measured window), p50/p99 of
tools/call, and per round the ratios mcpfast / own.

Output in ``--out`` (``bench_results/sdkapps``): ``results.json`` and ``results.md``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import GENERATOR_CPU, SERVER_CPU, Record, alternate, arguments, head, medians, pinned, publish, ratios, spread
from benchmarks.http_peers import LOAD_BIN, load_binary
from benchmarks.peer_servers import initialize_problem
from benchmarks.server_canned import FIGURES, HOST, measure_server
from mcpfast.bench.procs import ServerProcess, free_port, log_path

__all__ = ["FRAMEWORKS", "main", "run", "server_argv"]

FRAMEWORKS = {"mcp": "mcp", "fastmcp": "fastmcp_app"}
"""Framework -> the attribute of ``benchmarks.sdk_app`` holding its app."""
SIDES = ("mcpfast", "own")
INLINE = "mcpfast --inline-sync-tools"
"""A third side for the official SDK's app: its plain ``def`` tools run on the event loop."""


def sides(framework: str) -> tuple[str, ...]:
    return ("mcpfast", INLINE, "own") if framework == "mcp" else SIDES


READY_TIMEOUT = 60.0
DEFAULTS = {"seconds": 5.0, "warmup": 1.0, "rounds": 3}


def available() -> list[str]:
    """The frameworks whose app could be made here (fastmcp is optional)."""
    from benchmarks import sdk_app

    return [name for name, attr in FRAMEWORKS.items() if getattr(sdk_app, attr) is not None]


def server_argv(side: str, framework: str, python: str, port: int) -> list[str]:
    """The command serving ``framework``'s app on ``side`` (not pinned)."""
    if side == "own":
        return [python, "-m", "benchmarks.sdk_app", "--framework", framework, "--host", HOST, "--port", str(port)]
    app = f"benchmarks.sdk_app:{FRAMEWORKS[framework]}"
    argv = [python, "-m", "mcpfast", "serve", "--transport", "http", "--host", HOST, "--port", str(port), "--app", app]
    return argv + ["--max-sessions", "1000000"] + (["--inline-sync-tools"] if side == INLINE else [])


def measure(label: tuple[str, str], rnd: int, opts: argparse.Namespace, out: Path) -> dict[str, Any]:
    framework, side = label
    tag = f"round {rnd + 1}: {framework} on {side}"
    print(f"[sdk_apps] {tag} ...", file=sys.stderr, flush=True)
    port = free_port(HOST)
    argv = pinned(server_argv(side, framework, opts.python, port), SERVER_CPU)
    name = f"{framework}-{side.replace(' --', '-')}"
    server = ServerProcess(name, argv, HOST, port, log_path=log_path(out, f"server-{name}.log"))
    try:
        with server.start(READY_TIMEOUT, ready=lambda: initialize_problem(HOST, port)):
            return measure_server(server, opts, f"[sdk_apps] {tag}")
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"[sdk_apps] {tag}: ERROR {exc}", file=sys.stderr, flush=True)
        return {"error": str(exc)}


def run(opts: argparse.Namespace, record: Record) -> dict[str, Any]:
    out = Path(opts.out)
    load_binary()
    record.machine.update(server_cpu=SERVER_CPU, generator_cpu=GENERATOR_CPU)
    here = available()
    frameworks = [f for f in opts.frameworks.split(",") if f]
    missing = [f for f in frameworks if f not in here]
    if missing:
        raise SystemExit(f"not available here: {', '.join(missing)} (pip install 'mcpfast[sdk]')")
    labels = [(f, side) for f in frameworks for side in sides(f)]
    done = alternate(labels, opts.rounds, lambda label, rnd: measure(label, rnd, opts, out))
    result: dict[str, Any] = {}
    for f in frameworks:
        own = done.results[(f, "own")]
        result[f] = {
            "median": {side: medians([r for r in done.results[(f, side)] if "error" not in r], FIGURES) for side in sides(f)},
            "ratios": {
                side: {key: spread(ratios((r.get(key) for r in done.results[(f, side)]), (r.get(key) for r in own))) for key in FIGURES}
                for side in sides(f)
                if side != "own"
            },
            "rounds": {side: done.results[(f, side)] for side in sides(f)},
        }
    config = {key: getattr(opts, key) for key in ("seconds", "warmup", "rounds", "connections", "frameworks")}
    data = record.finish(config=config, generator=str(LOAD_BIN), orders=done.orders, loadavg_per_round=done.loadavg, frameworks=result)
    publish(out, data, report)
    return data


def _num(value: Any, digits: int = 0) -> str:
    return "-" if not isinstance(value, int | float) else f"{value:,.{digits}f}"


def report(data: dict[str, Any]) -> str:
    cfg = data["config"]
    lines = [
        "# An official-SDK / FastMCP app on its own framework and on mcpfast",
        "",
        head(data),
        "",
        f"Each server pinned to CPU {SERVER_CPU}, the generator (`mcpfast-load`) to CPU {GENERATOR_CPU}; "
        f"{cfg['rounds']} rounds, a fresh server per side and round, the order alternating; per run "
        f"{cfg['warmup']:g} s warm-up + {cfg['seconds']:g} s measured, {cfg['connections']} connections. "
        "Figures are medians over the rounds; ratios are mcpfast / own per round (median, min – max).",
        "",
        "| app | served by | calls/s | CPU/call µs | handshakes/s | CPU/handshake µs | p50 µs | p99 µs |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    digits = {"calls_per_second": 0, "cpu_us_per_call": 1, "handshakes_per_second": 0, "cpu_us_per_handshake": 1, "p50_us": 0, "p99_us": 0}
    for f, res in data["frameworks"].items():
        for side in sides(f):
            m = res["median"][side]
            lines.append(f"| {f} | {side} | " + " | ".join(_num(m.get(k), digits[k]) for k in FIGURES) + " |")
        for side, r in res["ratios"].items():
            lines.append(
                f"| {f} | **{side} / own** | "
                + " | ".join(
                    f"**{_num(r[k].get('median'), 2)}x** ({_num(r[k].get('min'), 2)} – {_num(r[k].get('max'), 2)})" for k in FIGURES
                )
                + " |"
            )
    lines += ["", "## Command", "", "```sh", data["command"], "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = arguments("sdk_apps", __doc__, "sdkapps", seconds=DEFAULTS["seconds"], rounds=int(DEFAULTS["rounds"]))
    parser.add_argument("--warmup", type=float, default=DEFAULTS["warmup"], help="seconds of warm-up before each measured window")
    parser.add_argument("--connections", type=int, default=32, help="connections (calls: one session each)")
    parser.add_argument("--frameworks", default="mcp,fastmcp", help="comma-separated: mcp, fastmcp")
    opts = parser.parse_args(argv)
    data = run(opts, Record("sdk_apps", argv, lock=True))
    failed = [
        f for f, res in data["frameworks"].items() for rows in res["rounds"].values() for r in rows if r.get("error") or r.get("failures")
    ]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
