"""``python -m benchmarks.server_canned``: ``mcpfast serve`` against a responder that does no MCP at all.

Two sides, driven by the same generator (``mcpfast-load``, pinned to ``GENERATOR_CPU``), each
server pinned to ``SERVER_CPU`` (``benchmarks.harness``):

* ``mcpfast``: ``mcpfast serve --transport http`` (the demo app, native runner, memory store);
* ``canned``: ``benchmarks.canned_responder``, uvloop + httptools answering from prepared bytes
  with the same statuses, header lines and body lengths (compared before the rounds:
  ``reply_shapes``). It is a floor for a Python server on this event loop: what mcpfast spends
  above it is its MCP work (sessions, dispatch, the tool, serialising) and its own HTTP parser.

Each of ``--rounds`` rounds starts a fresh server per side, the order alternating
(``harness.alternate``), and runs against it:

* **calls**: ``tools/call echo {"text": "hello"}`` from ``--connections`` (32) sessions, each on
  its own keep-alive connection with one call in flight (closed loop), ``--warmup`` then
  ``--seconds`` measured;
* **handshakes**: ``initialize`` + ``notifications/initialized`` + ``DELETE`` loops on as many
  connections, the same warm-up and window.

Per side and round: calls/s, handshakes/s, the server's CPU µs per call and per handshake (the
``/proc`` CPU of its process tree over the generator's measured window), tools/call p50 and p99
at 32 connections; per round the ratios mcpfast / canned, summarised by their median
(``harness.ratios``, ``harness.spread``).

Then **workers**: ``mcpfast serve --transport http --stateless-only --workers 2`` against
``--workers 1``, alternating, ``--workers-rounds`` rounds, with 2026-07-28 stateless
``tools/call`` (with the memory store, several workers may only serve stateless requests), under
two load models: **closed** (32 sessions, one call in flight each: every server at its own
limit) and **open** (``--rate``: ``--workers-rate`` calls/s per worker, so each worker carries
about the same load in both servers). The server is pinned to both CPUs (``taskset -c 0,1``,
which the workers inherit); the generator stays on ``GENERATOR_CPU``, so one worker shares that
core with it: two workers and a generator cannot have a core each on two. Each worker's CPU
(``/proc/PID/stat``) and the bytes it read (``/proc/PID/io`` ``rchar``: the requests, all of one
size) over the generator's run give its share of the calls and so its own CPU per call, set
against the single worker's, got the same way. With ``--workers-sessions`` the workers part
serves handshake-era sessions kept in Redis instead (``--store``, a ``redis-server`` started
for the run on the generator's CPU) and the generator calls on sessions: the scale-out of
sessions, where the workers share the store but no request of a held session waits on it.

Output in ``--out`` (``bench_results/server``): ``results.json`` (every figure and round, the
machine, the load average before and after, the commands) and ``results.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    CLOCK_TICKS,
    GENERATOR_CPU,
    SERVER_CPU,
    Record,
    alternate,
    arguments,
    cpu_ticks,
    exit_on_problems,
    fill_presets,
    head,
    medians,
    pinned,
    process_tree,
    publish,
    ratios,
    round_problems,
    spread,
)
from benchmarks.http_peers import LOAD_BIN, failure_count, load_binary, measure_rate
from benchmarks.peer_servers import initialize_problem
from mcpfast.bench.procs import ServerProcess, free_port, log_path, reference_argv
from mcpfast.client.errors import UnexpectedReply
from mcpfast.client.probe import child_pids
from mcpfast.client.session import CallResult, ClientSession
from mcpfast.protocol.http import ACCEPT_BOTH, JSON

__all__ = ["FIGURES", "SIDES", "exchange", "main", "run", "server_argv"]

SIDES = ("mcpfast", "canned")
LABELS = {"mcpfast": "mcpfast serve (demo app)", "canned": "canned responder"}
HOST = "127.0.0.1"
BOTH_CPUS = f"{SERVER_CPU},{GENERATOR_CPU}"
HANDSHAKE_VERSION = "2025-11-25"
STATELESS_VERSION = "2026-07-28"
WORKER_COUNTS = (2, 1)
READY_TIMEOUT = 30.0
WITHIN = 0.10
"""How far a worker's CPU per call may be from the single worker's and still count as the same."""

DEFAULTS = {"seconds": 7.0, "warmup": 2.0, "rounds": 4, "workers_rounds": 3}
"""About 5 minutes in all."""
QUICK = {"seconds": 2.0, "warmup": 1.0, "rounds": 2, "workers_rounds": 1}
"""About a minute: a smoke run, not figures to quote."""

FIGURES = ("calls_per_second", "cpu_us_per_call", "handshakes_per_second", "cpu_us_per_handshake", "p50_us", "p99_us")
"""Each side's figures per round, in the table's order."""
SHARES = ("server_share_calls", "generator_share_calls", "server_share_handshakes", "generator_share_handshakes")
"""CPU over the measured window as a share of one core: which side of the socket was the limit."""


# ------------------------------------------------------------------------------------ servers


def server_argv(side: str, python: str, port: int, *, workers: int = 0, store: str | None = None) -> list[str]:
    """The command serving ``side`` on ``port`` (not pinned); ``workers`` (mcpfast only):
    ``--stateless-only --workers N``, or with ``store`` (a Redis URL) ``--store URL --workers N``."""
    if side == "canned":
        return [python, "-m", "benchmarks.canned_responder", "--host", HOST, "--port", str(port)]
    argv = reference_argv(python, HOST, port)
    if not workers:
        return argv
    return argv + (["--store", store] if store else ["--stateless-only"]) + ["--workers", str(workers)]


def _listeners(port: int) -> int:
    """Sockets listening on ``port`` (IPv4): one per worker, as each binds its own (SO_REUSEPORT)."""
    suffix = f":{port:04X}"
    with open("/proc/net/tcp", encoding="ascii") as fh:
        next(fh)  # the column names
        return sum(1 for line in fh if (cols := line.split())[1].endswith(suffix) and cols[3] == "0A")


def start(side: str, opts: argparse.Namespace, out: Path, *, workers: int = 0, store: str | None = None) -> ServerProcess:
    """``side`` started and ready: pinned to ``SERVER_CPU`` (``workers``: to both CPUs, ready once
    every worker listens, since a stateless-only server refuses ``initialize``)."""
    port = free_port(HOST)
    cpus = BOTH_CPUS if workers else SERVER_CPU
    argv = pinned(server_argv(side, opts.python, port, workers=workers, store=store), cpus)
    tag = f"{side}-workers{workers}" if workers else side
    server = ServerProcess(tag, argv, HOST, port, log_path=log_path(out, f"server-{tag}.log"))

    def every_worker() -> str | None:
        n = _listeners(port)
        return None if n >= workers else f"{n} of {workers} workers listening"

    ready: Callable[[], str | None] = every_worker if workers else (lambda: initialize_problem(HOST, port))
    return server.start(READY_TIMEOUT, ready=ready)


# ----------------------------------------------------------------------------- reply shapes


def exchange(host: str, port: int, timeout: float = 5.0) -> list[dict[str, Any]]:
    """One MCP client session with the server at ``host:port/mcp`` over one keep-alive connection:
    ``initialize``, ``notifications/initialized``, ``tools/call echo {"text": "hello"}``, ``DELETE``.

    mcpfast's client (``ClientSession``) builds the requests and checks the replies (id, negotiated
    version, no error); each step is described by its status, header names (in order), header
    bytes and body length, the tools/call step also by its result.

    Raises:
        McpClientError: a reply the client refuses (wrong id, not JSON-RPC, an error, a version
            it does not speak).
        OSError: the connection failed.
    """
    session = ClientSession(HANDSHAKE_VERSION)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    steps: list[dict[str, Any]] = []

    def send(step: str, method: str, body: bytes | None) -> tuple[http.client.HTTPResponse, bytes]:
        headers = {"Content-Type": JSON, "Accept": ACCEPT_BOTH, **session.http_headers()}
        conn.request(method, "/mcp", body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        pairs = resp.getheaders()
        steps.append({
            "step": step, "status": resp.status, "headers": [name.lower() for name, _ in pairs],
            "header_bytes": sum(len(name) + len(value) + 4 for name, value in pairs), "body_bytes": len(data),
        })  # fmt: skip
        return resp, data

    def reply(data: bytes) -> CallResult:
        event = session.receive(data)
        if event.reply is None:
            raise UnexpectedReply("not a reply", event.kind)
        return event.reply

    try:
        resp, data = send("initialize", "POST", session.initialize_request().data)
        session.on_initialize_result(reply(data))
        session.session_id = resp.getheader("mcp-session-id")
        send("notifications/initialized", "POST", session.initialized_notification())
        call = session.request("tools/call", {"name": "echo", "arguments": {"text": "hello"}})
        _, data = send("tools/call", "POST", call.data)
        steps[-1]["result"] = reply(data).raise_for_error().result
        send("DELETE", "DELETE", None)
    finally:
        conn.close()
    return steps


def _shape(step: dict[str, Any]) -> tuple[Any, ...]:
    return step["step"], step["status"], step["headers"], step["header_bytes"], step["body_bytes"]


def reply_shapes(opts: argparse.Namespace, out: Path) -> dict[str, Any]:
    """:func:`exchange` against a fresh server of each side, and whether every step matched."""
    shapes: dict[str, Any] = {}
    for side in SIDES:
        with start(side, opts, out) as server:
            shapes[side] = exchange(HOST, server.port)
    same = [_shape(a) == _shape(b) for a, b in zip(shapes["mcpfast"], shapes["canned"], strict=True)]
    return {"sides": shapes, "identical": all(same)}


# -------------------------------------------------------------------------------- measuring


def _calls_args(opts: argparse.Namespace, *, stateless: bool = False) -> list[str]:
    args = ["--sessions", str(opts.connections), *_window(opts), "--tool", "echo", "--arguments", '{"text":"hello"}']
    return args + ["--protocol-version", STATELESS_VERSION] if stateless else args


def _window(opts: argparse.Namespace) -> list[str]:
    return ["--duration", str(opts.seconds), "--warmup", str(opts.warmup)]


def _timeout(opts: argparse.Namespace) -> float:
    return opts.seconds + opts.warmup + 120


def _share(result: dict[str, Any], block: str) -> float | None:
    data = result.get(block) or {}
    value = data.get("window_share_of_one_core", data.get("share_of_one_core"))
    return float(value) if isinstance(value, int | float) else None


def figures(calls: dict[str, Any], shakes: dict[str, Any]) -> dict[str, Any]:
    """One side's round, from the generator's two summaries."""
    latency = (calls.get("latency_us") or {}).get("tools/call") or {}
    return {
        "calls_per_second": calls.get("calls_per_second"),
        "cpu_us_per_call": (calls.get("server_cpu") or {}).get("us_per_operation"),
        "handshakes_per_second": shakes.get("handshakes_per_second"),
        "cpu_us_per_handshake": (shakes.get("server_cpu") or {}).get("us_per_operation"),
        "p50_us": latency.get("p50"),
        "p99_us": latency.get("p99"),
        "server_share_calls": _share(calls, "server_cpu"),
        "generator_share_calls": _share(calls, "generator_cpu"),
        "server_share_handshakes": _share(shakes, "server_cpu"),
        "generator_share_handshakes": _share(shakes, "generator_cpu"),
        "failures": failure_count(calls) + failure_count(shakes),
    }


def measure_server(server: ServerProcess, opts: argparse.Namespace, tag: str) -> dict[str, Any]:
    """Calls, then handshakes, against a started ``server``: its figures, printed under ``tag``."""
    calls = measure_rate(server, "calls", _calls_args(opts), _timeout(opts))
    shakes = measure_rate(server, "handshakes", ["--connections", str(opts.connections), *_window(opts)], _timeout(opts))
    row = figures(calls, shakes)
    print(
        f"{tag}: {row['calls_per_second']} calls/s ({row['cpu_us_per_call']} µs CPU), "
        f"{row['handshakes_per_second']} handshakes/s ({row['cpu_us_per_handshake']} µs CPU), failures {row['failures']}",
        file=sys.stderr,
        flush=True,
    )
    return {**row, "server_argv": shlex.join(server.argv), "calls": calls, "handshakes": shakes}


def measure_side(side: str, rnd: int, opts: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Calls, then handshakes, against a fresh server of ``side``."""
    tag = f"[server_canned] round {rnd + 1}: {side}"
    print(f"{tag} ...", file=sys.stderr, flush=True)
    try:
        with start(side, opts, out) as server:
            return measure_server(server, opts, tag)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"{tag}: ERROR {exc}", file=sys.stderr, flush=True)
        return {"error": str(exc)}


