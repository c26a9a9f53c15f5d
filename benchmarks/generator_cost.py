"""Generator cost: what the MCP tools/call user costs the load generator, next to Locust's own
``FastHttpUser`` sending the same bytes.

``python -m benchmarks.generator_cost --out bench_results/swarm`` runs, against one tiny
HTTP/1.1 keep-alive server written here (``serve``: uvloop/asyncio, answers ``initialize``,
notifications (202), ``tools/call`` and ``DELETE`` with canned bytes, the request id spliced in):

* **A** ``McpHttpUser`` calling ``call_tool("echo", {"text": "hello"})`` on an initialised
  2025-11-25 session (JSON replies; everything the swarm does: ids, correlation, error checks,
  µs histograms, sampled schema checks, Locust's ``request`` event);
* **B** ``FastHttpUser`` POSTing the same request bytes (the id spliced in) with the same headers
  (``Content-Type``, ``Accept``, ``Mcp-Session-Id``, ``MCP-Protocol-Version``).

Each run is its own headless ``locust`` process with one worker process (no ``--processes``),
the same users (default 64: with 16 the generator idles between replies, ~60-85 % of its core on
the 2-core box; with 64 it sits at ~100 %), no wait time, the same duration; runs alternate A/B (B/A on odd
repeats: ``benchmarks.harness.alternate``).  With
two or more CPUs the generator is pinned to CPU 0 and the server to CPU 1 (``taskset``), so the
generator is the bottleneck; its CPU use is sampled from ``/proc/PID/stat`` during the run.
Rates are ``tools/call:echo`` requests over the run time; the ratio A/B is taken per pair
(same conditions) and summarised by its median.

Writes ``generator_cost.json``, ``generator_cost.md``, ``generator_cost.png`` and the two
locustfiles it ran into ``--out``/logs/ (generated from this module, so not kept in git).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import CLOCK_TICKS, Record, alternate, cpu_ticks, head, pinned, ratio, results_dir, write
from mcpfast.bench import procs

__all__ = ["main", "run_benchmark", "serve"]

PROTOCOL_VERSION = "2025-11-25"
STAT_NAME = "tools/call:echo"

# -- the server ---------------------------------------------------------------------------------

_INIT_RESULT = (
    b'{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},'
    b'"serverInfo":{"name":"generator-cost-server","version":"0.1"}}'
)
_ECHO_RESULT = b'{"content":[{"type":"text","text":"hello"}]}'
_EMPTY_RESULT = b"{}"
_SESSION_ID = b"generator-cost-session"


def _response(status: bytes, body: bytes = b"", extra: bytes = b"") -> bytes:
    ctype = b"content-type: application/json\r\n" if body else b""
    return b"HTTP/1.1 " + status + b"\r\n" + ctype + extra + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body


def _answer(method: bytes, body: bytes) -> bytes:
    if method == b"POST":
        i = body.find(b'"id":')
        if i < 0:  # a notification or a response
            return _response(b"202 Accepted")
        i += 5
        j = i
        while body[j : j + 1] not in (b",", b"}", b""):
            j += 1
        rid = body[i:j].strip()
        if b'"method":"tools/call"' in body:
            result = _ECHO_RESULT
        elif b'"method":"initialize"' in body:
            reply = b'{"jsonrpc":"2.0","id":' + rid + b',"result":' + _INIT_RESULT + b"}"
            return _response(b"200 OK", reply, b"mcp-session-id: " + _SESSION_ID + b"\r\n")
        else:
            result = _EMPTY_RESULT
        return _response(b"200 OK", b'{"jsonrpc":"2.0","id":' + rid + b',"result":' + result + b"}")
    if method == b"DELETE":
        return _response(b"200 OK")
    return _response(b"405 Method Not Allowed")


def serve(host: str = "127.0.0.1", port: int = 0, lifetime: float = 900.0) -> None:
    """Run the tiny MCP-shaped HTTP/1.1 server; prints ``PORT <n>`` once listening; exits after
    ``lifetime`` seconds at the latest."""
    import asyncio

    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        pass

    class Proto(asyncio.Protocol):
        __slots__ = ("buf", "transport")

        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            self.buf = b""

        def data_received(self, data: bytes) -> None:
            buf = self.buf + data if self.buf else data
            out = []
            while True:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = buf[:end]
                lower = head.lower()
                i = lower.find(b"\r\ncontent-length:")
                n = 0
                if i >= 0:
                    j = lower.find(b"\r\n", i + 2)
                    n = int(head[i + 17 : j if j >= 0 else len(head)])
                total = end + 4 + n
                if len(buf) < total:
                    break
                out.append(_answer(head[: head.find(b" ")], buf[end + 4 : total]))
                buf = buf[total:]
            self.buf = buf
            if out:
                self.transport.write(b"".join(out))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        srv = await loop.create_server(Proto, host, port, backlog=1024)
        print(f"PORT {srv.sockets[0].getsockname()[1]}", flush=True)
        try:
            await asyncio.wait_for(srv.serve_forever(), lifetime)
        except (TimeoutError, asyncio.CancelledError):
            pass

    asyncio.run(main())


# -- the two locustfiles ------------------------------------------------------------------------

MCP_LOCUSTFILE = '''"""A: the swarm's MCP user, tools/call echo in a closed loop (generator_cost.py)."""
import locust  # noqa: F401, I001 - first

