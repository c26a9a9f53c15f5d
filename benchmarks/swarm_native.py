"""The swarm on the native engine against wrk, and its truth checks (``bench_results/swarm/native``).

    flock /tmp/mcpfast-bench.lock python -m benchmarks.swarm_native --out bench_results/swarm/native

Server (``mcpfast serve --transport http``) pinned to core 0, the generator (wrk or one Locust
process) to core 1, everything on 127.0.0.1.  Measured in the same run, interleaved round by round,
the order reversed every other round (the median round is reported, every round kept):

* ``tools_call``: Locust ``loadtests/tools_call.py`` with ``--mcp-engine native``, 32 users, against
  ``wrk -t1 -c32`` with ``benchmarks/lua/echo.lua`` (tools/call echo on one session);
* ``handshake``: ``loadtests/handshake.py`` (native) against wrk with ``handshake.lua`` (full
  lifecycles, initialize / initialized / tools/call / DELETE, one connection per wrk thread);
  both rates count every request of a lifecycle;
* Locust's own Python thread CPU during the tools_call runs (``time.thread_time`` of the hub);
* truth: the demo ``stream`` tool with one 2 ms step read by 8 users, closed model, on both engines
  (p50 should be 2.0-2.6 ms, and the engines within 10 % of each other at this rate both carry);
  an open-model run at 1,000 calls/s with the server SIGSTOPped for 1 s (p99 must show the stall,
  >= 500 ms).

Rates are the µs histograms' counts over the Locust test's duration (ramp included, so a floor);
wrk's are its ``Requests/sec``.  Writes ``results.json`` and ``results.md``; logs are not kept.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    GENERATOR_CPU,
    ROOT,
    SERVER_CPU,
    Record,
    alternate,
    arguments,
    head,
    medians,
    pinned,
    ratio,
    write,
)
from mcpfast.bench.procs import ServerProcess, child_env, free_port

LOADTESTS = ROOT / "loadtests"
LUA = Path(__file__).with_name("lua")
ECHO_LUA = LUA / "echo.lua"
HANDSHAKE_LUA = LUA / "handshake.lua"
TOOL_LUA = LUA / "tool_call.lua"
MOCK = ROOT / "target" / "release" / "examples" / "mock_server"


def reference_server(python: str) -> ServerProcess:
    """``mcpfast serve --transport http`` on the server core, started."""
    port = free_port()
    argv = [python, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    return ServerProcess("mcpfast serve", pinned(argv, SERVER_CPU), "127.0.0.1", port).start()


def mock_server(delay_us: int) -> ServerProcess:
    """The in-repo minimal Rust responder (``rust/mcpfast-engine/examples/mock_server.rs``) on the server
    core, started: every tools/call answered ``delay_us`` late, slept on a timerfd (µs resolution), so a
    "2 ms tool" takes 2 ms and the rest of the latency is what the client and the loopback add."""
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "mcpfast-engine", "--example", "mock_server"], cwd=ROOT, check=True)
    port = free_port()
    argv = pinned([str(MOCK), "--port", str(port), "--delay-us", str(delay_us)], SERVER_CPU)
    return ServerProcess("mock_server", argv, "127.0.0.1", port).start()


def open_session(url: str) -> str:
    """initialize + notifications/initialized on ``url``: the session id (for wrk's scripts)."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
        }
    )
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    req = urllib.request.Request(url, body.encode(), headers)
    with urllib.request.urlopen(req, timeout=5) as resp:  # 127.0.0.1
        sid = str(resp.headers["mcp-session-id"])
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    req = urllib.request.Request(url, note, {**headers, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    urllib.request.urlopen(req, timeout=5).close()
    return sid


_UNIT_US = {"us": 1.0, "ms": 1e3, "s": 1e6}


def wrk_stats(url: str, script: Path, seconds: int, connections: int, threads: int, env: dict[str, str] | None = None) -> dict[str, float]:
    """wrk's ``Requests/sec`` and (``--latency``) its latency percentiles in µs, wrk on the generator core."""
    cmd = pinned(["wrk", "--latency", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "-s", str(script), url], GENERATOR_CPU)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30, env={**os.environ, **(env or {})})
    m = re.search(r"Requests/sec:\s+([0-9.]+)", out.stdout)
    if not m:
        raise RuntimeError(f"wrk printed no rate: {out.stdout[-500:]} {out.stderr[-500:]}")
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out.stdout)
    if errors:
        raise RuntimeError(f"wrk got {errors.group(1)} error responses")
    stats = {"rps": float(m.group(1))}
    for q, value, unit in re.findall(r"^\s+(50|75|90|99)%\s+([0-9.]+)(us|ms|s)\s*$", out.stdout, re.M):
        stats[f"p{q}_us"] = float(value) * _UNIT_US[unit]
    return stats


