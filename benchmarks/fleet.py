"""``python -m benchmarks.fleet``: a fleet of MCP agents from one Locust process against ``mcpfast
serve``: what an agent costs the generator and the server, whether the agents rest the think times
they are given, and what the fleet does to the latency of a background load (``bench_results/fleet``).

    flock /tmp/mcpfast-bench.lock python -m benchmarks.fleet --out bench_results/fleet

One server for the whole run, ``mcpfast serve --transport http --metrics`` (the demo app, bound to
127.0.0.1, pinned to ``SERVER_CPU``). The agents: ``locust -f loadtests/agents.py`` on the native
engine, one process, ``--mcp-agents-per-user`` agents per Locust user, their connections spread over
two loopback source addresses, pinned to ``GENERATOR_CPU``; their workload (:data:`WORKLOAD`): think
time log-normal, median 2 s and p90 8 s (``--think``), 4 to 10 steps per session (``echo``, ``add``, a resource
read), an idle gap between sessions exponential with mean 2 s, every session ended by DELETE. The
background load: ``locust -f loadtests/tools_call.py --mcp-rate 1000`` (open model: latency from the
intended send time), a second Locust process on the generator's core. Three phases, one after the
other:

1. **small**: ``--small-agents`` agents (100), half of them holding a stream; once they have
   settled, the background load runs for ``--background-seconds``;
2. **sessions**: ``--agents`` agents (N), none holding a stream: the server at the plateau, the
   background load again (what the sessions alone do to it);
3. **streams**: N agents, half holding a stream: the server at the plateau, the background load
   again, and the think times of a window of ``--window`` seconds.

The server is read once a second: VmRSS (``/proc/PID/status``), its open descriptors
(``/proc/PID/fd``), ``mcpfast_sessions_open`` and ``mcpfast_streams_open`` at ``/metrics``; so is
the agents' Locust process (its VmRSS and descriptors). The server's memory per idle session is the
slope of its RSS from no session (after the small phase) to the sessions phase's plateau; per held
stream, what the streams phase's plateau holds beyond its sessions at that slope, per stream. The
generator's memory per agent is the agents' own ``memory`` figure (``<prefix>_histograms.json``).

Think times: the agents record a think time when it ends, and a run's end cuts the long ones short
(not recorded), so a run's whole histogram leans to the short ones (by a few percent at p90 for a
two-minute run). The window is chosen by the time a think ended: every think that ended between the
window's start (well after the ramp, so that thinks start at a steady rate) and the run's end, the
agents' histogram at the end minus its copy at the window's start (taken inside the Locust process by
:func:`install_window`, loaded beside the locustfile). In a steady state the thinks that end in a
window have the configured distribution, whatever their length.

Failures must be none: every reason with its count, from every Locust run's ``_failures.csv``. A
fleet too large for the machine is stopped by the agents' own check before any load (the open-file
limit, the ephemeral ports), whose message the results carry. Output in ``--out``:
``results.json``, ``results.md``; Locust's files and the logs in ``--out``/logs/.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shlex
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import GENERATOR_CPU, ROOT, SERVER_CPU, Record, affinity, cpu_seconds, head, pinned, ratio, results_dir, write
from mcpfast.bench.procs import ServerProcess, child_env, free_port, log_path, log_tail, reference_argv
from mcpfast.client.base import rss_kib
from mcpfast.client.probe import METRIC_RSS, METRIC_SESSIONS, metrics_url, parse_metrics
from mcpfast.locust.histogram import Histogram
from mcpfast.locust.hlog import read_log
from mcpfast.results.files import failure_reasons
from mcpfast.transports.http_server import fd_reserve

__all__ = ["DEFAULTS", "QUICK", "WORKLOAD", "install_window", "main", "run", "think_window", "workload"]

HOST = "127.0.0.1"
SOURCES = "127.0.0.2-127.0.0.3"
"""Two loopback source addresses: 28,232 ephemeral ports each towards the server's one port."""
SOURCE_COUNT = 2
THINK = (2.0, 8.0)
"""The agents' think time, log-normal: median and p90 in seconds."""
Z90 = 1.2815515655446004
"""The standard normal's 90th percentile."""
THINK_TOLERANCE = 0.05
"""Measured median and p90 of the think times within 5% of the configured ones."""
P99_RATIO_LIMIT = 2.0
"""The background load's p99 while N agents are held at most twice its p99 while the small fleet is."""
METRIC_STREAMS = "mcpfast_streams_open"
METRIC_FDS = "process_open_fds"
GENERATOR_FD_MARGIN = 256
"""Open files the agents' process keeps besides its connections (``mcpfast.locust.agents.FD_MARGIN``)."""
CLIENT_FD_ROOM = 200
"""Connections the server keeps room for besides the agents': the background load's, ``/metrics`` reads."""
MAX_PER_USER = 100
"""Agents per Locust user: Locust's bookkeeping is per user, the engine's per agent."""
BACKGROUND_USERS = 64
BACKGROUND_TOOL = "tools/call:echo"
BACKGROUND_WARMUP_S = 2.0
"""The background load's first seconds (its sessions opening) are left out of its latency."""
BACKGROUND_START_S = 3.0
"""Time for the background Locust to start and stop, beside its load."""
AGENTS_NICE = 10
"""The agents' process yields the shared core to the background generator, whose latency should be
the server's, not a wait for the core (their CPU is the same either way)."""
STOP_TIMEOUT_S = 10
MARKS_ENV = "MCPFAST_FLEET_MARKS"
WINDOW_ENV = "MCPFAST_FLEET_WINDOW_AT"