from locust import task

from mcpfast.locust.users import McpHttpUser


class McpToolsCall(McpHttpUser):
    @task
    def call(self):
        if self.ready():
            self.mcp.call_tool("echo", {"text": "hello"})
'''

FASTHTTP_LOCUSTFILE = '''"""B: Locust's FastHttpUser POSTing the MCP user's bytes and headers (generator_cost.py)."""
from locust import FastHttpUser, task

VERSION = "2025-11-25"
INIT = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"mcpfast-swarm","version":"0.1"}}}')
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
HEAD = b'{"jsonrpc":"2.0","id":'
TAIL = b',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'
ACCEPT = "application/json, text/event-stream"


class FastHttpToolsCall(FastHttpUser):
    def on_start(self):
        base = {"Content-Type": "application/json", "Accept": ACCEPT}
        reply = self.client.post("", data=INIT, headers=base, name="initialize")
        self.headers = dict(base, **{"Mcp-Session-Id": reply.headers["mcp-session-id"],
                                     "MCP-Protocol-Version": VERSION})
        self.client.post("", data=INITIALIZED, headers=self.headers, name="notifications/initialized")
        self.next_id = 2

    @task
    def call(self):
        rid = self.next_id
        self.next_id = rid + 1
        self.client.post("", data=HEAD + str(rid).encode() + TAIL, headers=self.headers, name="tools/call:echo")
