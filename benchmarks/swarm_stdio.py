"""stdio at scale: one Locust process on the native engine against a raw pipelined client
(``bench_results/swarm/stdio``).

    flock /tmp/mcpfast-bench.lock python -m benchmarks.swarm_stdio --out bench_results/swarm/stdio

Both drive ``--children`` (8) ``mcpfast serve --transport stdio`` processes of the reference server,
each with ``--inflight`` (32) ``tools/call echo`` lines in flight, closed loop:

* **raw**: ``rust/mcpfast-engine/examples/stdio_raw.rs``, one thread that keeps the lines
  outstanding and counts the replies (framed by ``mcpfast-core``'s line framer, checked by its
  envelope scanner), nothing else: no statistics, no timeouts, no histograms.  It is the ceiling:
  the least a client can do per call on the same pipes;
* **Locust**: ``loadtests/tools_call.py --mcp-engine native --mcp-command "<server>"
  --mcp-stdio-inflight 32`` with ``-u 8``: one Locust user is one child process, each with 32
  requests in flight (the engine's ``inflight_per_process``), on one engine thread.

The servers run on core 0 (``taskset -c 0`` is part of the server command, so each child pins
itself), the generator on core 1.  Rounds alternate which client goes first.  Both rates are taken
in steady state: the raw client opens its window ``--warmup`` s after its last child answered
``initialize``; for Locust the window is read from the run's own ``_histograms.hlog`` (the per-second
intervals of ``tools/call:echo`` that start ``--warmup`` s after the interval in which the last
``initialize`` completed, the final, partial interval left out), so the figure is the swarm's own
output.  The ratio is computed per round, and the median of the rounds reported.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks import harness
from benchmarks.swarm_native import locust_argv
from mcpfast.bench.procs import child_env
from mcpfast.locust.hlog import read_log

RAW = harness.ROOT / "target" / "release" / "examples" / "stdio_raw"
STARTUP_ALLOWANCE_S = 12.0  # Locust's run is this much longer than warm-up + window: the children's start


def server_command(python: str) -> list[str]:
    return harness.pinned([python, "-m", "mcpfast", "serve", "--transport", "stdio"], harness.SERVER_CPU)


def build_raw() -> None:
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "-p", "mcpfast-engine", "--example", "stdio_raw"], cwd=harness.ROOT, check=True
    )


def _core_jiffies(core: str) -> tuple[int, int]:
    """(busy, total) jiffies of one core from ``/proc/stat``."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{core} "):
            f = [int(x) for x in line.split()[1:]]
            idle = f[3] + f[4]
            return sum(f[:8]) - idle, sum(f[:8])
    return 0, 0


class Sampler:
    """Every 0.2 s: the CPU seconds of the server processes under ``pid`` and the server core's jiffies,
    so the servers' CPU per call and how busy their core was can be read for any window of the run."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _servers_cpu(self) -> float:
        total = 0.0
        for pid in harness.process_tree(self.pid)[1:]:
            try:
                if b"serve" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                    continue
                total += harness.cpu_seconds(pid)
            except OSError:
                continue
        return total

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            busy, total = _core_jiffies(harness.SERVER_CPU)
            self.samples.append((time.time(), self._servers_cpu(), busy, total))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def window(self, t0: float, t1: float) -> dict[str, float]:
        """Server CPU seconds per second and the server core's busy share between the samples inside [t0, t1]."""
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if len(inside) < 2:
            return {"server_cpu_share": float("nan"), "server_core_busy": float("nan")}
        (a, ca, ba, ta), (b, cb, bb, tb) = inside[0], inside[-1]
        return {"server_cpu_share": (cb - ca) / (b - a), "server_core_busy": (bb - ba) / max(tb - ta, 1)}


def raw(python: str, children: int, inflight: int, seconds: float, warmup: float) -> dict[str, Any]:
    cmd = [str(RAW), "--children", str(children), "--inflight", str(inflight), "--seconds", str(seconds), "--warmup", str(warmup)]
    cmd = harness.pinned([*cmd, "--", *server_command(python)], harness.GENERATOR_CPU)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    sampler = Sampler(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=seconds + warmup + 90)
    finally:
        sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"stdio_raw exited {proc.returncode}: {stderr[-1000:]}")
    r: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    if r["errors"] or r["failed"] or r["ready"] != children:
        raise RuntimeError(f"stdio_raw run not clean: {r}")
    r.update(sampler.window(*r["window_epoch_s"]))
    r["server_cpu_us_per_call"] = 1e6 * r["server_cpu_share"] / r["calls_per_s"]
    return r