def _io_read_bytes(pid: int) -> int:
    """Bytes ``pid`` has read through read(2) and its kin (``rchar``); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/io", encoding="ascii") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))
    except (OSError, StopIteration, ValueError):
        return 0


def _worker_counters(pids: list[int]) -> dict[int, tuple[int, int]]:
    return {pid: (cpu_ticks(pid) or 0, _io_read_bytes(pid)) for pid in pids}


def measure_workers(label: tuple[str, int], rnd: int, opts: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Stateless calls against ``mcpfast serve --stateless-only --workers N`` on both CPUs (with
    ``opts.redis``: session calls against ``--store URL --workers N``), with each worker's
    share of the calls (from the bytes it read) and its CPU per call. ``label``: the load model
    (``closed``, or ``open`` at ``--workers-rate`` calls/s per worker) and N."""
    model, workers = label
    tag = f"workers round {rnd + 1}: {model}, --workers {workers}"
    print(f"[server_canned] {tag} ...", file=sys.stderr, flush=True)
    args = _calls_args(opts, stateless=opts.redis is None)
    if model == "open":
        args += ["--rate", str(opts.workers_rate * workers)]
    try:
        with start("mcpfast", opts, out, workers=workers, store=opts.redis) as server:
            # one process serves --workers 1 itself; above that the supervisor's children do
            pids = child_pids(server.pid) if workers > 1 else [server.pid]
            before = _worker_counters(pids)
            calls = measure_rate(server, "calls", args, _timeout(opts))
            after = _worker_counters(pids)
            processes = len(process_tree(server.pid))
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"[server_canned] {tag}: ERROR {exc}", file=sys.stderr, flush=True)
        return {"model": model, "workers": workers, "error": str(exc)}
    total_calls = int(((calls.get("requests") or {}).get("tools/call") or {}).get("ok_total") or 0)
    read = {pid: after[pid][1] - before[pid][1] for pid in pids}
    all_read = sum(read.values())
    per_worker = []
    for pid in pids:
        cpu = (after[pid][0] - before[pid][0]) / CLOCK_TICKS
        share = read[pid] / all_read if all_read else 0.0
        served = total_calls * share
        per_worker.append({
            "pid": pid, "cpu_seconds": round(cpu, 3), "bytes_read": read[pid], "share_of_calls": round(share, 4),
            "cpu_us_per_call": round(cpu / served * 1e6, 2) if served else None,
        })  # fmt: skip
    row = {
        "model": model,
        "workers": workers,
        "processes": processes,
        "calls_per_second": calls.get("calls_per_second"),
        "cpu_us_per_call": (calls.get("server_cpu") or {}).get("us_per_operation"),
        "calls_total": total_calls,
        "per_worker": per_worker,
        "failures": failure_count(calls),
        "server_argv": shlex.join(server.argv),
        "calls": calls,
    }
    print(
        f"[server_canned] {tag}: {row['calls_per_second']} calls/s, per worker "
        + ", ".join(f"{w['cpu_us_per_call']} µs/call ({w['share_of_calls']:.0%})" for w in per_worker),
        file=sys.stderr,
        flush=True,
    )
    return row