'''

# Appended to both locustfiles: no per-request cost; at test stop it writes the tools/call count,
# the wall time and the CPU time of this (the only) locust process since test start.
PROBE = """

import json as _json
import os as _os
import time as _time

from locust import events as _events

_MARK = {}


@_events.test_start.add_listener
def _generator_cost_start(environment, **_kw):
    _MARK["cpu"], _MARK["wall"] = _time.process_time(), _time.perf_counter()


@_events.test_stop.add_listener
def _generator_cost_stop(environment, **_kw):
    cpu, wall = _time.process_time() - _MARK["cpu"], _time.perf_counter() - _MARK["wall"]
    entries = [e for (name, _m), e in environment.stats.entries.items() if name == "tools/call:echo"]
    failures = sum(e.num_failures for e in environment.stats.entries.values())
    with open(_os.environ["GENERATOR_COST_OUT"], "w") as fh:
        _json.dump({"requests": sum(e.num_requests for e in entries), "failures": failures,
                    "wall_s": wall, "cpu_s": cpu}, fh)
"""

KINDS = {"mcp": ("McpHttpUser (mcpfast)", MCP_LOCUSTFILE + PROBE), "fasthttp": ("FastHttpUser (Locust)", FASTHTTP_LOCUSTFILE + PROBE)}


# -- measuring ------------------------------------------------------------------------------------


class CpuSampler:
    """Samples a process's CPU ticks every ``interval`` s in a thread: ``[(monotonic, ticks)]``."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ticks = cpu_ticks(self.pid)
            if ticks is None:
                return
            self.samples.append((time.monotonic(), ticks))
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def percent(self, start: float, end: float) -> float | None:
        """CPU % of one core between two monotonic times (nearest samples inside the window)."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] <= 0:
            return None
        return round(100.0 * (inside[-1][1] - inside[0][1]) / CLOCK_TICKS / (inside[-1][0] - inside[0][0]), 1)


def _pin(cpu: int | None) -> list[str]:
    return pinned([], cpu) if cpu is not None and shutil.which("taskset") is not None else []


def start_server(cpu: int | None, env: dict[str, str], lifetime: float = 900.0) -> tuple[subprocess.Popen, int]:
    cmd = [*_pin(cpu), sys.executable, "-m", "benchmarks.generator_cost", "serve", "--lifetime", f"{lifetime:g}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, int(line.split()[1])


def start_reference_server(cpu: int | None, env: dict[str, str], lifetime: float = 900.0) -> tuple[subprocess.Popen, int]:
    """``mcpfast serve --transport http`` (the reference server) on a free port, for comparison."""
    port = procs.free_port()
    cmd = [*_pin(cpu), "timeout", f"{lifetime:g}", *procs.reference_argv(sys.executable, "127.0.0.1", port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 30
    while not procs.port_open("127.0.0.1", port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("mcpfast serve --transport http did not start")
        time.sleep(0.1)
    return proc, port


def _leaf_pid(pid: int) -> int:
    """The process doing the work under wrappers (``timeout`` forks its command)."""
    for _ in range(4):
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return pid
        if not children:
            return pid
        pid = int(children[0])
    return pid


def locust_command(locustfile: Path, url: str, users: int, seconds: float, prefix: Path, cpu: int | None) -> list[str]:
    return [
        *_pin(cpu),
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(locustfile),
        "--headless",
        "-u",
        str(users),
        "-r",
        str(users),
        "-t",
        f"{seconds:g}s",
        "--host",
        url,
        "--csv",
        str(prefix),
        "--only-summary",
        "--stop-timeout",
        "1",
        "--exit-code-on-error",
        "0",
        "--loglevel",
        "WARNING",
    ]


def _read_stats(prefix: Path) -> dict[str, dict[str, str]]:
    with open(f"{prefix}_stats.csv", newline="") as fh:
        return {row["Name"]: row for row in csv.DictReader(fh)}


def run_one(
    kind: str,
    locustfile: Path,
    url: str,
    users: int,
    seconds: float,
    prefix: Path,
    cpu: int | None,
    env: dict[str, str],
    server_pid: int | None = None,
    profile: Path | None = None,
) -> dict[str, Any]:
    cmd = locust_command(locustfile, url, users, seconds, prefix, cpu)
    log = open(procs.log_path(prefix.parent, f"{prefix.name}.log"), "w")  # noqa: SIM115 - the child writes it until it is reaped
    probe = Path(f"{prefix}_probe.json")
    probe.unlink(missing_ok=True)
    env = dict(env, GENERATOR_COST_OUT=str(probe))
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(prefix.parent))
    sampler = CpuSampler(proc.pid)
    server_sampler = CpuSampler(server_pid) if server_pid else None
    spy = None
    if profile is not None and shutil.which("py-spy"):
        time.sleep(min(2.0, seconds / 4))
        spy = subprocess.Popen(
            [
                "py-spy",
                "record",
                "--pid",
                str(proc.pid),
                "--duration",
                str(max(int(seconds / 2), 1)),
                "--rate",
                "200",
                "--format",
                "raw",
                "-o",
                str(profile),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    try:
        proc.wait(timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    finally:
        sampler.stop()
        if server_sampler is not None:
            server_sampler.stop()
        log.close()
        if spy is not None:
            spy.wait(timeout=seconds + 30)
    if not probe.exists():
        tail = procs.log_path(prefix.parent, f"{prefix.name}.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"locust run {kind} exited {proc.returncode} without its probe; log tail:\n{tail}")
    measured = json.loads(probe.read_text())
    # the server's CPU over the steady part: from 1 s after the test start to 0.5 s before its end
    end = sampler.samples[-1][0] if sampler.samples else time.monotonic()
    start = end - measured["wall_s"]
    stats = _read_stats(prefix)
    row = stats.get(STAT_NAME, {})
    wall = measured["wall_s"]
    return {
        "kind": kind,
        "returncode": proc.returncode,
        "requests": measured["requests"],
        "failures": measured["failures"],
        "seconds": round(wall, 3),
        "rps": round(measured["requests"] / wall, 1),
        "median_ms": float(row.get("Median Response Time", 0) or 0),
        "generator_cpu_percent": round(100.0 * measured["cpu_s"] / wall, 1),
        "requests_per_cpu_second": round(measured["requests"] / measured["cpu_s"], 1) if measured["cpu_s"] else None,
        "server_cpu_percent": server_sampler.percent(start + 1.0, end - 0.5) if server_sampler else None,
        "command": " ".join(cmd),
    }


MODULES = ("locust", "gevent", "geventhttpclient", "uvloop")


def run_benchmark(
    out: Path,
    users: int = 64,
    seconds: float = 10.0,
    repeats: int = 3,
    pin: bool = True,
    profile: bool = False,
    server_kind: str = "fast",
    record: Record | None = None,
) -> dict[str, Any]:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for kind, (_label, source) in KINDS.items():
        # Generated from the sources above, so kept with the logs (not in git): one copy, here.
        path = procs.log_path(out, f"generator_cost_{kind}_locustfile.py")
        path.write_text(source)
        files[kind] = path
    env = procs.child_env()
    pin = pin and procs.cpus_available() >= 2 and shutil.which("taskset") is not None
    gen_cpu, srv_cpu = (0, 1) if pin else (None, None)
    args = ["--out", _display(out), "--users", str(users), "--seconds", f"{seconds:g}", "--repeats", str(repeats)]
    args += ([] if pin else ["--no-pin"]) + (["--server", "reference"] if server_kind == "reference" else [])
    record = record or Record("generator_cost", args, modules=MODULES)
    info = {**record.machine, **{mod: record.machine[f"{mod}_version"] or "?" for mod in MODULES}}
    lifetime = repeats * 2 * (seconds + 75) + 60
    if server_kind == "reference":
        server, port = start_reference_server(srv_cpu, env, lifetime=lifetime)
    else:
        server, port = start_server(srv_cpu, env, lifetime=lifetime)
    url = f"http://127.0.0.1:{port}/mcp"
    runs: list[dict[str, Any]] = []
    runs_dir = out / "runs"
    runs_dir.mkdir(exist_ok=True)

    def measure(kind: str, rep: int) -> dict[str, Any]:
        prof = runs_dir / f"{kind}-{rep}.pyspy.txt" if profile else None
        result = run_one(kind, files[kind], url, users, seconds, runs_dir / f"{kind}-{rep}", gen_cpu, env, _leaf_pid(server.pid), prof)
        result["repeat"] = rep
        runs.append(result)
        print(
            f"[{rep}] {kind:8s} {result['rps']:9.1f} req/s  failures {result['failures']}  "
            f"generator CPU {result['generator_cpu_percent']}%  server CPU {result['server_cpu_percent']}%",
            flush=True,
        )
        return result

    try:
        done = alternate(("mcp", "fasthttp"), repeats, measure)
    finally:
        procs.stop_process(server)
    ratios: list[float | None] = []
    cpu_ratios: list[float | None] = []
    for a, b in zip(done.results["mcp"], done.results["fasthttp"], strict=True):
        rate, eff = ratio(a["rps"], b["rps"]), ratio(a["requests_per_cpu_second"], b["requests_per_cpu_second"])
        ratios.append(round(rate, 3) if rate is not None else None)
        cpu_ratios.append(round(eff, 3) if eff is not None else None)

    def agg(kind: str, key: str) -> float | None:
        values = [r[key] for r in runs if r["kind"] == kind and r[key] is not None]
        return round(statistics.median(values), 1) if values else None

    valid = [r for r in ratios if r is not None]
    valid_cpu = [r for r in cpu_ratios if r is not None]
    result = record.finish(
        benchmark="generator_cost",
        date_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        setup={
            "command": record.command,
            "users": users,
            "seconds": seconds,
            "repeats": repeats,
            "wait_time": "none (0)",
            "worker_processes": 1,
            "generator_cpu": gen_cpu,
            "server_cpu": srv_cpu,
            "server": "mcpfast serve --transport http (reference server)"
            if server_kind == "reference"
            else "benchmarks.generator_cost serve (uvloop asyncio HTTP/1.1 keep-alive, canned replies)",
            "protocol_version": PROTOCOL_VERSION,
            "stat": STAT_NAME,
            "server_command": " ".join(server.args) if isinstance(server.args, list) else str(server.args),
        },
        machine=info,
        runs=runs,
        ratios=ratios,
        cpu_ratios=cpu_ratios,
        summary={
            "mcp_rps_median": agg("mcp", "rps"),
            "fasthttp_rps_median": agg("fasthttp", "rps"),
            "ratio_median": round(statistics.median(valid), 3) if valid else None,
            "ratio_min": min(valid) if valid else None,
            "ratio_max": max(valid) if valid else None,
            "cpu_ratio_median": round(statistics.median(valid_cpu), 3) if valid_cpu else None,
            "mcp_requests_per_cpu_second_median": agg("mcp", "requests_per_cpu_second"),
            "fasthttp_requests_per_cpu_second_median": agg("fasthttp", "requests_per_cpu_second"),
            "mcp_generator_cpu_median": agg("mcp", "generator_cpu_percent"),
            "fasthttp_generator_cpu_median": agg("fasthttp", "generator_cpu_percent"),
            "mcp_server_cpu_median": agg("mcp", "server_cpu_percent"),
            "fasthttp_server_cpu_median": agg("fasthttp", "server_cpu_percent"),
            "failures": sum(r["failures"] for r in runs),
            "target_ratio": 0.8,
        },
    )
    result["summary"]["meets_target"] = bool(valid) and statistics.median(valid) >= 0.8
    write(out, "generator_cost", result, render_markdown(result))
    try:
        plot(result, out / "generator_cost.png")
    except ImportError:  # matplotlib is a test extra
        pass
    return result


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def render_markdown(result: dict[str, Any]) -> str:
    s, setup, m = result["summary"], result["setup"], result["machine"]
    lines = [
        "# Generator cost: MCP tools/call user vs Locust FastHttpUser",
        "",
        head(result),
        "",
        "One locust process "
        f"(no `--processes`), {setup['users']} users, no wait time, {setup['seconds']:g} s per run, "
        f"{setup['repeats']} pairs alternating A/B. Generator pinned to CPU {setup['generator_cpu']}, "
        f"server to CPU {setup['server_cpu']}. Server: {setup['server']}.",
        "",
        f"**Ratio MCP/FastHttp (median of pairs): {s['ratio_median']}** "
        f"(min {s['ratio_min']}, max {s['ratio_max']}; target >= {s['target_ratio']}: "
        f"{'met' if s['meets_target'] else 'NOT met'}). Failures: {s['failures']}.",
        "",
        f"Requests per CPU-second of the generator (robust to a shared core), ratio MCP/FastHttp "
        f"(median of pairs): **{s['cpu_ratio_median']}**.",
        "",
        "| | req/s (median) | req per generator CPU-s | generator CPU % | server CPU % |",
        "|---|---:|---:|---:|---:|",
        f'| A: McpHttpUser `call_tool("echo")` | {s["mcp_rps_median"]} | {s["mcp_requests_per_cpu_second_median"]} | '
        f"{s['mcp_generator_cpu_median']} | {s['mcp_server_cpu_median']} |",
        f"| B: FastHttpUser, same bytes + headers | {s['fasthttp_rps_median']} | "
        f"{s['fasthttp_requests_per_cpu_second_median']} | "
        f"{s['fasthttp_generator_cpu_median']} | {s['fasthttp_server_cpu_median']} |",
        "",
        "## Runs",
        "",
        "| pair | kind | req/s | req per CPU-s | failures | median ms | generator CPU % | server CPU % |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['repeat']} | {r['kind']} | {r['rps']} | {r['requests_per_cpu_second']} | {r['failures']} | "
            f"{r['median_ms']} | {r['generator_cpu_percent']} | {r['server_cpu_percent']} |"
        )
    lines += [
        "",
        f"Rate ratios per pair: {result['ratios']}; per-CPU-second ratios per pair: {result['cpu_ratios']}.",
        "",
        "Rates: `tools/call:echo` requests counted by Locust over the wall time from `test_start` to "
        "`test_stop`, written by a probe appended to both locustfiles (no per-request cost). Generator "
        "CPU %: the locust process's own CPU time (`time.process_time()`) over the same wall time, of "
        "one core. Server CPU %: sampled from `/proc/PID/stat` during the run. A generator near 100 % "
        "with the server well below means the generator is the bottleneck, which is what this measures; "
        "a generator well below 100 % means its core was shared (other jobs on the machine: see "
        "`loadavg_at_start`), which slows both kinds alike, hence the ratios per adjacent pair.",
        "",
        "## Commands",
        "",
        "```sh",
        setup.get("command", "python -m benchmarks.generator_cost --out bench_results/swarm"),
        f"{setup['server_command']}" + ("   # prints PORT <n>" if "generator_cost" in setup["server_command"] else ""),
    ]
    seen = set()
    for r in result["runs"]:
        cmd = r["command"].replace(str(Path.cwd()) + "/", "")
        if r["kind"] not in seen:
            seen.add(r["kind"])
            lines.append(cmd)
    lines += [
        "```",
        "",
        "## Machine",
        "",
        "```",
        json.dumps(m, indent=2),
        "```",
        "",
    ]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    reps = sorted({r["repeat"] for r in result["runs"]})
    width = 0.38
    for offset, kind, color in ((-width / 2, "fasthttp", "#888888"), (width / 2, "mcp", "#2b6cb0")):
        values = [next((r["rps"] for r in result["runs"] if r["repeat"] == rep and r["kind"] == kind), 0) for rep in reps]
        ax.bar([rep + offset for rep in reps], values, width, label=KINDS[kind][0], color=color)
    ax.set_xticks(reps, [f"pair {rep}\nratio {ratio}" for rep, ratio in zip(reps, result["ratios"], strict=False)])
    ax.set_ylabel("tools/call req/s (1 worker process)")
    ax.set_title(f"Generator cost, {result['setup']['users']} users, median ratio {result['summary']['ratio_median']}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.generator_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", default="run", choices=("run", "serve"))
    parser.add_argument("--out", default=str(results_dir("swarm")))
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-pin", action="store_true", help="do not pin generator/server to CPUs 0/1")
    parser.add_argument(
        "--server",
        choices=("fast", "reference"),
        default="fast",
        help="fast: the tiny server here (default); reference: mcpfast serve --transport http",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy record each run (raw stacks in OUT/runs)")
    parser.add_argument("--port", type=int, default=0, help="serve: port (default: any free one)")
    parser.add_argument("--lifetime", type=float, default=900.0, help="serve: exit after this many seconds")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(port=args.port, lifetime=args.lifetime)
        return 0
    record = Record("generator_cost", argv, modules=MODULES)
    result = run_benchmark(Path(args.out), args.users, args.seconds, args.repeats, not args.no_pin, args.profile, args.server, record)
    s = result["summary"]
    print(
        f"MCP {s['mcp_rps_median']} req/s, FastHttpUser {s['fasthttp_rps_median']} req/s, "
        f"ratio {s['ratio_median']} (target 0.8), failures {s['failures']}"
    )
    return 0 if s["failures"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