def steady_rate(hlog: Path, rtype: str, name: str, children: int, warmup: float) -> dict[str, Any]:
    """The rate of ``name`` in the steady part of a run's interval log (see the module doc)."""
    intervals = read_log(hlog.read_text().splitlines())
    init_tag, call_tag = f"{rtype}:initialize", f"{rtype}:{name}"
    ready_at = None
    inits = 0
    for tag, start, length, _max, h in sorted(intervals, key=lambda iv: iv[1]):
        if tag == init_tag:
            inits += h.total_count
            if inits >= children:
                ready_at = start + length
                break
    if ready_at is None:
        raise RuntimeError(f"only {inits} of {children} children answered initialize")
    calls = sorted((iv for iv in intervals if iv[0] == call_tag and iv[1] >= ready_at + warmup), key=lambda iv: iv[1])[:-1]
    if not calls:
        raise RuntimeError("no steady-state interval in the run (raise --seconds)")
    count = sum(iv[4].total_count for iv in calls)
    window = calls[-1][1] + calls[-1][2] - calls[0][1]
    return {
        "calls": count,
        "window_s": window,
        "window_epoch_s": [calls[0][1], calls[0][1] + window],
        "calls_per_s": count / window,
        "ready_after_s": ready_at - min(iv[1] for iv in intervals),
    }


