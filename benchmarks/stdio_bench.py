"""stdio throughput: ``mcpfast serve`` against the official Python SDK's low-level server.

    python -m benchmarks.stdio_bench --out bench_results/stdio          # the full benchmark
    python -m benchmarks.stdio_bench --sdk-server                       # the SDK echo server

One client drives both servers the same way: it spawns the server (pinned to one core with
``taskset``), does ``initialize`` + ``notifications/initialized``, then keeps exactly
``--inflight`` ``tools/call echo`` requests outstanding for ``--warmup`` + ``--duration`` seconds
(a closed loop: every reply is answered by one new request). Each reply is matched to its id and
checked to be a result (not a JSON-RPC error, not ``isError``). Calls/s and latency percentiles
are measured over the ``--duration`` window only.

The client is kept cheap so that it is not the bottleneck: request bytes are pre-encoded with the
id spliced in, replies are framed by ``core.LineFramer`` and checked by ``core.scan_reply`` (no
JSON objects are built), reads are up to 1 MiB and all requests due after one read go out in one
write. Its CPU time per call is measured next to the server's (``/proc/<pid>/stat``) and
reported; a run where the client used more than half the server's CPU per call is flagged.

Rounds alternate the servers (mcpfast, SDK, then SDK, mcpfast, ...: ``benchmarks.harness.alternate``)
so that noise from other work on the machine hits both; the ratio is computed per round and the
median of the rounds reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import Record, alternate, cpu_seconds, head, pinned, results_dir, write
from mcpfast.bench.procs import child_env, machine_info

__all__ = ["SERVERS", "main", "run_server", "server_command"]

ECHO_TEXT = "hello from the stdio benchmark"
PROTOCOL = "2025-11-25"
_READ = 1 << 20

SERVERS: dict[str, str] = {
    "mcpfast": "mcpfast serve --transport stdio (demo app, echo)",
    "mcpfast-baseline": "the same command on an older source tree (--baseline-src), for before/after",
    "python-sdk": "mcp 2.x mcp.server.lowlevel.Server, stdio_server (echo)",
}
_ORDER = ("mcpfast", "mcpfast-baseline", "python-sdk")


# --------------------------------------------------------------------- servers


def server_command(name: str, cpu: int | None) -> list[str]:
    """The argv that starts server ``name`` (pinned to ``cpu`` with taskset when given)."""
    if name in ("mcpfast", "mcpfast-baseline"):
        argv = [sys.executable, "-m", "mcpfast", "serve", "--transport", "stdio"]
    elif name == "python-sdk":
        argv = [sys.executable, "-m", "benchmarks.stdio_bench", "--sdk-server"]
    else:
        raise ValueError(f"unknown server {name!r}")
    return pinned(argv, cpu)


def sdk_server() -> None:
    """Serve ``echo`` with the official SDK's low-level ``Server`` over its stdio transport."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    echo_tool = types.Tool(
        name="echo",
        description="Return the text unchanged.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[echo_tool])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != "echo":
            return types.CallToolResult(content=[types.TextContent(type="text", text="unknown tool")], is_error=True)
        text = (params.arguments or {}).get("text", "")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = Server("sdk-lowlevel-echo", version="1", on_list_tools=list_tools, on_call_tool=call_tool)

    async def run() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


# ---------------------------------------------------------------------- client


class BenchError(RuntimeError):
    """The server misbehaved (bad reply, stalled, died)."""


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