WORKLOAD = """\
# the agents of benchmarks/fleet.py (written by it)
think = {{dist = "lognormal", median = {median:g}, p90 = {p90:g}}}
idle = {{dist = "exponential", mean = {median:g}}}
hold_stream = {hold_stream:g}
abandon = 0
order = "weighted"
steps = [4, 10]

[[ops]]
op = "tools/call"
tool = "echo"
arguments = {{text = "hello"}}
weight = 4

[[ops]]
op = "tools/call"
tool = "add"
arguments = {{a = 1, b = 2}}
weight = 2

[[ops]]
op = "resources/read"
uri = "demo://readme"
weight = 1
"""

DEFAULTS: dict[str, float] = {
    "agents": 12_000,
    "small_agents": 100,
    "ramp": 600.0,
    "settle": 30.0,
    "plateau": 15.0,
    "window": 60.0,
    "background_rate": 1000.0,
    "background_seconds": 30.0,
}
"""About four and a half minutes in all."""
QUICK: dict[str, float] = {
    "agents": 200,
    "small_agents": 20,
    "ramp": 400.0,
    "settle": 0.5,
    "plateau": 1.5,
    "window": 0.0,
    "background_rate": 200.0,
    "background_seconds": 1.5,
}
QUICK_THINK = (0.2, 0.8)
"""Under half a minute, think times a tenth of the real ones: a smoke run, not figures to quote."""


def workload(think: tuple[float, float], hold_stream: float) -> str:
    """The agents' workload file: think time log-normal with ``think`` (median, p90) in seconds, an
    idle gap exponential with the median as its mean, ``hold_stream`` of the agents holding a stream."""
    return WORKLOAD.format(median=think[0], p90=think[1], hold_stream=hold_stream)


def parse_think(text: str) -> tuple[float, float]:
    """``MEDIAN:P90`` in seconds (``2:8``)."""
    median, _, p90 = text.partition(":")
    try:
        out = (float(median), float(p90))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not MEDIAN:P90 in seconds: {text!r}") from None
    if not 0 < out[0] < out[1]:
        raise argparse.ArgumentTypeError(f"a log-normal needs 0 < median < p90: {text!r}")
    return out


# ------------------------------------------------------------------ inside the agents' Locust


def install_window() -> None:
    """In the agents' Locust process (a generated locustfile beside ``loadtests/agents.py`` calls
    it): at test start, write the time to the file ``$MCPFAST_FLEET_MARKS``; ``$MCPFAST_FLEET_WINDOW_AT``
    seconds later, the agents' think histogram as it is then, and the time (the window's start)."""
    # Locust's import patches the standard library with gevent: only inside its own process
    import gevent
    from locust import events

    from mcpfast.locust.agents import figures

    path = Path(os.environ[MARKS_ENV])
    at = float(os.environ.get(WINDOW_ENV) or 0)
    marks: dict[str, Any] = {}

    def save() -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(marks), encoding="utf-8")
        tmp.replace(path)

    def snapshot(environment: Any) -> None:
        gevent.sleep(at)
        marks["window_start"] = time.time()
        marks["think_before_window"] = figures(environment).figures.get("agent", "think").to_dict()
        save()

    def on_test_start(environment: Any, **_kw: Any) -> None:
        marks["test_start"] = time.time()
        save()
        if at > 0:
            gevent.spawn(snapshot, environment)

    events.test_start.add_listener(on_test_start)


WINDOW_LOCUSTFILE = '''"""The think-time window of benchmarks/fleet.py (generated by it): no user class."""
from benchmarks.fleet import install_window

install_window()
'''


def think_window(final: dict[str, Any] | None, before: dict[str, Any] | None, think: tuple[float, float]) -> dict[str, Any]:
    """The think times (ms) that ended in the window: the run's histogram ``final`` minus its
    state ``before`` the window; the median and p90 against the configured ones."""
    if not final:
        return {"count": 0, "error": "no think times recorded"}
    end = Histogram.from_dict(final)
    h = end.minus(Histogram.from_dict(before)) if before else end
    if not h.total_count:
        return {"count": 0, "error": "no think time ended in the window"}
    p50, p90 = h.percentiles([50.0, 90.0])
    configured = {"p50": think[0] * 1000, "p90": think[1] * 1000}
    measured = {"p50": p50, "p90": p90}
    off = {k: measured[k] / configured[k] - 1 for k in configured}
    return {
        "count": h.total_count,
        "ms": measured,
        "configured_ms": configured,
        "off": {k: round(v, 4) for k, v in off.items()},
        "tolerance": THINK_TOLERANCE,
        "within": all(abs(v) <= THINK_TOLERANCE for v in off.values()),
        "mean_ms": round(h.mean, 1),
    }


# ------------------------------------------------------------------------------- sampling


@dataclass(frozen=True)
class Sample:
    """One look at the server and the agents' generator (a figure that could not be read: None)."""

    t: float  # time.time()
    phase: str
    rss_kib: int | None
    fds: int | None
    sessions: int | None
    streams: int | None
    metrics_rss_kib: int | None
    generator_rss_kib: int | None
    generator_fds: int | None


def fd_count(pid: int) -> int | None:
    """Open descriptors of a process (``/proc/PID/fd``)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def read_page(url: str) -> dict[str, float]:
    """The server's gauges at ``/metrics`` (empty when it cannot be read)."""
    try:
        with urllib.request.urlopen(metrics_url(url), timeout=5) as reply:  # 127.0.0.1
            return parse_metrics(reply.read().decode("utf-8", "replace"), (METRIC_RSS, METRIC_SESSIONS, METRIC_STREAMS, METRIC_FDS))
    except (OSError, ValueError):
        return {}


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