def locust(python: str, children: int, inflight: int, seconds: float, warmup: float) -> dict[str, Any]:
    run_time = int(seconds + warmup + STARTUP_ALLOWANCE_S + 0.999)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "r"
        cmd = locust_argv(
            python,
            "tools_call",
            children,
            run_time,
            "native",
            prefix,
            *("--mcp-command", shlex.join(server_command(python)), "--mcp-stdio-inflight", str(inflight)),
        )
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(), cwd=tmp)
        sampler = Sampler(proc.pid)
        try:
            output, _ = proc.communicate(timeout=run_time + 60)
        finally:
            sampler.stop()
        if proc.returncode != 0:
            raise RuntimeError(f"locust exited {proc.returncode}: {output[-2000:]}")
        hist = json.loads(Path(f"{prefix}_histograms.json").read_text())
        steady = steady_rate(Path(f"{prefix}_histograms.hlog"), "mcp-stdio", "tools/call:echo", children, warmup)
    failed = sum(h["n"] for h in hist["failed_histograms"])
    total = sum(h["summary"]["count"] for h in hist["histograms"] if h["name"] == "tools/call:echo")
    gen = hist["generator"]
    servers = sampler.window(*steady["window_epoch_s"])
    return {
        **steady,
        **servers,
        "server_cpu_us_per_call": 1e6 * servers["server_cpu_share"] / steady["calls_per_s"],
        "run_time_s": run_time,
        "duration_s": hist["duration_s"],
        "calls_whole_run": total,
        "failures": failed,
        "engine_cpu_share": gen["engine_cpu_s"] / hist["duration_s"],
        "python_thread_cpu_share": gen["python_thread_cpu_s"] / hist["duration_s"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = harness.arguments("swarm_stdio", __doc__, "swarm/stdio", seconds=10.0, rounds=5)
    ap.add_argument("--children", type=int, default=8)
    ap.add_argument("--inflight", type=int, default=32)
    ap.add_argument("--warmup", type=float, default=1.0, help="s after the last child is ready before the window opens")
    args = ap.parse_args(argv)
    out = Path(args.out)
    build_raw()
    record = harness.Record("swarm_stdio", argv, modules=("locust", "gevent"), lock=True)

    def run(which: str, _rnd: int) -> dict[str, Any]:
        fn = raw if which == "raw" else locust
        return fn(args.python, args.children, args.inflight, args.seconds, args.warmup)

    def show(rnd: int, by: dict[str, dict[str, Any]]) -> None:
        print(json.dumps({"round": rnd, **by}), flush=True)

    done = harness.alternate(("raw", "locust"), args.rounds, run, after_round=show)
    rounds = []
    for i in range(args.rounds):
        by = done.round(i)
        order = "raw-first" if done.orders[i][0] == "raw" else "locust-first"
        rounds.append(
            {
                "round": i,
                "loadavg": done.loadavg[i],
                "order": order,
                **by,
                "ratio": harness.ratio(by["locust"]["calls_per_s"], by["raw"]["calls_per_s"]),
            }
        )
    raws, locusts = done.results["raw"], done.results["locust"]
    median = {
        **{
            f"raw_{k}": v
            for k, v in harness.medians(raws, ("calls_per_s", "cpu_share", "server_cpu_us_per_call", "server_cpu_share")).items()
        },
        **{f"locust_{k}": v for k, v in harness.medians(locusts, ("calls_per_s", "server_cpu_us_per_call", "server_cpu_share")).items()},
        **harness.medians(locusts, ("engine_cpu_share", "python_thread_cpu_share")),
        **harness.medians(rounds, ("ratio",)),
    }
    res = record.finish(
        server_command=shlex.join(server_command(args.python)),
        children=args.children,
        inflight=args.inflight,
        rounds=rounds,
        median=median,
    )
    harness.write(out, "results", res, render(res))
    print(render(res))
    return 0


def render(res: dict[str, Any]) -> str:
    m = res["median"]
    rows = [
        f"| {r['round'] + 1} | {r['order']} | {r['loadavg'][0]:.2f} | {r['raw']['calls_per_s']:,.0f} | "
        f"{100 * r['raw']['cpu_share']:.0f}% | {r['raw']['server_cpu_us_per_call']:.1f} | {r['locust']['calls_per_s']:,.0f} | "
        f"{r['locust']['window_s']:.1f} s | {100 * r['locust']['engine_cpu_share']:.0f}% | {r['locust']['server_cpu_us_per_call']:.1f} | "
        f"{100 * r['raw']['server_core_busy']:.0f}% / {100 * r['locust']['server_core_busy']:.0f}% | {r['locust']['failures']} | {r['ratio']:.2f} |"
        for r in res["rounds"]
    ]
    ratios = [r["ratio"] for r in res["rounds"]]
    return "\n".join(
        [
            "# stdio at scale: Locust + native engine vs a raw pipelined client",
            "",
            harness.head(res),
            "",
            f"{res['children']} server processes (`{res['server_command']}`: the reference server, pinned to core 0), "
            f"{res['inflight']} `tools/call echo` in flight on each, closed loop; the generator on core 1. "
            "The machine has 2 cores, shared with other jobs: the 8 servers share one core, so the rates are "
            "that core's, and the ratio of adjacent runs is the figure.",
            "",
            "| round | order | load avg | raw calls/s | raw CPU | servers' µs/call (raw) | Locust calls/s | Locust window | engine CPU "
            "| servers' µs/call (Locust) | server core busy (raw / Locust) | failures | ratio |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            f"**Median ratio Locust / raw: {m['ratio']:.2f}** (per round {min(ratios):.2f}-{max(ratios):.2f}; target >= 0.9). "
            f"Medians: raw {m['raw_calls_per_s']:,.0f} calls/s at {100 * m['raw_cpu_share']:.0f}% of its core, "
            f"Locust {m['locust_calls_per_s']:,.0f} calls/s, engine thread {100 * m['engine_cpu_share']:.0f}% and Locust's "
            f"Python thread {100 * m['python_thread_cpu_share']:.1f}% of a core (whole run). The servers' CPU per call "
            f"(their user + system time in the window over the calls): {m['raw_server_cpu_us_per_call']:.1f} µs under the raw "
            f"client, {m['locust_server_cpu_us_per_call']:.1f} µs under Locust; the servers had "
            f"{100 * m['raw_server_cpu_share']:.0f}% / {100 * m['locust_server_cpu_share']:.0f}% of their core.",
            "",
            "How each rate is taken: the raw client (`rust/mcpfast-engine/examples/stdio_raw.rs`) counts replies in its window, "
            "which opens after its last child answered `initialize` plus the warm-up; Locust's rate is the swarm's own output, "
            "the `tools/call:echo` intervals of its `_histograms.hlog` from the warm-up after the last `initialize` to the last "
            "full interval. Engine CPU and Python-thread CPU are shares of the whole Locust run (children's start included).",
            "",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