def run_server(
    argv: list[str],
    *,
    duration: float = 5.0,
    warmup: float = 1.0,
    inflight: int = 32,
    stall_timeout: float = 10.0,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
) -> dict[str, Any]:
    """Drive one server process with a closed loop of ``inflight`` echo calls.

    Returns:
        calls, calls_per_s, latency percentiles (ms), CPU seconds per call of client and server,
        and the error/mismatch counts (all zero on a correct run).

    Raises:
        BenchError: the server stalled for ``stall_timeout`` seconds, died, or answered an id
            that was not outstanding.
    """
    from mcpfast import core

    # One request line with the id spliced in by a single bytes-format operation.
    template = (
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":'
        + json.dumps(ECHO_TEXT).encode().replace(b"%", b"%%")
        + b"}}}\n"
    )
    init = (
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "stdio-bench", "version": "1"}},
            }
        ).encode()
        + b"\n"
    )
    initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
    is_error_marker = b'"isError":true'

    errlog = tempfile.TemporaryFile()  # noqa: SIM115 - a file, not a pipe: a chatty server cannot block on it
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=env, cwd=cwd)
    assert proc.stdin is not None and proc.stdout is not None
    wfd, rfd = proc.stdin.fileno(), proc.stdout.fileno()
    # Reads block (no select per read); a watchdog kills a server that stalls, which ends the
    # read with EOF.
    progress = [0, False]  # reads so far, stop flag

    def watchdog() -> None:
        seen = -1
        while not progress[1]:
            time.sleep(min(1.0, stall_timeout))
            if progress[0] == seen and not progress[1]:
                stalled_at = time.monotonic()
                while progress[0] == seen and not progress[1] and time.monotonic() - stalled_at < stall_timeout:
                    time.sleep(0.1)
                if progress[0] == seen and not progress[1]:
                    progress[1] = True
                    proc.kill()
                    return
            seen = progress[0]

    guard = threading.Thread(target=watchdog, daemon=True)
    guard.start()
    framer = core.LineFramer()
    scan = core.scan_reply
    read = os.read
    write = os.write
    clock = time.perf_counter

    def read_lines() -> list[Any]:
        chunk = read(rfd, _READ)
        progress[0] += 1
        if not chunk:
            raise BenchError(f"server closed stdout or stalled for {stall_timeout} s (exit {proc.poll()}): {_stderr_tail(errlog)}")
        return framer.feed(chunk)

    try:
        # ---- handshake
        write(wfd, init)
        deadline = clock() + 30.0
        while True:
            if clock() > deadline:
                raise BenchError("no initialize reply in 30 s")
            lines = read_lines()
            if any(scan(line)[0] == 0 for line in lines if not isinstance(line, core.FrameTooLarge) and b'"id"' in line):
                break
        write(wfd, initialized)

        # ---- closed loop
        sent_at: list[float] = [0.0]  # index = request id (id 0 was initialize)
        next_id = 1
        outstanding = 0
        latencies: list[float] = []
        calls = errors = unexpected = notifications = 0
        now = clock()
        t_measure = now + warmup
        t_stop = t_measure + duration
        measuring = False
        cpu_client0 = cpu_server0 = 0.0
        wall0 = 0.0
        burst = [template % i for i in range(next_id, next_id + inflight)]
        sent_at.extend([now] * inflight)
        next_id += inflight
        outstanding = inflight
        write(wfd, b"".join(burst))
        sending = True
        reads = 0
        while outstanding:
            lines = read_lines()
            reads += 1
            now = clock()
            if not measuring and now >= t_measure:
                measuring = True
                wall0 = now
                cpu_client0 = time.process_time()
                cpu_server0 = cpu_seconds(proc.pid)
            if sending and now >= t_stop:
                sending = False
                wall1 = now
                cpu_client1 = time.process_time()
                cpu_server1 = cpu_seconds(proc.pid)
            done = 0
            for line in lines:
                if isinstance(line, core.FrameTooLarge):
                    raise BenchError(f"oversized line from the server ({line.size} bytes)")
                try:
                    rid, is_error, _code = scan(line)
                except core.JsonRpcError:
                    notifications += 1  # a notification (or request) from the server: not a reply
                    continue
                if type(rid) is not int or not 0 < rid < next_id or sent_at[rid] < 0:
                    unexpected += 1
                    raise BenchError(f"reply for an id that is not outstanding: {rid!r}")
                if is_error or is_error_marker in line:
                    errors += 1
                if measuring and sending:
                    latencies.append(now - sent_at[rid])
                    calls += 1
                sent_at[rid] = -1.0
                done += 1
            outstanding -= done
            if sending and done:
                first = next_id
                next_id += done
                sent_at.extend([now] * done)
                write(wfd, b"".join([template % i for i in range(first, next_id)]))
                outstanding += done
        # ---- shutdown
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    finally:
        progress[1] = True
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        errlog.close()
    window = wall1 - wall0
    latencies.sort()
    server_cpu = cpu_server1 - cpu_server0
    client_cpu = cpu_client1 - cpu_client0
    return {
        "calls": calls,
        "window_s": round(window, 4),
        "calls_per_s": calls / window if window > 0 else 0.0,
        "p50_ms": _percentile(latencies, 50) * 1e3,
        "p90_ms": _percentile(latencies, 90) * 1e3,
        "p99_ms": _percentile(latencies, 99) * 1e3,
        "max_ms": (latencies[-1] * 1e3) if latencies else float("nan"),
        "errors": errors,
        "replies_per_read": round(calls / reads_measured, 2) if (reads_measured := reads) else 0.0,
        "unexpected_ids": unexpected,
        "notifications": notifications,
        "server_cpu_s": round(server_cpu, 3),
        "client_cpu_s": round(client_cpu, 3),
        "server_cpu_util": server_cpu / window if window > 0 else 0.0,
        "server_us_per_call": server_cpu / calls * 1e6 if calls else float("nan"),
        "client_us_per_call": client_cpu / calls * 1e6 if calls else float("nan"),
    }