def _worker_ratios(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each worker's CPU per call under ``--workers 2`` over the single worker's, round by round."""
    per_round: list[list[float]] = []
    for two, one in zip(rounds["2"], rounds["1"], strict=True):
        single = ((one.get("per_worker") or [{}])[0]).get("cpu_us_per_call")
        values = [w["cpu_us_per_call"] / single for w in two.get("per_worker") or [] if w.get("cpu_us_per_call") and single]
        per_round.append([round(v, 3) for v in values])
    pooled = [v for values in per_round for v in values]
    return {
        "per_round": per_round,
        "pooled": spread(pooled),
        "within": WITHIN,
        "workers_within": sum(1 for v in pooled if abs(v - 1) <= WITHIN),
        "workers_measured": len(pooled),
        "total_cpu_per_call": spread(
            ratios((r.get("cpu_us_per_call") for r in rounds["2"]), (r.get("cpu_us_per_call") for r in rounds["1"]))
        ),
        "calls_per_second": spread(
            ratios((r.get("calls_per_second") for r in rounds["2"]), (r.get("calls_per_second") for r in rounds["1"]))
        ),
    }


def compare_workers(opts: argparse.Namespace, out: Path) -> dict[str, Any]:
    """``--workers 2`` against ``--workers 1``, alternating, under each load model."""
    models = ["closed"] + (["open"] if opts.workers_rate else [])
    labels = [(model, n) for model in models for n in WORKER_COUNTS]
    done = alternate(labels, opts.workers_rounds, lambda label, rnd: measure_workers(label, rnd, opts, out))
    result: dict[str, Any] = {
        "orders": [[f"{model} {n}" for model, n in order] for order in done.orders],
        "loadavg_per_round": done.loadavg,
        "pinning": f"server (supervisor and workers) taskset -c {BOTH_CPUS}; generator taskset -c {GENERATOR_CPU}",
        "mode": "sessions over Redis (--store)" if opts.redis else "stateless (--stateless-only)",
        "rate_per_worker": opts.workers_rate or None,
    }
    for model in models:
        rounds = {str(n): done.results[(model, n)] for n in WORKER_COUNTS}
        keys = ("calls_per_second", "cpu_us_per_call")
        result[model] = {
            "rounds": rounds,
            "medians": {n: medians([r for r in rows if "error" not in r], keys) for n, rows in rounds.items()},
            "ratios": _worker_ratios(rounds),
        }
    return result


@contextlib.contextmanager
def _redis(opts: argparse.Namespace, out: Path) -> Iterator[None]:
    """``opts.redis``: the URL of a redis-server started for the workers part
    (``benchmarks.scale.Redis``, pinned to the generator's CPU) with ``--workers-sessions``, else None."""
    opts.redis = None
    if not opts.workers_sessions:
        yield
        return
    from benchmarks.scale import Redis

    redis = Redis(out)
    try:
        opts.redis = redis.url
        yield
    finally:
        redis.stop()


# ---------------------------------------------------------------------------------- the run


def run(opts: argparse.Namespace, record: Record) -> dict[str, Any]:
    out = Path(opts.out)
    load_binary()
    record.machine.update(server_cpu=SERVER_CPU, generator_cpu=GENERATOR_CPU)
    shapes = reply_shapes(opts, out)
    done = alternate(SIDES, opts.rounds, lambda side, rnd: measure_side(side, rnd, opts, out))
    sides = {}
    for side in SIDES:
        ok = [r for r in done.results[side] if "error" not in r]
        sides[side] = {"median": medians(ok, FIGURES + SHARES), "rounds": done.results[side]}
    ours, canned = done.results["mcpfast"], done.results["canned"]
    ratio = {key: spread(ratios((r.get(key) for r in ours), (r.get(key) for r in canned))) for key in FIGURES}
    workers = None
    if opts.workers_rounds:
        with _redis(opts, out):
            workers = compare_workers(opts, out)
    keys = ("seconds", "warmup", "rounds", "workers_rounds", "workers_rate", "workers_sessions", "connections", "quick")
    config = {key: getattr(opts, key) for key in keys}
    data = record.finish(
        config=config,
        generator=str(LOAD_BIN),
        pinning={"server": SERVER_CPU, "generator": GENERATOR_CPU},
        reply_shapes=shapes,
        orders=done.orders,
        loadavg_per_round=done.loadavg,
        sides=sides,
        ratios=ratio,
        workers=workers,
    )
    publish(out, data, report)
    return data


def problems(data: dict[str, Any]) -> list[str]:
    """What went wrong in a run (errors, failed requests, replies of another shape); empty when nothing."""
    found = []
    for side in SIDES:
        found += round_problems(side, data["sides"][side]["rounds"])
    for model in ("closed", "open"):
        for n, rows in (((data.get("workers") or {}).get(model) or {}).get("rounds") or {}).items():
            found += round_problems(f"{model} --workers {n}", rows)
    if not data["reply_shapes"]["identical"]:
        found.append("the two sides' replies differ in shape (see reply_shapes)")
    return found


# ------------------------------------------------------------------------------------ report


def _num(value: Any, digits: int = 0) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, int | float) else "–"


def _x(summary: dict[str, Any], key: str) -> str:
    return f"{summary[key]:.2f}x" if summary.get(key) is not None else "–"


DIGITS = {"calls_per_second": 0, "cpu_us_per_call": 1, "handshakes_per_second": 0, "cpu_us_per_handshake": 1, "p50_us": 0, "p99_us": 0}


def report(data: dict[str, Any]) -> str:
    """``results.md``: the medians, the ratio rows, every round, the reply shapes, the workers."""
    cfg = data["config"]
    sides, ratio = data["sides"], data["ratios"]
    lines = [
        "# `mcpfast serve` against a canned-reply responder",
        "",
        head(data),
        "",
        f"Each server pinned to CPU {SERVER_CPU}, the generator (`mcpfast-load`) to CPU {GENERATOR_CPU}. "
        f"{cfg['rounds']} rounds, a fresh server per side and round, the order alternating; per run "
        f"{cfg['warmup']:g} s warm-up + {cfg['seconds']:g} s measured, {cfg['connections']} connections "
        "(tools/call echo from one session per connection, one call in flight each; handshakes: initialize + "
        "initialized + DELETE loops). Figures are medians over the rounds; ratios are mcpfast / canned per round, "
        "their median and range.",
        "",
        "| server | calls/s | CPU/call µs | handshakes/s | CPU/handshake µs | tools/call p50 µs | p99 µs |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for side in SIDES:
        median = sides[side]["median"]
        lines.append(f"| {LABELS[side]} | " + " | ".join(_num(median.get(k), DIGITS[k]) for k in FIGURES) + " |")
    lines.append("| **mcpfast / canned, median** | " + " | ".join(f"**{_x(ratio[k], 'median')}**" for k in FIGURES) + " |")
    lines.append("| mcpfast / canned, min – max | " + " | ".join(f"{_x(ratio[k], 'min')} – {_x(ratio[k], 'max')}" for k in FIGURES) + " |")
    lines += [
        "",
        "CPU in the measured window as a share of one core (median over rounds): near 1 for the server means it was the "
        "limit; near 1 for the generator means the generator was, and the rate is a floor for that server.",
        "",
        "| server | calls: server | calls: generator | handshakes: server | handshakes: generator |",
        "|---|---:|---:|---:|---:|",
    ]
    for side in SIDES:
        median = sides[side]["median"]
        lines.append(f"| {LABELS[side]} | " + " | ".join(_num(median.get(k), 2) for k in SHARES) + " |")
    lines += ["", "Every round (in the order run; load average at the round's start):", ""]
    lines += ["| round | order | load | side | " + " | ".join(FIGURES) + " | failures |", "|---" * (len(FIGURES) + 5) + "|"]
    for rnd, order in enumerate(data["orders"]):
        for side in SIDES:
            row = sides[side]["rounds"][rnd]
            cells = [_num(row.get(k), DIGITS[k]) for k in FIGURES]
            failures = row.get("error", row.get("failures"))
            lines.append(
                f"| {rnd + 1} | {' then '.join(order)} | {data['loadavg_per_round'][rnd][0]} | {side} | "
                + " | ".join(cells)
                + f" | {failures} |"
            )
    lines += _shapes(data["reply_shapes"])
    if data.get("workers"):
        lines += _workers(data["workers"], cfg)
    lines += ["", "## Command", "", "```sh", data["command"], "```", ""]
    return "\n".join(lines)


def _shapes(shapes: dict[str, Any]) -> list[str]:
    verdict = "identical" if shapes["identical"] else "**different**"
    lines = [
        "",
        f"Reply shapes, one MCP client session against each (status, header names in order, header bytes, body bytes): {verdict}.",
        "",
        "| step | " + " | ".join(SIDES) + " |",
        "|---|---|---|",
    ]
    for steps in zip(*(shapes["sides"][side] for side in SIDES), strict=True):
        cells = [f"{s['status']}, {', '.join(s['headers'])}; {s['header_bytes']} + {s['body_bytes']} B" for s in steps]
        lines.append(f"| {steps[0]['step']} | " + " | ".join(cells) + " |")
    return lines


def _workers(workers: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    lines = [
        "",
        (
            "## `--workers 2` against `--workers 1` (`--stateless-only`, 2026-07-28 tools/call)"
            if workers.get("mode", "").startswith("stateless")
            else "## `--workers 2` against `--workers 1` (`--store` Redis, tools/call on sessions)"
        ),
        "",
        f"Pinning: {workers['pinning']}: one worker shares the generator's core. {cfg['workers_rounds']} rounds, "
        "alternating, a fresh server each. A worker's share of the calls is its share of the request bytes the "
        "workers read (`/proc/PID/io`); its CPU per call is its CPU over the generator's run divided by those calls "
        "(warm-up included, so a little above the window figure). Load models: **closed**, 32 sessions with one "
        "call in flight each (each server at its own limit); **open**, "
        f"{_num(workers['rate_per_worker'])} calls/s per worker (`--rate` {_num(workers['rate_per_worker'])} x N), "
        "so each worker carries about the same load in both servers.",
        "",
        "| load | server | calls/s | CPU/call µs, all processes (window) | each worker: CPU/call µs (share of the calls) |",
        "|---|---|---:|---:|---|",
    ]
    models = [model for model in ("closed", "open") if model in workers]
    for model in models:
        for n in WORKER_COUNTS:
            for rnd, row in enumerate(workers[model]["rounds"][str(n)], 1):
                each = ", ".join(f"{_num(w['cpu_us_per_call'], 1)} ({w['share_of_calls']:.0%})" for w in row.get("per_worker") or [])
                cells = f"{_num(row.get('calls_per_second'))} | {_num(row.get('cpu_us_per_call'), 1)} | {each or row.get('error', '–')}"
                lines.append(f"| {model} | `--workers {n}`, round {rnd} | {cells} |")
    lines.append("")
    for model in models:
        r = workers[model]["ratios"]
        pooled = r["pooled"]
        lines.append(
            f"- {model}: each worker's CPU per call over the single worker's (same round): per round {r['per_round']}, "
            f"median **{_x(pooled, 'median')}** ({_x(pooled, 'min')} – {_x(pooled, 'max')}); within {r['within']:.0%}: "
            f"{r['workers_within']} of {r['workers_measured']} workers. All processes' CPU per call, 2 over 1: median "
            f"{_x(r['total_cpu_per_call'], 'median')}; calls/s, 2 over 1: median {_x(r['calls_per_second'], 'median')}."
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = arguments("server_canned", __doc__, "server", seconds=float(DEFAULTS["seconds"]), rounds=int(DEFAULTS["rounds"]))
    parser.epilog = (
        f"Defaults: {DEFAULTS['rounds']} rounds of {DEFAULTS['warmup']:g} s + {DEFAULTS['seconds']:g} s runs, "
        f"{DEFAULTS['workers_rounds']} workers rounds (about 5 minutes); --quick: {QUICK['rounds']} rounds of "
        f"{QUICK['warmup']:g} s + {QUICK['seconds']:g} s, {QUICK['workers_rounds']} workers round (about a minute). "
        "Options given explicitly win over both."
    )
    parser.add_argument("--warmup", type=float, default=None, help="seconds of warm-up before each measured window")
    parser.add_argument("--workers-rounds", type=int, default=None, help="rounds of --workers 2 against --workers 1 (0: none)")
    parser.add_argument(
        "--workers-rate",
        type=float,
        default=10_000.0,
        help="calls/s per worker in the open-model workers runs (default 10,000: about half of one worker's limit here; 0: none)",
    )
    parser.add_argument(
        "--workers-sessions",
        action="store_true",
        help="the workers part with sessions over Redis (`--store`, a redis-server started for the run) instead of stateless calls",
    )
    parser.add_argument("--connections", type=int, default=32, help="connections (calls: one session each)")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.set_defaults(seconds=None, rounds=None)
    opts = parser.parse_args(argv)
    fill_presets(opts, QUICK if opts.quick else DEFAULTS)
    return exit_on_problems(problems(run(opts, Record("server_canned", argv, lock=True))))


if __name__ == "__main__":
    sys.exit(main())