class Sampler:
    """The server (and the agents' generator, while one runs) read every ``every`` seconds on a
    thread, each sample labelled with the phase then. While ``quiet`` (the background load runs),
    ``/metrics`` is not read: the page is made on the server's event loop, and counting tens of
    thousands of descriptors there would be a stall of the loop the background load measures."""

    def __init__(self, server: ServerProcess, every: float = 1.0) -> None:
        self.server = server
        self.every = every
        self.phase = "start"
        self.generator: int | None = None
        self.quiet = False
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fleet-sampler", daemon=True)

    def take(self) -> Sample:
        page = {} if self.quiet else read_page(self.server.url)
        gen = self.generator
        rss = page.get(METRIC_RSS)
        sample = Sample(
            t=time.time(),
            phase=self.phase,
            rss_kib=rss_kib(self.server.pid),
            fds=fd_count(self.server.pid),
            sessions=_int(page.get(METRIC_SESSIONS)),
            streams=_int(page.get(METRIC_STREAMS)),
            metrics_rss_kib=None if rss is None else int(rss // 1024),
            generator_rss_kib=rss_kib(gen) if gen else None,
            generator_fds=fd_count(gen) if gen else None,
        )
        self.samples.append(sample)
        return sample

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.take()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def between(self, phase: str, start: float | None = None, end: float | None = None) -> list[Sample]:
        return [s for s in self.samples if s.phase == phase and (start is None or s.t >= start) and (end is None or s.t <= end)]


def plateau(samples: list[Sample]) -> dict[str, Any]:
    """The medians of the samples' figures (the plateau of a phase), their count and the most of
    each; only the samples with the server's page, so that every figure is of the same moments."""
    samples = [s for s in samples if s.sessions is not None]
    out: dict[str, Any] = {"samples": len(samples)}
    for key in ("rss_kib", "fds", "sessions", "streams", "metrics_rss_kib", "generator_rss_kib", "generator_fds"):
        values = [v for s in samples if (v := getattr(s, key)) is not None]
        out[key] = round(statistics.median(values)) if values else None
        out[f"{key}_max"] = max(values) if values else None
    return out


# --------------------------------------------------------------------------------- Locust runs


def per_user(agents: int) -> int:
    """Agents per Locust user: the largest divisor of ``agents`` up to :data:`MAX_PER_USER`."""
    return max(d for d in range(1, min(agents, MAX_PER_USER) + 1) if agents % d == 0)


def failures(prefix: Path) -> list[dict[str, Any]]:
    """Every failure reason of a Locust run (``<prefix>_failures.csv``) with its count."""
    return [{"method": kind, "name": name, "error": reason, "count": count} for kind, name, reason, count in failure_reasons(prefix)]


def histograms(prefix: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(f"{prefix}_histograms.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def refusal(log: Path) -> str | None:
    """The agents' check's message when it stopped the run before any load (exit code 2)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("mcpfast agents error: "):
            return line.removeprefix("mcpfast agents error: ")
    return None


@dataclass
class Run:
    """One Locust process: its command, environment, log and CSV prefix; once ended, its exit code."""

    label: str
    argv: list[str]
    prefix: Path
    seconds: float
    env: dict[str, str]
    marks: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    code: int | None = None

    @property
    def log(self) -> Path:
        return Path(f"{self.prefix}-locust.log")

    def start(self) -> Run:
        with open(self.log, "w", encoding="utf-8") as fh:  # the child keeps its own descriptor
            fh.write("$ " + shlex.join(self.argv) + "\n")
            fh.flush()
            self.proc = subprocess.Popen(
                self.argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.prefix.parent, env=self.env
            )
        return self

    def started_at(self, timeout: float = 60.0) -> float | None:
        """When its test started (the marks' ``test_start``); None when it ended before (refused)
        or did not start within ``timeout`` seconds."""
        assert self.proc is not None and self.marks is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            marks = self.read_marks()
            if "test_start" in marks:
                return float(marks["test_start"])
            time.sleep(0.1)
        return None

    def read_marks(self) -> dict[str, Any]:
        try:
            data = json.loads(self.marks.read_text(encoding="utf-8")) if self.marks is not None else {}
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def wait(self) -> int:
        """Its exit code; killed when it outlives its run time by a minute (the run stays bounded)."""
        assert self.proc is not None
        try:
            self.code = self.proc.wait(timeout=self.seconds + STOP_TIMEOUT_S + 60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.code = self.proc.wait(timeout=10)
        return self.code

    def summary(self) -> dict[str, Any]:
        return {"command": shlex.join(self.argv), "exit": self.code, "failures": failures(self.prefix), "log": self.log.name}


def logs_dir(opts: argparse.Namespace) -> Path:
    return log_path(Path(opts.out), "fleet.log").parent


def agents_run(label: str, opts: argparse.Namespace, url: str, agents: int, hold_stream: float, seconds: float, window_at: float) -> Run:
    """The agents' Locust run of a phase, not started: ``agents`` agents, ``hold_stream`` of them
    holding a stream, for ``seconds``; the think histogram copied ``window_at`` s after its start."""
    logs = logs_dir(opts)
    scenario = logs / f"{label}-agents.toml"
    scenario.write_text(workload(opts.think, hold_stream), encoding="utf-8")
    shim = logs / "fleet_window_locustfile.py"
    shim.write_text(WINDOW_LOCUSTFILE, encoding="utf-8")
    each = per_user(agents)
    argv = [
        "nice", "-n", str(AGENTS_NICE), opts.python, "-m", "locust", "-f", f"{ROOT / 'loadtests' / 'agents.py'},{shim}", "--headless", "--only-summary",
        "-u", str(agents // each), "-r", f"{max(opts.ramp / each, 0.1):g}", "-t", f"{math.ceil(seconds)}s",
        "--stop-timeout", str(STOP_TIMEOUT_S), "--host", url, "--mcp-agents-per-user", str(each),
        "--mcp-scenario", str(scenario), "--mcp-source-address", SOURCES, "--csv", str(logs / label),
    ]  # fmt: skip
    marks = logs / f"{label}-marks.json"
    marks.unlink(missing_ok=True)
    env = child_env()
    env[MARKS_ENV] = str(marks)
    env[WINDOW_ENV] = f"{window_at:g}"
    return Run(label, pinned(argv, GENERATOR_CPU), logs / label, seconds, env, marks)


def background_run(label: str, opts: argparse.Namespace, url: str) -> Run:
    """The background load's Locust run, not started: tools/call echo at ``--background-rate``
    per second, open model, for ``--background-seconds``."""
    logs = logs_dir(opts)
    seconds = opts.background_seconds
    argv = [
        opts.python, "-m", "locust", "-f", str(ROOT / "loadtests" / "tools_call.py"), "--headless", "--only-summary",
        "-u", str(BACKGROUND_USERS), "-r", str(BACKGROUND_USERS), "-t", f"{math.ceil(seconds)}s", "--stop-timeout", "5",
        "--host", url, "--mcp-rate", f"{opts.background_rate:g}", "--csv", str(logs / label),
    ]  # fmt: skip
    return Run(label, pinned(argv, GENERATOR_CPU), logs / label, seconds, child_env())


def steady(prefix: Path, skip: float) -> dict[str, Any] | None:
    """The background calls' latency (µs) after its first ``skip`` seconds, from the interval log
    (``<prefix>_histograms.hlog``), with each second's p99."""
    try:
        lines = Path(f"{prefix}_histograms.hlog").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    intervals = [(start, h) for tag, start, _length, _max, h in read_log(lines) if tag and tag.endswith(f":{BACKGROUND_TOOL}")]
    if not intervals:
        return None
    first = min(start for start, _h in intervals)
    total = Histogram()
    seconds = []
    for start, h in intervals:
        if start - first >= skip and h.total_count:
            total.merge(h)
            seconds.append(h.value_at_percentile(99.0))
    if not total.total_count:
        return None
    p50, p99, p999 = total.percentiles([50.0, 99.0, 99.9])
    return {
        "count": total.total_count,
        "p50": p50,
        "p99": p99,
        "p99.9": p999,
        "max": total.max,
        "skipped_s": skip,
        "p99_per_second": seconds,
    }


def background_figures(run_: Run) -> dict[str, Any]:
    """The background load's tools/call latency (µs) and its pacer (the rate it achieved)."""
    data = histograms(run_.prefix)
    row = next((h for h in data.get("histograms") or [] if h.get("name") == BACKGROUND_TOOL), None)
    pacer = data.get("pacer") or {}
    out: dict[str, Any] = {**run_.summary(), "latency_origin": data.get("latency_origin")}
    out["tools_call_us_whole_run"] = (row or {}).get("summary")
    out["tools_call_us"] = steady(run_.prefix, min(BACKGROUND_WARMUP_S, run_.seconds / 4))
    out["pacer"] = {k: pacer.get(k) for k in ("target_rate", "achieved_rate", "sent", "late", "dropped")}
    return out


# ------------------------------------------------------------------------------------- phases


def settle(sampler: Sampler, phase: str, seconds: float) -> dict[str, Any]:
    """No agents: the server read for ``seconds`` under ``phase``."""
    sampler.phase, sampler.generator = phase, None
    start = time.time()
    time.sleep(seconds)
    sampler.take()
    return plateau(sampler.between(phase, start))


def sleep_until(when: float) -> None:
    time.sleep(max(0.0, when - time.time()))


def phase(
    label: str,
    opts: argparse.Namespace,
    server: ServerProcess,
    sampler: Sampler,
    *,
    agents: int,
    hold_stream: float,
    measure: float,
    background: bool,
) -> dict[str, Any]:
    """One agents run: ramp, settle, then ``measure`` seconds read (the plateau), with the background
    load in them when asked; the run's figures."""
    ramp = agents / opts.ramp
    window_at = ramp + opts.settle
    seconds = window_at + measure
    print(f"[fleet] {label}: {agents} agents, {hold_stream:g} holding a stream, {seconds:.0f} s ...", file=sys.stderr, flush=True)
    run_ = agents_run(label, opts, server.url, agents, hold_stream, seconds, window_at).start()
    assert run_.proc is not None
    sampler.phase, sampler.generator = label, run_.proc.pid
    t0 = run_.started_at()
    out: dict[str, Any] = {"agents": agents, "hold_stream": hold_stream, "ramp_s": round(ramp, 1), "window_at_s": round(window_at, 1)}
    if t0 is None:
        run_.wait()
        said = refusal(run_.log)
        out.update(
            run_.summary(),
            refused=f"the agents' check: {said}"
            if said
            else f"the agents' Locust ended with exit code {run_.code} before its test started: {log_tail(run_.log, 3, ' | ')}",
        )
        return out
    sleep_until(t0 + window_at)
    cpu0 = (cpu_seconds(server.pid), cpu_seconds(run_.proc.pid), time.monotonic())
    bg = background_run(f"{label}-background", opts, server.url).start() if background else None
    if bg is not None:
        sampler.quiet = True
        bg.wait()
        sampler.quiet = False
    sleep_until(t0 + seconds - 0.5)
    cpu1 = (cpu_seconds(server.pid), cpu_seconds(run_.proc.pid), time.monotonic())
    end = time.time()
    run_.wait()
    if bg is not None:
        bg.wait()
    sampler.generator = None
    data = histograms(run_.prefix)
    figures = data.get("agents") or {}
    marks = run_.read_marks()
    think = (figures.get("figures") or {}).get("think")
    wall = cpu1[2] - cpu0[2]
    out.update(
        run_.summary(),
        plateau=plateau(sampler.between(label, t0 + window_at, end)),
        server_cpu_share=round((cpu1[0] - cpu0[0]) / wall, 3) if wall > 0 else None,
        generator_cpu_share=round((cpu1[1] - cpu0[1]) / wall, 3) if wall > 0 else None,
        memory=figures.get("memory"),
        littles_law=figures.get("littles_law"),
        sessions_ended=figures.get("sessions"),
        think_whole_run=(think or {}).get("summary"),
        think_window=think_window(think, marks.get("think_before_window"), opts.think),
        window_s=round(end - float(marks["window_start"]), 1) if "window_start" in marks else None,
        requests={h["name"]: h["summary"]["count"] for h in data.get("histograms") or [] if h.get("summary")},
    )
    if bg is not None:
        out["background"] = background_figures(bg)
    return out


def limits(agents: int) -> dict[str, Any]:
    """The open-file limit and what it leaves for agents, on each side (one process each)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    share = 0.5
    server_room = soft - fd_reserve(soft) - CLIENT_FD_ROOM
    generator_room = soft - GENERATOR_FD_MARGIN
    return {
        "rlimit_nofile": [soft, hard],
        "connections_per_agent": 1 + share,
        "connections": math.ceil(agents * (1 + share)),
        "server_fd_reserve": fd_reserve(soft),
        "server_connection_room": server_room,
        "generator_connection_room": generator_room,
        "most_agents": math.floor(min(server_room, generator_room) / (1 + share)),
        "ephemeral_ports_per_source": _port_range(),
        "sources": SOURCE_COUNT,
    }


def _port_range() -> int | None:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    except (OSError, ValueError):
        return None
    return int(hi) - int(lo) + 1


def memory_slopes(idle: dict[str, Any], sessions: dict[str, Any], streams: dict[str, Any]) -> dict[str, Any]:
    """The server's RSS per idle session (no sessions -> the sessions phase's plateau) and per held
    stream (what the streams phase's plateau holds beyond its sessions at that slope)."""
    base, rs, ns = idle.get("rss_kib"), sessions.get("rss_kib"), sessions.get("sessions")
    per_session = (rs - base) / ns if base is not None and rs is not None and ns else None
    rt, nt, held = streams.get("rss_kib"), streams.get("sessions"), streams.get("streams")
    per_stream = (rt - base - per_session * nt) / held if per_session is not None and rt is not None and nt and held else None
    return {
        "idle_rss_kib": base,
        "sessions_rss_kib": rs,
        "sessions": ns,
        "streams_rss_kib": rt,
        "streams_sessions": nt,
        "streams": held,
        "kib_per_idle_session": None if per_session is None else round(per_session, 2),
        "kib_per_held_stream": None if per_stream is None else round(per_stream, 2),
    }


def run(opts: argparse.Namespace, record: Record) -> dict[str, Any]:
    out = Path(opts.out)
    record.machine.update(server_cpu=SERVER_CPU, generator_cpu=GENERATOR_CPU)
    agents = int(opts.agents)
    room = limits(agents)
    port = free_port(HOST)
    argv = reference_argv(opts.python, HOST, port)
    argv += ["--metrics", "--max-connections", str(room["connections"] + CLIENT_FD_ROOM + 1000)]
    server = ServerProcess("mcpfast serve", pinned(argv, SERVER_CPU), HOST, port, log_path=log_path(out, "server.log"))
    phases: dict[str, Any] = {}
    idle: dict[str, Any] = {}
    gap = 0.5 if opts.quick else 3.0
    span = opts.background_seconds + BACKGROUND_START_S  # the background load within a phase's reading
    # this process (the sampler's /proc reads) on the generator's core, off the server's
    with affinity(GENERATOR_CPU), server.start():
        sampler = Sampler(server)
        sampler.start()
        try:
            idle["fresh"] = settle(sampler, "fresh", gap)
            for label, n, share, measure, background in (
                ("small", int(opts.small_agents), 0.5, span + opts.plateau, True),
                ("sessions", agents, 0.0, span + opts.plateau, True),
                ("streams", agents, 0.5, max(opts.window, span + opts.plateau), True),
            ):
                phases[label] = phase(label, opts, server, sampler, agents=n, hold_stream=share, measure=measure, background=background)
                idle[f"after_{label}"] = settle(sampler, f"after-{label}", gap)
                if "refused" in phases[label]:
                    break
        finally:
            sampler.stop()
            server_exit = server.exited()
    results = figures_of(phases, idle)
    return record.finish(
        config={k: getattr(opts, k) for k in (*DEFAULTS, "think", "quick")},
        pinning={"server": SERVER_CPU, "generator": GENERATOR_CPU, "background": GENERATOR_CPU},
        server_command=shlex.join(server.argv),
        server_exited_during_run=server_exit,
        workload=workload(opts.think, 0.5),
        limits=room,
        idle=idle,
        phases=phases,
        samples=[asdict(s) for s in sampler.samples],
        **results,
    )


def figures_of(phases: dict[str, Any], idle: dict[str, Any]) -> dict[str, Any]:
    """The headline figures and their verdicts, from the phases."""
    refused = next((p["refused"] for p in phases.values() if "refused" in p), None)
    every_failure = [
        {"run": label if kind == "agents" else f"{label} background", **f}
        for label, p in phases.items()
        for kind, block in (("agents", p), ("background", p.get("background") or {}))
        for f in block.get("failures") or []
    ]
    streams, small = phases.get("streams") or {}, phases.get("small") or {}
    p99 = {
        k: (((p.get("background") or {}).get("tools_call_us")) or {}).get("p99")
        for k, p in (("small", small), ("n_without_streams", phases.get("sessions") or {}), ("n", streams))
    }
    p99_ratio = ratio(p99["n"], p99["small"])
    exits = {label: p.get("exit") for label, p in phases.items()} | {
        f"{label} background": p["background"]["exit"] for label, p in phases.items() if "background" in p
    }
    memory = memory_slopes(idle.get("after_small") or {}, (phases.get("sessions") or {}).get("plateau") or {}, streams.get("plateau") or {})
    think = streams.get("think_window") or {}
    return {
        "refused": refused,
        "failures": every_failure,
        "failure_total": sum(f["count"] for f in every_failure),
        "exits": exits,
        "server_memory": memory,
        "generator_kib_per_agent": (streams.get("memory") or {}).get("generator_rss_kib_per_agent"),
        "generator_kib_per_agent_without_streams": ((phases.get("sessions") or {}).get("memory") or {}).get("generator_rss_kib_per_agent"),
        "think": think,
        "background_p99_us": p99,
        "background_p99_ratio": None if p99_ratio is None else round(p99_ratio, 3),
        "background_p99_within": None if p99_ratio is None else p99_ratio <= P99_RATIO_LIMIT,
    }


def problems(data: dict[str, Any]) -> list[str]:
    """What does not hold: a refusal, failures, exit codes, think times off, the p99 ratio."""
    found = []
    if data["refused"]:
        found.append(f"stopped before any load: {data['refused']}")
    if data["failure_total"]:
        found.append(f"{data['failure_total']} failures")
    found += [f"{label} exited with {code}" for label, code in data["exits"].items() if code != 0]
    if data["server_exited_during_run"] is not None:
        found.append(f"the server exited during the run ({data['server_exited_during_run']})")
    if not data["refused"]:
        if not data["think"].get("within"):
            found.append(f"think times not within {THINK_TOLERANCE:.0%} of the configured ones: {data['think']}")
        if not data["background_p99_within"]:
            found.append(f"background p99 ratio {data['background_p99_ratio']} (limit {P99_RATIO_LIMIT:g}x)")
    return found


# ------------------------------------------------------------------------------------- report


def _num(value: Any, digits: int = 1) -> str:
    return f"{value:,.{digits}f}" if isinstance(value, int | float) else "–"


def _ms(us: Any) -> str:
    return f"{us / 1000:,.2f} ms" if isinstance(us, int | float) else "–"


def _yes(holds: Any) -> str:
    return "–" if holds is None else ("**yes**" if holds else "**no**")


def report(data: dict[str, Any]) -> str:
    """``results.md``: the figures and their verdicts, why N is what it is, every phase."""
    cfg, lim, mem, think = data["config"], data["limits"], data["server_memory"], data["think"]
    think_cfg = cfg["think"]
    phases = data["phases"]
    n, small = int(cfg["agents"]), int(cfg["small_agents"])
    lines = [
        "# A fleet of MCP agents against `mcpfast serve`",
        "",
        head(data),
        "",
        f"One server, `{data['server_command']}` (the demo app), pinned to CPU {SERVER_CPU} for the whole run. The agents: "
        f"one Locust process (`locust -f loadtests/agents.py`, native engine), pinned to CPU {GENERATOR_CPU}, their "
        f"connections over {SOURCE_COUNT} loopback source addresses (`--mcp-source-address {SOURCES}`). The background "
        f"load: a second Locust process, `loadtests/tools_call.py --mcp-rate {cfg['background_rate']:g}` (open model, latency "
        f"from the intended send time), {BACKGROUND_USERS} users, {cfg['background_seconds']:g} s, its first "
        f"{BACKGROUND_WARMUP_S:g} s (its sessions opening) left out of its latency, **on the generator's core too** (CPU "
        f"{GENERATOR_CPU}): the agents' process runs at `nice -n {AGENTS_NICE}` so that it yields that core to the "
        "background generator, whose latency should be the server's; what is left of the wait for the core is in it. "
        "`/metrics` is not read while the background load runs (the page is made on the server's event loop). "
        f"The agents' workload is at the end: think time log-normal (median {think_cfg[0]:g} s, p90 {think_cfg[1]:g} s), "
        f"4 to 10 steps per session, idle gaps exponential (mean {think_cfg[0]:g} s), every session ended by DELETE.",
        "",
        f"Phases, one after the other: **small**, {small} agents, half holding a stream; **sessions**, {n:,} agents, no "
        f"streams; **streams**, {n:,} agents, half holding a stream. Each ramps at {cfg['ramp']:g} agents/s and settles "
        f"{cfg['settle']:g} s; then the background load runs, and after it the phase goes on for {cfg['plateau']:g} s "
        f"(the streams phase: {cfg['window']:g} s from the end of its settling, at least). The server is read once "
        "a second: VmRSS, `/proc/PID/fd`, `mcpfast_sessions_open` and `mcpfast_streams_open` at `/metrics`; a plateau's "
        "figures are the medians of its readings.",
    ]
    if data["refused"]:
        lines += ["", f"**The run stopped before any load**, {data['refused']}"]
    lines += ["", "## The figures", "", "| figure | measured | requirement | holds |", "|---|---|---|---|"]
    lines.append(
        f"| generator RSS per agent (the agents' `memory` figure), streams phase | {_num(data['generator_kib_per_agent'], 2)} KiB "
        f"(without streams: {_num(data['generator_kib_per_agent_without_streams'], 2)} KiB) | | |"
    )
    lines.append(
        f"| server RSS per idle session | {_num(mem['kib_per_idle_session'], 2)} KiB | | |"
        if mem["kib_per_idle_session"] is not None
        else "| server RSS per idle session | – | | |"
    )
    lines.append(f"| server RSS per held stream (beyond its session) | {_num(mem['kib_per_held_stream'], 2)} KiB | | |")
    pl = (phases.get("streams") or {}).get("plateau") or {}
    lines.append(
        f"| server open descriptors, streams phase (median; most) | {_num(pl.get('fds'), 0)}; {_num(pl.get('fds_max'), 0)} "
        f"(for {_num(pl.get('sessions'), 0)} sessions, {_num(pl.get('streams'), 0)} streams) | below the open-file limit | "
        f"{_yes(None if pl.get('fds_max') is None else pl['fds_max'] < lim['rlimit_nofile'][0])} |"
    )
    lines.append(f"| failures (every run) | {data['failure_total']:,} | 0 | {_yes(data['failure_total'] == 0 and not data['refused'])} |")
    if think.get("count"):
        lines.append(
            f"| think time median, a {_num((phases.get('streams') or {}).get('window_s'), 0)} s window of {think['count']:,} "
            f"thinks | {think['ms']['p50'] / 1000:.3f} s ({think['off']['p50']:+.1%}) | {think_cfg[0]:g} s ± {THINK_TOLERANCE:.0%} | "
            f"{_yes(abs(think['off']['p50']) <= THINK_TOLERANCE)} |"
        )
        lines.append(
            f"| think time p90, the same window | {think['ms']['p90'] / 1000:.3f} s ({think['off']['p90']:+.1%}) | {think_cfg[1]:g} s ± "
            f"{THINK_TOLERANCE:.0%} | {_yes(abs(think['off']['p90']) <= THINK_TOLERANCE)} |"
        )
    else:
        lines.append(f"| think times | – ({think.get('error', 'not measured')}) | within {THINK_TOLERANCE:.0%} | **no** |")
    p99 = data["background_p99_us"]
    lines.append(f"| background tools/call p99 while {small} agents are held | {_ms(p99['small'])} | | |")
    lines.append(f"| background tools/call p99 while {n:,} agents are held, none streaming | {_ms(p99.get('n_without_streams'))} | | |")
    lines.append(f"| background tools/call p99 while {n:,} agents are held, half streaming | {_ms(p99['n'])} | | |")
    lines.append(
        f"| ratio, {n:,} half streaming to {small} | {_num(data['background_p99_ratio'], 2)}x | ≤ {P99_RATIO_LIMIT:g}x | "
        f"{_yes(data['background_p99_within'])} |"
    )
    lines += _why_n(data)
    lines += _phases(data)
    lines += _failures(data)
    lines += _think(data)
    lines += ["", "## The agents' workload", "", "```toml", data["workload"].rstrip(), "```"]
    lines += ["", "## Command", "", "```sh", data["command"], "```", ""]
    return "\n".join(lines)


def _why_n(data: dict[str, Any]) -> list[str]:
    lim, n = data["limits"], int(data["config"]["agents"])
    soft, hard = lim["rlimit_nofile"]
    return [
        "",
        f"## Why N is {n:,} here, not 100,000",
        "",
        f"Every connection is an open file, and this machine's open-file limit (`RLIMIT_NOFILE`) is {soft:,} soft and "
        f"{hard:,} hard; without `CAP_SYS_RESOURCE` no process may raise it. An agent holds its connection to the server "
        f"between calls, and an agent holding a stream holds a second one: with half of them streaming, "
        f"{lim['connections_per_agent']:g} connections per agent on each side, the agents' one Locust process and the "
        f"server's one process alike. 100,000 agents would be 150,000 connections, 7.5 times what one process may hold. "
        f"The server keeps the last {lim['server_fd_reserve']:,} descriptors of its limit free (past them a connection "
        f"gets a 503 naming the limit), which leaves about {lim['server_connection_room']:,} connections with room for the "
        f"background load and `/metrics`; the agents' process needs {GENERATOR_FD_MARGIN} besides its connections "
        f"({lim['generator_connection_room']:,}). So one process on each side holds at most about "
        f"{lim['most_agents']:,} agents half streaming; {n:,} ({lim['connections']:,} connections each side) leaves a margin. "
        f"A larger `--agents` is stopped before any load by the agents' own check (`the open-file limit (RLIMIT_NOFILE) "
        f"is {soft} (hard {hard}) and this run needs about ...`, exit code 2), whose message this benchmark reports. "
        f"The ephemeral ports are not the bound: {lim['ephemeral_ports_per_source']:,} per source address towards the "
        f"server's port, {lim['sources']} source addresses.",
    ]


def _phases(data: dict[str, Any]) -> list[str]:
    idle = data["idle"]
    lines = [
        "",
        "## Every phase",
        "",
        "The plateau's medians (server: RSS, descriptors, sessions and streams open; the agents' process: RSS and "
        "descriptors) and the CPU of the server and of the agents' process over it, as a share of one core; with no "
        "agents, the readings before and after each phase.",
        "",
        "| phase | agents | server RSS MiB | server fds | sessions | streams | server CPU | agents' RSS MiB | agents' fds | "
        "agents' CPU | sessions ended | Little's law: predicted / measured open |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]

    def mib(kib: Any) -> str:
        return _num(kib / 1024 if isinstance(kib, int | float) else None, 1)

    order = ["fresh", *[x for label in data["phases"] for x in (label, f"after_{label}")]]
    for key in order:
        if key in data["phases"]:
            p = data["phases"][key]
            pl = p.get("plateau") or {}
            law = p.get("littles_law") or {}
            lines.append(
                f"| {key} | {p['agents']:,} ({p['hold_stream']:g} streaming) | {mib(pl.get('rss_kib'))} | {_num(pl.get('fds'), 0)} | "
                f"{_num(pl.get('sessions'), 0)} | {_num(pl.get('streams'), 0)} | {_num(p.get('server_cpu_share'), 2)} | "
                f"{mib(pl.get('generator_rss_kib'))} | {_num(pl.get('generator_fds'), 0)} | {_num(p.get('generator_cpu_share'), 2)} | "
                f"{_num(p.get('sessions_ended'), 0)} | {_num(law.get('predicted_open'), 0)} / {_num(law.get('measured_open'), 0)} |"
            )
        elif key in idle:
            r = idle[key]
            lines.append(
                f"| {key.replace('_', ' ')} (no agents) | 0 | {mib(r.get('rss_kib'))} | {_num(r.get('fds'), 0)} | "
                f"{_num(r.get('sessions'), 0)} | {_num(r.get('streams'), 0)} | | | | | | |"
            )
    mem = data["server_memory"]
    lines += [
        "",
        f"Server RSS per idle session: ({mem['sessions_rss_kib']} − {mem['idle_rss_kib']}) KiB / {mem['sessions']} sessions "
        f"(no sessions after the small phase, to the sessions phase's plateau). Per held stream: ({mem['streams_rss_kib']} − "
        f"{mem['idle_rss_kib']} − {mem['kib_per_idle_session']} × {mem['streams_sessions']}) KiB / {mem['streams']} streams. "
        "RSS is the process's; the kernel's socket buffers are not in it. A Python process keeps most of what it freed, "
        "so the readings after a phase stay near its plateau.",
    ]
    for label, p in data["phases"].items():
        bg = p.get("background")
        if bg:
            s, pacer = bg.get("tools_call_us") or {}, bg["pacer"]
            lines.append(
                f"- background load during **{label}**: {_num(pacer.get('achieved_rate'), 0)} calls/s achieved "
                f"(target {_num(pacer.get('target_rate'), 0)}; {pacer.get('late')} sent late, {pacer.get('dropped')} dropped), "
                f"tools/call p50 {_ms(s.get('p50'))}, p99 {_ms(s.get('p99'))}, p99.9 {_ms(s.get('p99.9'))}, max {_ms(s.get('max'))}; "
                f"each second's p99: {_per_second(s.get('p99_per_second'))}; the whole run, first seconds included: p99 "
                f"{_ms((bg.get('tools_call_us_whole_run') or {}).get('p99'))}"
            )
    return lines


def _per_second(values: Any) -> str:
    if not values:
        return "–"
    return f"median {_ms(statistics.median(values))}, least {_ms(min(values))}, most {_ms(max(values))}"


def _failures(data: dict[str, Any]) -> list[str]:
    if not data["failures"]:
        return ["", f"No failure in any run (exit codes: {', '.join(f'{k} {v}' for k, v in data['exits'].items())})."]
    lines = ["", "## Failures", "", "| run | request | reason | count |", "|---|---|---|---:|"]
    lines += [f"| {f['run']} | {f['method']} {f['name']} | {f['error']} | {f['count']:,} |" for f in data["failures"]]
    return lines


def _think(data: dict[str, Any]) -> list[str]:
    streams = data["phases"].get("streams") or {}
    whole, think = streams.get("think_whole_run") or {}, data["think"]
    if not whole or not think.get("count"):
        return []
    return [
        "",
        "## Think times: why a window",
        "",
        "A think time is recorded when it ends; the run's end cuts the longest short (unrecorded), so a whole run "
        "leans to the short ones. The window counts the thinks that ended after its start, well after the ramp, when "
        "thinks start at a steady rate: those have the configured distribution whatever their length. In the streams "
        f"phase the whole run's histogram gives median {whole.get('p50', 0) / 1000:.3f} s and p90 "
        f"{whole.get('p90', 0) / 1000:.3f} s ({whole.get('count', 0):,} thinks); the window, median "
        f"{think['ms']['p50'] / 1000:.3f} s and p90 {think['ms']['p90'] / 1000:.3f} s ({think['count']:,} thinks; mean "
        f"{think['mean_ms'] / 1000:.3f} s, configured mean {lognormal_mean(*data['config']['think']):.3f} s).",
    ]


def lognormal_mean(median: float, p90: float) -> float:
    """The mean of a log-normal given by its median and p90: σ = ln(p90 / median) / z(0.9)."""
    sigma = math.log(p90 / median) / Z90
    return median * math.exp(sigma**2 / 2)


# --------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", default=str(results_dir("fleet")), help="result directory (default bench_results/fleet)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the server and of Locust")
    parser.add_argument("--quick", action="store_true", help="a smoke run of about half a minute, not figures to quote")
    parser.add_argument(
        "--think", type=parse_think, help=f"think time MEDIAN:P90 in seconds, log-normal (default {THINK[0]:g}:{THINK[1]:g})"
    )
    parser.add_argument("--agents", type=int, help=f"N, the agents of the sessions and streams phases (default {DEFAULTS['agents']:,})")
    parser.add_argument("--small-agents", type=int, help=f"the agents of the small phase (default {DEFAULTS['small_agents']})")
    parser.add_argument("--ramp", type=float, help=f"agents started per second (default {DEFAULTS['ramp']:g})")
    parser.add_argument("--settle", type=float, help=f"seconds after the ramp before a phase is read (default {DEFAULTS['settle']:g})")
    parser.add_argument("--plateau", type=float, help=f"seconds the sessions phase is read (default {DEFAULTS['plateau']:g})")
    parser.add_argument("--window", type=float, help=f"seconds the streams phase is read (default {DEFAULTS['window']:g})")
    parser.add_argument("--background-rate", type=float, help=f"background tools/call per second (default {DEFAULTS['background_rate']:g})")
    parser.add_argument("--background-seconds", type=float, help=f"seconds of background load (default {DEFAULTS['background_seconds']:g})")
    parser.epilog = (
        "--quick: "
        + ", ".join(f"--{k.replace('_', '-')} {v:g}" for k, v in QUICK.items())
        + f", --think {QUICK_THINK[0]:g}:{QUICK_THINK[1]:g}. Options given win over both."
    )
    opts = parser.parse_args(argv)
    opts.out = str(Path(opts.out).resolve())  # Locust runs in the logs folder
    for key, value in (QUICK if opts.quick else DEFAULTS).items():
        if getattr(opts, key) is None:
            setattr(opts, key, type(DEFAULTS[key])(value))
    if opts.think is None:
        opts.think = QUICK_THINK if opts.quick else THINK
    if opts.agents < 1 or opts.small_agents < 1 or opts.ramp <= 0:
        parser.error("--agents, --small-agents and --ramp must be positive")
    data = run(opts, Record("fleet", argv, lock=True))
    markdown = report(data)
    write(Path(opts.out), "results", data, markdown)
    print(markdown)
    found = problems(data)
    if found:
        print("problems: " + "; ".join(found), file=sys.stderr)
    return 2 if data["refused"] else (1 if found else 0)


if __name__ == "__main__":
    sys.exit(main())