def _stderr_tail(errlog: Any) -> str:
    try:
        errlog.seek(0)
        return errlog.read()[-2000:].decode(errors="replace")
    except Exception:
        return ""


# ---------------------------------------------------------------------- report


def machine(info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Where the numbers were taken (``info``: what ``machine_info`` said, else asked now), with the SDK's version."""
    info = info if info is not None else machine_info(("mcp",))
    return {**info, "implementation": info["python_implementation"], "mcp_sdk": info["mcp_version"] or "?"}


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians per server and the per-round ratio mcpfast / SDK."""
    out: dict[str, Any] = {}
    for name, items in runs.items():
        if not items:
            continue
        out[name] = {
            key: statistics.median(r[key] for r in items)
            for key in ("calls_per_s", "p50_ms", "p99_ms", "server_us_per_call", "client_us_per_call", "server_cpu_util")
        }
        out[name]["calls_per_s_all"] = [round(r["calls_per_s"]) for r in items]
    fast, sdk = runs.get("mcpfast", []), runs.get("python-sdk", [])
    ratios = [a["calls_per_s"] / b["calls_per_s"] for a, b in zip(fast, sdk, strict=False) if b["calls_per_s"] > 0]
    if ratios:
        out["ratio_mcpfast_over_sdk"] = statistics.median(ratios)
        out["ratios_per_round"] = [round(r, 1) for r in ratios]
    # Server CPU per call is far less sensitive to other load on a shared machine than calls/s
    # (a closed loop waits on both processes' wake-ups): 1e6 / µs-per-call is what one fully
    # busy core would serve.
    base = runs.get("mcpfast-baseline", [])
    before = [a["calls_per_s"] / b["calls_per_s"] for a, b in zip(fast, base, strict=False) if b["calls_per_s"] > 0]
    if before:  # this tree against the older one (--baseline-src), paired per round
        out["ratio_mcpfast_over_baseline"] = statistics.median(before)
        out["ratios_over_baseline_per_round"] = [round(r, 3) for r in before]
        cpu_before = [
            b["server_us_per_call"] / a["server_us_per_call"] for a, b in zip(fast, base, strict=False) if a["server_us_per_call"] > 0
        ]
        out["cpu_ratio_baseline_over_mcpfast"] = statistics.median(cpu_before)
    cpu = [b["server_us_per_call"] / a["server_us_per_call"] for a, b in zip(fast, sdk, strict=False) if a["server_us_per_call"] > 0]
    if cpu:
        out["cpu_ratio_sdk_over_mcpfast"] = statistics.median(cpu)
    for name in _ORDER:
        if name in out and out[name]["server_us_per_call"] > 0:
            out[name]["one_core_capacity_calls_per_s"] = 1e6 / out[name]["server_us_per_call"]
            out[name]["best_calls_per_s"] = max(r["calls_per_s"] for r in runs[name])
    return out


def write_report(out_dir: Path, data: dict[str, Any]) -> None:
    s, mach = data["summary"], data["machine"]
    ratio = s.get("ratio_mcpfast_over_sdk")
    lines = [
        "# stdio benchmark: mcpfast vs the official Python SDK (low-level server)",
        "",
        f"Closed loop, {data['config']['inflight']} `tools/call echo` requests in flight, "
        f"{data['config']['warmup']} s warm-up + {data['config']['duration']} s measured, "
        f"{data['config']['rounds']} alternating rounds (medians shown). Server pinned to CPU "
        f"{data['config']['server_cpu']}, client to CPU {data['config']['client_cpu']}.",
        "",
        "| server | calls/s (median) | best round | p50 ms | p99 ms | server CPU µs/call | one-core capacity (1e6/µs) | client CPU µs/call | ratio vs SDK |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in _ORDER:
        if name not in s:
            continue
        row = s[name]
        sdk = s.get("python-sdk", {}).get("calls_per_s")
        if name == "mcpfast" and ratio:
            r = f"{ratio:.1f}x"
        elif name == "python-sdk":
            r = "1.0x"
        else:
            r = f"{row['calls_per_s'] / sdk:.1f}x" if sdk else ""
        lines.append(
            f"| {name} | {row['calls_per_s']:,.0f} | {row['best_calls_per_s']:,.0f} | {row['p50_ms']:.3f} | {row['p99_ms']:.3f} | "
            f"{row['server_us_per_call']:.1f} | {row['one_core_capacity_calls_per_s']:,.0f} | {row['client_us_per_call']:.1f} | {r} |"
        )
    lines += [
        "",
        "Per round (calls/s): " + "; ".join(f"{n}: {s[n]['calls_per_s_all']}" for n in _ORDER if n in s),
    ]
    if "ratios_per_round" in s:
        lines.append(f"Ratio per round (calls/s): {s['ratios_per_round']}")
    if "ratio_mcpfast_over_baseline" in s:
        lines.append(
            f"mcpfast / mcpfast-baseline (calls/s, median of per-round ratios): {s['ratio_mcpfast_over_baseline']:.3f} "
            f"(per round {s['ratios_over_baseline_per_round']}); server CPU per call, baseline / mcpfast: "
            f"{s['cpu_ratio_baseline_over_mcpfast']:.3f}."
        )
    if "cpu_ratio_sdk_over_mcpfast" in s:
        lines.append(
            f"Server CPU per call, SDK / mcpfast (median of rounds): {s['cpu_ratio_sdk_over_mcpfast']:.1f}x. "
            "calls/s of the closed loop also depends on how fast each process is woken up, which "
            "other load on this shared 2-CPU machine disturbs (see the server's CPU utilisation "
            "per run in results.json); CPU per call does not."
        )
    lines += [
        "",
        "Servers:",
        *(
            f"- `{n}`: {SERVERS[n]}{' (' + data['baseline_label'] + ')' if n == 'mcpfast-baseline' and data.get('baseline_label') else ''}: "
            f"`{'cd ' + str(data.get('baseline_src')) + ' && PYTHONPATH=. ' if n == 'mcpfast-baseline' else ''}"
            f"{shlex.join(data['commands'][n])}`"
            for n in data["commands"]
        ),
        "",
        f"Machine: {mach['nproc']} CPUs, {mach['cpu_model']}; {mach['implementation']} {mach['python']}; "
        f"mcpfast core {mach['mcpfast_core']}; mcp SDK {mach['mcp_sdk']} (the machine is shared, so absolute "
        "numbers are noisy; the ratio is paired per round).",
        "",
        head(data),
        "",
        "Client check: the client's CPU per call must stay well under the server's (it is one "
        "process doing pre-encoded writes and `core.scan_reply` on each reply); "
        + ("it did in every run." if not data.get("client_bound_runs") else f"runs flagged client-bound: {data['client_bound_runs']}."),
        "",
    ]
    write(out_dir, "results", data, "\n".join(lines))
    _plot(out_dir / "calls_per_s.png", data)


def _plot(path: Path, data: dict[str, Any]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    s = data["summary"]
    names = [n for n in _ORDER if n in s]
    panels = [
        ("calls_per_s", "calls/s, median of rounds", s.get("ratio_mcpfast_over_sdk")),
        ("best_calls_per_s", "calls/s, best round", None),
        ("one_core_capacity_calls_per_s", "1e6 / server CPU µs per call", s.get("cpu_ratio_sdk_over_mcpfast")),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 4.2))
    for ax, (key, label, ratio) in zip(axes, panels, strict=True):
        values = [s[n].get(key, 0.0) for n in names]
        colors = {"mcpfast": "#2a7ab0", "mcpfast-baseline": "#9ec5e0", "python-sdk": "#999999"}
        bars = ax.bar(names, values, color=[colors[n] for n in names])
        for bar, value in zip(bars, values, strict=True):
            ax.annotate(f"{value:,.0f}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom")
        ax.set_yscale("log")
        ax.set_ylim(top=max(values) * 3)
        ax.set_title(label + (f"\nmcpfast / SDK = {ratio:.1f}x" if ratio else ""))
    axes[0].set_ylabel("tools/call echo per second")
    fig.suptitle("stdio, 32 requests in flight, each server pinned to one CPU")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stdio_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=results_dir("stdio"))
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds first")
    parser.add_argument("--inflight", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (each runs every server)")
    parser.add_argument("--servers", default="mcpfast,python-sdk")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="also run `mcpfast serve` from this source tree (PYTHONPATH), e.g. an older commit unpacked "
        "with `git archive <rev> mcpfast | tar -x -C DIR` plus a copy of the compiled core",
    )
    parser.add_argument("--baseline-label", default="", help="what the baseline tree is (e.g. its commit), for the report")
    parser.add_argument("--server-cpu", type=int, default=1, help="CPU the server is pinned to (-1: no pinning)")
    parser.add_argument("--client-cpu", type=int, default=0, help="CPU the client is pinned to (-1: no pinning)")
    parser.add_argument("--sdk-server", action="store_true", help="run the SDK echo server on stdio and exit")
    args = parser.parse_args(argv)
    if args.sdk_server:
        sdk_server()
        return 0
    if args.client_cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.client_cpu})
    server_cpu = args.server_cpu if args.server_cpu >= 0 else None
    names = [n for n in args.servers.split(",") if n]
    envs: dict[str, dict[str, str]] = {n: child_env() for n in names}
    if args.baseline_src is not None:
        names.insert(1, "mcpfast-baseline")
        envs["mcpfast-baseline"] = {**os.environ, "PYTHONPATH": str(args.baseline_src.resolve())}
    commands = {n: server_command(n, server_cpu) for n in names}
    client_bound: list[str] = []
    record = Record("stdio_bench", argv, modules=("mcp",))

    def measure(name: str, rnd: int) -> dict[str, Any]:
        # `python -m` puts the working directory first on sys.path: the baseline runs from
        # inside its own tree so that it, not this checkout, is imported.
        cwd = args.baseline_src if name == "mcpfast-baseline" else None
        result = run_server(commands[name], duration=args.duration, warmup=args.warmup, inflight=args.inflight, env=envs[name], cwd=cwd)
        if result["errors"] or result["unexpected_ids"]:
            raise BenchError(f"{name}: {result['errors']} error replies, {result['unexpected_ids']} unexpected ids")
        if result["client_us_per_call"] > 0.5 * result["server_us_per_call"]:
            client_bound.append(f"{name}#{rnd}")
        print(
            f"round {rnd} {name:10s} {result['calls_per_s']:>10,.0f} calls/s  p50 {result['p50_ms']:.3f} ms  "
            f"p99 {result['p99_ms']:.3f} ms  server {result['server_us_per_call']:.1f} µs/call "
            f"(util {result['server_cpu_util']:.2f})  client {result['client_us_per_call']:.1f} µs/call",
            flush=True,
        )
        return result

    try:
        runs = alternate(names, args.rounds, measure).results
    except BenchError as exc:
        print(exc, file=sys.stderr)
        return 1
    data = record.finish(
        config={
            "duration": args.duration,
            "warmup": args.warmup,
            "inflight": args.inflight,
            "rounds": args.rounds,
            "server_cpu": args.server_cpu,
            "client_cpu": args.client_cpu,
            "echo_text": ECHO_TEXT,
            "protocol": PROTOCOL,
        },
        commands=commands,
        baseline_src=str(args.baseline_src) if args.baseline_src is not None else None,
        baseline_label=args.baseline_label,
        runs=runs,
        summary=summarise(runs),
        client_bound_runs=client_bound,
    )
    data["machine"] = machine(data["machine"])
    write_report(args.out, data)
    ratio = data["summary"].get("ratio_mcpfast_over_sdk")
    if ratio:
        print(f"median ratio mcpfast / SDK: {ratio:.1f}x -> {args.out}/results.md")
    before = data["summary"].get("ratio_mcpfast_over_baseline")
    if before:
        print(f"median ratio mcpfast / baseline: {before:.3f} -> {args.out}/results.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