def locust_argv(python: str, family: str, users: int, seconds: int, engine: str, prefix: Path, *extra: str) -> list[str]:
    """One headless Locust process on the generator core: ``loadtests/<family>.py``, all users at once."""
    return pinned(
        [
            *(python, "-m", "locust", "-f", str(LOADTESTS / f"{family}.py"), "--headless"),
            *("-u", str(users), "-r", str(users), "-t", f"{seconds}s", "--only-summary", "--exit-code-on-error", "0"),
            *("--csv", str(prefix), "--mcp-engine", engine, *extra),
        ],
        GENERATOR_CPU,
    )


def locust(python: str, family: str, url: str, users: int, seconds: int, engine: str, *extra: str, during: Any = None) -> dict[str, Any]:
    """One Locust run against ``url``: its rows (µs histograms' summaries), failures and rate."""
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "r"
        cmd = locust_argv(python, family, users, seconds, engine, prefix, "--host", url, *extra)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(), cwd=tmp)
        if during is not None:
            threading.Thread(target=during, daemon=True).start()
        output, _ = proc.communicate(timeout=seconds + 60)
        if proc.returncode != 0:
            raise RuntimeError(f"locust exited {proc.returncode}: {output[-2000:]}")
        hist = json.loads(Path(f"{prefix}_histograms.json").read_text())
    rows = {h["name"]: h["summary"] for h in hist["histograms"]}
    failed = sum(h["n"] for h in hist["failed_histograms"])
    total = sum(s["count"] for s in rows.values())
    duration = hist["duration_s"]
    return {
        "rows": rows,
        "failures": failed,
        "requests": total,
        "duration_s": duration,
        "rps": total / duration,
        "generator": hist["generator"],
        "pacer": hist["pacer"],
    }


SLEEP_TOOL, SLEEP_ARGS = "stream", '{"n": 1, "delay": 0.002}'  # the demo server's tool: one asyncio.sleep(0.002)


AGREE_RATE = 400  # calls/s: the open-model rate at which both engines' p50 are compared (the Python users carry it)


def sleep_2ms(
    python: str, url: str, seconds: int, tool: str, args: str, engines: tuple[str, ...], rounds: int = 1, agree: bool = False
) -> dict[str, Any]:
    """A tool that sleeps 2 ms, 8 users (closed model) per engine and wrk's 8 connections, one session
    each (the independent client, ``wrk -t8 -c8``), interleaved ``rounds`` times (the order turns each round): each client's
    median p50, and the medians of the per-round ratios (to wrk's, and native over python)."""
    sids = ",".join(open_session(url) for _ in range(8))  # one session per wrk connection, as the users have
    clients: tuple[str, ...] = ("wrk", *engines)
    if agree:  # both engines at a rate both carry (open model)
        clients += tuple(f"{e}@{AGREE_RATE}" for e in engines)

    def measure(client: str, _rnd: int) -> dict[str, Any]:
        if client == "wrk":
            return wrk_stats(url, TOOL_LUA, seconds, 8, 8, {"SIDS": sids, "TOOL": tool, "ARGS": args})
        engine, _, rate = client.partition("@")
        extra = ("--mcp-rate", rate) if rate else ()
        run = locust(python, "tools_call", url, 8, seconds, engine, "--mcp-tool", tool, "--mcp-tool-args", args, *extra)
        return {"p50_us": run["rows"][f"tools/call:{tool}"]["p50"], "rps": run["rps"], "failures": run["failures"]}

    def p50_ratios(r: dict[str, Any]) -> dict[str, float | None]:
        out = {f"p50_ratio_{e}_over_wrk": ratio(r[e]["p50_us"], r["wrk"]["p50_us"]) for e in engines}
        if "python" in engines:
            out["p50_ratio_native_over_python"] = ratio(r["native"]["p50_us"], r["python"]["p50_us"])
        if agree:
            out["p50_ratio_native_over_python_open"] = ratio(r[f"native@{AGREE_RATE}"]["p50_us"], r[f"python@{AGREE_RATE}"]["p50_us"])
        return out

    done = alternate(clients, rounds, measure, rotate=True, after_round=lambda _i, r: print(json.dumps(r), flush=True))
    rs: list[dict[str, Any]] = [{"loadavg": done.loadavg[i], **done.round(i)} for i in range(rounds)]
    for r in rs:
        r.update(p50_ratios(r))
    out: dict[str, Any] = {"tool": tool, "arguments": args, "url": url, "rounds": rs}
    for client in clients:
        out[client] = medians(done.results[client])
    out.update(medians(rs, [k for k in rs[0] if k.startswith("p50_ratio")]))
    return out


CLIENTS = ("wrk_tools_call", "native_tools_call", "wrk_handshake", "native_handshake")


def _round(py: str, server: ServerProcess, sid: str, secs: int, client: str) -> dict[str, Any]:
    """One client of a main round: wrk or Locust (native), tools/call echo or full lifecycles, 32 connections/users."""
    if client == "wrk_tools_call":
        return {"rps": wrk_stats(server.url, ECHO_LUA, secs, 32, 1, {"SID": sid})["rps"]}
    if client == "wrk_handshake":
        return {"rps": wrk_stats(server.url, HANDSHAKE_LUA, secs, 32, 32)["rps"]}
    family = "tools_call" if client == "native_tools_call" else "handshake"
    run = locust(py, family, server.url, 32, secs, "native")
    r: dict[str, Any] = {"rps": run["rps"], "failures": run["failures"]}
    if family == "tools_call":
        r.update(
            p50_us=run["rows"]["tools/call:echo"]["p50"],
            generator=run["generator"],
            python_thread_share=run["generator"]["python_thread_cpu_s"] / run["duration_s"],
        )
    return r


def main(argv: list[str] | None = None) -> int:
    ap = arguments("swarm_native", __doc__, "swarm/native", seconds=10, rounds=3)
    ap.add_argument(
        "--only-2ms", action="store_true", help="only the 2 ms truth check (--rounds interleaved rounds), into sleep_2ms.{json,md}"
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    py, secs = args.python, args.seconds
    record = Record("swarm_native", argv, lock=True)
    if args.only_2ms:
        return only_2ms(py, secs, args.rounds, out, record)
    server = reference_server(py)
    try:
        sid = open_session(server.url)
        done = alternate(CLIENTS, args.rounds, lambda client, _rnd: _round(py, server, sid, secs, client))
        rounds = []
        for i in range(args.rounds):
            by = done.round(i)
            r: dict[str, Any] = {"round": i, "loadavg": done.loadavg[i], "order": done.orders[i]}
            r.update({f"{c}_rps": by[c]["rps"] for c in CLIENTS})
            r.update(
                native_tools_call_failures=by["native_tools_call"]["failures"], native_handshake_failures=by["native_handshake"]["failures"]
            )
            r.update(native_tools_call_p50_us=by["native_tools_call"]["p50_us"], generator=by["native_tools_call"]["generator"])
            r["python_thread_share"] = by["native_tools_call"]["python_thread_share"]
            r["tools_call_ratio"] = ratio(r["native_tools_call_rps"], r["wrk_tools_call_rps"])
            r["handshake_ratio"] = ratio(r["native_handshake_rps"], r["wrk_handshake_rps"])
            rounds.append(r)
            print(json.dumps(r), flush=True)
        truth: dict[str, Any] = {"loadavg": done.loadavg[-1]}
        truth["sleep_2ms_reference"] = sleep_2ms(py, server.url, secs, SLEEP_TOOL, SLEEP_ARGS, engines=("native",))
        with mock_server(2000) as mock:
            truth["sleep_2ms"] = sleep_2ms(py, mock.url, secs, "echo", '{"text": "hello"}', engines=("native", "python"))

        def stall() -> None:
            assert server.proc is not None
            time.sleep(4.0)
            server.proc.send_signal(signal.SIGSTOP)  # the coreutils-free server: its own pid
            time.sleep(1.0)
            server.proc.send_signal(signal.SIGCONT)

        stalled = locust(py, "tools_call", server.url, 64, secs, "native", "--mcp-rate", "1000", during=stall)
        s = stalled["rows"]["tools/call:echo"]
        truth["stall_open_model"] = {
            "p50_us": s["p50"],
            "p99_us": s["p99"],
            "max_us": s["max"],
            "count": s["count"],
            "failures": stalled["failures"],
            "sent": stalled["pacer"]["sent"],
            "late": stalled["pacer"]["late"],
        }
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.proc.send_signal(signal.SIGCONT)  # a stopped server would not hear the terminate
        server.stop()
    median_keys = [f"{c}_rps" for c in CLIENTS] + ["tools_call_ratio", "handshake_ratio", "python_thread_share"]
    results = record.finish(rounds=rounds, truth=truth, median=medians(rounds, median_keys))
    write(out, "results", results, render(results))
    print(render(results))
    return 0


def only_2ms(py: str, secs: int, rounds: int, out: Path, record: Record) -> int:
    with mock_server(2000) as mock:
        ag = sleep_2ms(py, mock.url, secs, "echo", '{"text": "hello"}', ("native", "python"), rounds, agree=True)
    server = reference_server(py)
    try:
        ref = sleep_2ms(py, server.url, secs, SLEEP_TOOL, SLEEP_ARGS, ("native",), rounds)
    finally:
        server.stop()
    res = record.finish(sleep_2ms=ag, sleep_2ms_reference=ref)
    text = "\n".join(
        [
            "# Truth: a tool that sleeps 2 ms, read by the swarm and by an independent client",
            "",
            head(res),
            f"Server on core {SERVER_CPU}, generator on core {GENERATOR_CPU}; {rounds} interleaved rounds per server "
            "(wrk, then each engine, the order turned each round), every round in `sleep_2ms.json`; medians shown.",
            "",
            *_sleep_lines(res["sleep_2ms"], res["sleep_2ms_reference"]),
            "",
            _sleep_rounds(res["sleep_2ms"]),
            "",
        ]
    )
    write(out, "sleep_2ms", res, text)
    print(text)
    return 0


def _sleep_rounds(ag: dict[str, Any]) -> str:
    n, p = f"native@{AGREE_RATE}", f"python@{AGREE_RATE}"
    rows = [
        f"| round | load avg | wrk p50 ms | native p50 ms | python p50 ms | native / wrk | native / python | {n} | {p} | ratio |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for i, r in enumerate(ag["rounds"]):
        rows.append(
            f"| {i + 1} | {r['loadavg'][0]:.2f} | {r['wrk']['p50_us'] / 1000:.3f} | {r['native']['p50_us'] / 1000:.3f} | "
            f"{r['python']['p50_us'] / 1000:.3f} | {r['p50_ratio_native_over_wrk']:.2f} | {r['p50_ratio_native_over_python']:.2f} | "
            f"{r[n]['p50_us'] / 1000:.3f} | {r[p]['p50_us'] / 1000:.3f} | {r['p50_ratio_native_over_python_open']:.2f} |"
        )
    return "Per round, the minimal Rust responder:\n\n" + "\n".join(rows)


def _sleep_lines(ag: dict[str, Any], ref: dict[str, Any]) -> list[str]:
    return [
        f"- 2 ms tool on the minimal Rust responder (`mock_server --delay-us 2000`: the reply leaves 2 ms after the "
        f"request, slept on a timerfd), 8 users, closed model: p50 native {ag['native']['p50_us'] / 1000:.3f} ms "
        f"(target 2.0-2.6 ms, {ag['native']['rps']:,.0f} calls/s), wrk (8 connections, a session each: the independent client) "
        f"{ag['wrk']['p50_us'] / 1000:.3f} ms: native / wrk {ag['p50_ratio_native_over_wrk']:.2f} (target within 10 %); "
        f"python {ag['python']['p50_us'] / 1000:.3f} ms ({ag['python']['rps']:,.0f} calls/s): native / python "
        f"{ag['p50_ratio_native_over_python']:.2f} (closed model: the Python users' own cost per request on the shared "
        f"generator core is in theirs); failures {ag['native']['failures']} / {ag['python']['failures']}.",
        *(
            [
                f"- both engines at {AGREE_RATE} calls/s (open model, 8 users, a rate the Python users carry) on the same "
                f"responder: p50 native {ag[f'native@{AGREE_RATE}']['p50_us'] / 1000:.3f} ms, python "
                f"{ag[f'python@{AGREE_RATE}']['p50_us'] / 1000:.3f} ms: native / python "
                f"{ag['p50_ratio_native_over_python_open']:.2f} (target within 10 %)."
            ]
            if f"native@{AGREE_RATE}" in ag
            else []
        ),
        f"- the same 2 ms on the reference server (demo `stream`, one `asyncio.sleep(0.002)`): p50 native "
        f"{ref['native']['p50_us'] / 1000:.3f} ms, wrk {ref['wrk']['p50_us'] / 1000:.3f} ms (ratio "
        f"{ref['p50_ratio_native_over_wrk']:.2f}"
        + (
            "): the server's own sleep overshoots (uvloop's timers tick in whole milliseconds, and the loop serves the "
            "other requests meanwhile), and both clients say so."
            if 0.9 <= ref["p50_ratio_native_over_wrk"] <= 1.1
            else "; the clients disagree by more than 10 %)."
        ),
    ]


def _spread(rounds: list[dict[str, Any]]) -> str:
    def rng(key: str) -> str:
        values = [r[key] for r in rounds]
        return f"{min(values):.2f}-{max(values):.2f}"

    wrk = [r["wrk_tools_call_rps"] for r in rounds]
    return (
        f"Per-round ratios: tools/call {rng('tools_call_ratio')}, lifecycles {rng('handshake_ratio')}; wrk's own "
        f"tools/call rate went from {min(wrk):,.0f} to {max(wrk):,.0f}/s between rounds, so on this shared "
        "machine a single round says little and the medians are the figure."
    )


def render(res: dict[str, Any]) -> str:
    m, t = res["median"], res.get("truth", {})
    lines = [
        "# Swarm on the native engine vs wrk, and truth checks",
        "",
        head(res),
        f"Server on core {SERVER_CPU}, generator on core {GENERATOR_CPU}; {len(res['rounds'])} interleaved rounds (the order "
        "reversed every other round), every round in `results.json`. Each column is its own median (the ratio is the median "
        "of the per-round ratios, each round's wrk and Locust runs back to back). " + _spread(res["rounds"]),
        "",
        "| measure | wrk | Locust + native engine | ratio | target |",
        "| --- | ---: | ---: | ---: | --- |",
        f"| tools/call echo, 32 connections/users (req/s) | {m['wrk_tools_call_rps']:,.0f} | "
        f"{m['native_tools_call_rps']:,.0f} | {m['tools_call_ratio']:.2f} | >= 0.9 |",
        f"| full lifecycles, 32 connections/users (req/s, 4 requests each) | {m['wrk_handshake_rps']:,.0f} | "
        f"{m['native_handshake_rps']:,.0f} | {m['handshake_ratio']:.2f} | >= 0.85 |",
        "",
        f"Locust's Python thread during the tools/call runs: {100 * m['python_thread_share']:.1f} % of a core (target < 20 %).",
        "",
    ]
    if t:
        st = t["stall_open_model"]
        ag, ref = t["sleep_2ms"], t["sleep_2ms_reference"]
        lines += [
            "Truth checks (load average " + str(t["loadavg"]) + "):",
            "",
            *_sleep_lines(ag, ref),
            f"- open model 1,000 calls/s, server SIGSTOPped for 1 s: p99 {st['p99_us'] / 1000:.1f} ms, max "
            f"{st['max_us'] / 1000:.1f} ms (target p99 >= 500 ms), {st['count']} calls, late {st['late']}, "
            f"{st['failures']} failures.",
            "",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
