"""The capacity search run by Locust: a ``LoadTestShape`` and the steps' windows in every process.

``locust -f loadtests/tools_call.py,shapes/capacity.py --mcp-slo 'tools/call:echo p99 < 5ms'``
(headless, in the web UI, with ``--processes N`` or master and workers alike). The shape runs
where Locust runs shapes (the master, or the only process) and drives :class:`~mcpfast.locust.
capacity.Search`; each step is an open-model rate every generator process takes its share of.

One step, as the processes see it:

1. the shape picks the rate and the users it needs (Little's law at the SLO's latency bound,
   twice over, so sessions are never what holds a healthy step back), and sends every process
   the step (:data:`STEP_MESSAGE`; a local run calls it directly) before it asks for the users;
2. each process sets its share of the rate (``McpStats.set_rate``: the Python pacer and every
   native engine start a new schedule, the arrivals queued for the previous rate dropped), waits
   the warm-up, then until every request it had sent before the step has completed (an
   overloaded step's queue at the server) and the step's sessions are open, and opens its
   window: a forced drain of its native engines, then every request the process completes goes
   to the window (Locust's ``request`` event for the Python users, the drained rows for the
   engines), with its CPU demand per thread from ``/proc`` (run time plus run-queue wait: a
   starved thread counts as busy even when another process takes its core);
3. at the window's end (a forced drain again) the process sends its window
   (:data:`WINDOW_MESSAGE`); the shape merges every process's, reads what the server did over
   the same stretch (:class:`~mcpfast.client.probe.ServerProbe`, sampled every half second) and
   judges it.

When the search ends the shape writes ``capacity.json`` and ``capacity.csv`` into
``--mcp-capacity-out`` (if given), prints the sentence of what was found and what broke first,
sets the exit code (0: a capacity or "at least"; 1: below the first step, or the server exited;
3: inconclusive, the generator was the limit) and stops the test.
"""

from __future__ import annotations

import csv
import functools
import json
import logging
import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import gevent
import locust
from locust import LoadTestShape
from locust.runners import MasterRunner, WorkerRunner
from locust.stats import StatsError

from mcpfast.client.probe import ServerProbe, ServerReading, metrics_url
from mcpfast.locust import native
from mcpfast.locust import stats as mstats
from mcpfast.locust.argtypes import rate, share
from mcpfast.locust.capacity import (
    FAMILIES,
    Search,
    SearchSettings,
    ServerSample,
    Unit,
    Window,
    judge,
    parse_slo,
    sentence,
)
from mcpfast.locust.families import add_options
from mcpfast.locust.histogram import HistogramSet
from mcpfast.locust.options import Group, Opt, option
from mcpfast.locust.thresholds import Threshold, ThresholdError
from mcpfast.locust.thresholds import argument_type as _threshold

__all__ = [
    "CAPACITY",
    "EXIT_INCONCLUSIVE",
    "STEP_MESSAGE",
    "WINDOW_MESSAGE",
    "CapacityShape",
    "progress",
    "register",
    "thread_demand",
    "unit_of",
    "write",
]

logger = logging.getLogger(__name__)

STEP_MESSAGE = "mcpfast_capacity_step"  # shape -> every generator process
WINDOW_MESSAGE = "mcpfast_capacity_window"  # generator process -> shape
EXIT_INCONCLUSIVE = 3
CONTROLLER_ATTR = "mcpfast_capacity"  # the environment's search, once its first tick made it
SETTLE_MAX_S = 20.0  # at most this long past the warm-up for an overloaded step's requests to end
SAMPLE_EVERY_S = 0.5  # the server's CPU and memory, read this often during the search
WINDOW_GRACE_S = 10.0  # a process whose window is this late past its end fails the step
SESSION_UP: Final = frozenset({"notifications/initialized", "server/discover"})
"""The last request of a Python user's handshake, in either era: its session is up once it is answered."""
DEFAULT_LATENCY_BOUND_S = 1.0  # users per rate when the SLO bounds no latency


def _positive(text: str) -> float:
    value = rate(text)
    if value <= 0:
        import argparse

        raise argparse.ArgumentTypeError(f"must be above 0, got {text!r}")
    return value


CAPACITY = Group(
    "mcpfast capacity",
    "the capacity search (shapes/capacity.py; mcpfast capacity)",
    (
        Opt(
            "--mcp-slo",
            None,
            "The SLO each step is held to, in the --mcp-threshold grammar, repeatable: "
            "'tools/call:echo p99 < 5ms', 'fail% < 0.1'. Without a failure clause any failed request fails a step.",
            metavar="EXPR",
            action="append",
            type=_threshold,
            env=False,
        ),
        Opt("--mcp-capacity-start", 50.0, "The first step's rate, per second (default 50).", metavar="PER_SECOND", type=_positive),
        Opt(
            "--mcp-capacity-max-rate",
            1_000_000.0,
            "Never offer more than this rate (a deployed server's guard; default 1,000,000/s).",
            metavar="PER_SECOND",
            type=_positive,
        ),
        Opt(
            "--mcp-capacity-resolution",
            0.05,
            "Bisect until the first failed rate is within this share of the last good one (default 0.05).",
            metavar="SHARE",
            type=share,
        ),
        Opt("--mcp-capacity-warmup", 2.0, "Seconds of each step discarded before its window (default 2).", metavar="S", type=rate),
        Opt("--mcp-capacity-steady", 5.0, "Seconds of each step's judged window (default 5).", metavar="S", type=_positive),
        Opt(
            "--mcp-capacity-max-time",
            180.0,
            "The whole search's bound in seconds (default 180); the bracket reached is the answer when it runs out.",
            metavar="S",
            type=_positive,
        ),
        Opt(
            "--mcp-capacity-stop-on-failure",
            False,
            "End at the first failed step, without bisecting above it (a deployed server: hurt it once).",
            action="store_true",
        ),
        Opt(
            "--mcp-capacity-max-users",
            5000,
            "At most this many users (sessions) in a step (default 5000).",
            metavar="N",
            type=int,
        ),
        Opt(
            "--mcp-capacity-out",
            None,
            "Write capacity.json and capacity.csv here (created).",
            metavar="DIR",
        ),
    ),
)


# -- what a step counts -------------------------------------------------------------------------------
def _family(environment: Any) -> tuple[str, list[type]]:
    """The one family the run loads (its user classes); ValueError when it is not one family
    the search can run."""
    classes = [c for c in (environment.user_classes or []) if not getattr(c, "abstract", False)]
    families = {getattr(c, "native_family", None) for c in classes}
    if len(families) != 1 or None in families:
        loaded = ", ".join(sorted(c.__name__ for c in classes)) or "none"
        raise ValueError(f"the capacity search runs one family: load one locustfile beside the shape (loaded: {loaded})")
    family = str(next(iter(families)))
    if family not in FAMILIES:
        raise ValueError(f"the capacity search runs the families {', '.join(FAMILIES)}, not {family}")
    return family, classes


def unit_of(environment: Any) -> tuple[Unit, set[str] | None]:
    """The search's unit for the loaded family, and every request name its steps may report
    (None when the workload's names are not known before it runs)."""
    family, classes = _family(environment)
    tool = str(option(environment, "mcp_tool"))
    setup = {"initialize", "notifications/initialized", "server/discover", "DELETE", "connect", "tls:handshake", "Retry-After wait"}
    if family == "tools_call":
        call = f"tools/call:{tool}"
        return Unit("calls/s", frozenset({call})), setup | {call}
    if family in ("handshake", "session_churn"):
        return Unit("sessions/s", frozenset({"initialize"})), setup | {f"tools/call:{tool} (first)", "cycle"}
    streams = {"progress:first-event", "progress:gap", "sse:first-event", "sse:gap", "GET:open", "GET:event", "GET:405"}
    if family == "sse_streaming":
        call = f"tools/call:{option(environment, 'mcp_stream_tool')}"
        return Unit("calls/s", frozenset({call})), setup | streams | {call, "subscriptions/listen:ack"}
    names: set[str] = set()
    for c in classes:  # a workload's mix: the names its plan will report, when the plan is loaded
        plan = getattr(c, "plan_names", None)
        if plan is None:
            return Unit("requests/s"), None
        names |= set(plan())
    return Unit("requests/s"), setup | streams | names


def latency_bound(slo: list[Threshold]) -> float:
    """Seconds: the loosest upper bound the SLO puts on a latency (1 s when it puts none)."""
    bounds = [t.value / 1e6 for t in slo if t.is_latency and t.op in ("<", "<=")]
    return max(bounds) if bounds else DEFAULT_LATENCY_BOUND_S


def users_for(offered: float, slo: list[Threshold], limit: int) -> int:
    """Sessions a step needs: twice what Little's law gives at the SLO's latency bound."""
    return max(4, min(limit, math.ceil(offered * latency_bound(slo) * 2) + 2))


# -- a process's window ---------------------------------------------------------------------------------
def thread_demand() -> dict[int, int]:
    """ns each thread of this process ran or waited to run (``/proc/self/task/*/schedstat``)."""
    out: dict[int, int] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as fh:
                run, wait, _ = fh.read().split()
            out[int(tid)] = int(run) + int(wait)
        except (OSError, ValueError):
            continue
    return out


class WindowTap:
    """One process's steady window: every request it completes while open."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.stats = mstats.get(environment)
        self.ok = HistogramSet()
        self.failed = HistogramSet()
        self.halves = (HistogramSet(), HistogramSet())
        self.half = self.halves[0]  # where every request also goes: the window's first half, then its second
        self.reasons: dict[str, int] = {}
        self.opened_at = 0.0
        self.opened_wall = 0.0
        self._demand: dict[int, int] = {}
        self._dropped = 0
        self._behind = 0

    def _drain(self) -> None:
        for d in native.drivers(self.environment):
            d.poll()

    def open(self) -> None:
        self._drain()  # what completed before the window belongs to the warm-up
        counters = self.stats.local_counters()
        self._dropped, self._behind = counters["pacer.dropped"], counters["pacer.behind"]
        self.environment.events.request.add_listener(self.on_request)
        self.stats.drain_hooks.append(self.on_rows)
        self._demand = thread_demand()
        self.opened_at = time.monotonic()
        self.opened_wall = time.time()

    def split(self) -> None:
        """The window's middle: what completes from now on is its second half."""
        self._drain()
        self.half = self.halves[1]

    def close(self) -> dict[str, Any]:
        self._drain()
        seconds = time.monotonic() - self.opened_at
        demand = thread_demand()
        self.environment.events.request.remove_listener(self.on_request)
        if self.on_rows in self.stats.drain_hooks:
            self.stats.drain_hooks.remove(self.on_rows)
        counters = self.stats.local_counters()
        busiest = max(((demand[t] - self._demand.get(t, 0)) / 1e9 / seconds for t in demand), default=0.0) if seconds > 0 else 0.0
        return {
            "ok": self.ok.to_dict(),
            "failed": self.failed.to_dict(),
            "halves": [h.to_dict() for h in self.halves],
            "reasons": self.reasons,
            "dropped": counters["pacer.dropped"] - self._dropped,
            "behind": counters["pacer.behind"] - self._behind,
            "generator_cpu": min(busiest, 1.0),
            "seconds": seconds,
            "opened_wall": self.opened_wall,
            "closed_wall": time.time(),
            "pid": os.getpid(),
        }

    def on_request(self, request_type: str, name: str, response_time: float, exception: BaseException | None = None, **_kw: Any) -> None:
        us = max(round(response_time * 1000.0), 1)
        self.half.record(request_type, name, us)
        if exception is None:
            self.ok.record(request_type, name, us)
            return
        self.failed.record(request_type, name, us)
        reason = StatsError.parse_error(exception if isinstance(exception, Exception) else repr(exception))
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def on_rows(self, rows: Iterable[Any]) -> None:
        for row in rows:
            rtype, name = row.request_type, row.name
            failed = dict(row.failed_buckets)
            for us, count in row.failed_buckets:
                self.failed.record(rtype, name, us, count)
            for us, count in row.buckets:
                self.half.record(rtype, name, us, count)
                ok = count - failed.get(us, 0)
                if ok:
                    self.ok.record(rtype, name, us, ok)
            for reason, count in row.errors:
                self.reasons[reason] = self.reasons.get(reason, 0) + count


class StepRunner:
    """A generator process's side of the steps: its share of each step's rate, and its window."""

    def __init__(self, environment: Any, send: Any) -> None:
        self.environment = environment
        self.send = send  # the window's payload to the shape
        self.greenlet: Any = None
        self.completed = 0  # the Python users' requests completed (each fires Locust's request event)
        self.sessions = 0  # the Python users' sessions up: handshakes finished, less DELETEs sent
        environment.events.request.add_listener(self._completed)

    def _completed(self, name: str = "", exception: object = None, **_kw: Any) -> None:
        self.completed += 1
        # A Python user's handshake takes arrivals of the pacer's schedule like any request, so a
        # window opened before every user's session is up would count them against the step's calls.
        if name in SESSION_UP and exception is None:
            self.sessions += 1
        elif name == "DELETE":
            self.sessions -= 1

    def on_step(self, data: dict[str, Any]) -> None:
        stats = mstats.get(self.environment)
        stats.set_rate(float(data["rate"]))
        if self.greenlet is not None:
            self.greenlet.kill(block=False)
        self.greenlet = gevent.spawn(self._window, data, self._counts()[0])

    def stop(self) -> None:
        if self.greenlet is not None:
            self.greenlet.kill(block=False)
            self.greenlet = None

    def _counts(self) -> tuple[int, int, bool]:
        """(requests sent, requests completed) by this process so far, its native engines' and
        its Python users', and whether every session its engines are asked for is open."""
        drivers = native.drivers(self.environment)
        if not drivers:  # the Python users: the pacer's sends, the request events
            runner = self.environment.runner
            users = int(runner.user_count) if runner is not None else 0
            return mstats.get(self.environment).schedule.sent, self.completed, self.sessions >= users
        # the engines' own counts (the pacer's ``sent`` holds their drained sends too)
        sent, done, opened = 0, 0, True
        for d in drivers:
            status = d.engine.status() if d.engine is not None else {}
            sent += int(status.get("sent") or 0)
            done += int(status.get("completed") or 0)
            opened = opened and int(status.get("sessions_open") or 0) >= int(status.get("users") or 0)
        return sent, done, opened

    def _settled(self, sent_before: int) -> bool:
        """Every request sent before the step began has completed (an overloaded step's queue at
        the server is gone), and the step's sessions are open (their handshakes are behind)."""
        _, done, opened = self._counts()
        return done >= sent_before and opened

    def _window(self, data: dict[str, Any], sent_before: int) -> None:
        gevent.sleep(float(data["warmup"]))
        # an overloaded step leaves requests in the server's queue, and a step that opens
        # sessions has their handshakes before its calls: the window opens once both are through
        # (bounded: a server that never catches up is judged as it is then)
        deadline = time.monotonic() + SETTLE_MAX_S
        while not self._settled(sent_before) and time.monotonic() < deadline:
            gevent.sleep(0.05)
        tap = WindowTap(self.environment)
        tap.open()
        try:
            gevent.sleep(float(data["steady"]) / 2)
            tap.split()
            gevent.sleep(float(data["steady"]) / 2)
            payload = tap.close()
        except BaseException:
            tap.close()
            raise
        payload["step"] = data["step"]
        self.send(payload)


# -- the shape -------------------------------------------------------------------------------------------
@dataclass
class _Step:
    index: int
    offered: float
    users: int
    started: float
    expected: set[str]  # the processes whose windows are awaited ("local" for a local run)
    windows: dict[str, dict[str, Any]] = field(default_factory=dict)


class Controller:
    """The search as the shape runs it (the master, or the only process)."""

    def __init__(self, environment: Any, shape: CapacityShape) -> None:
        self.environment = environment
        self.shape = shape
        self.runner = environment.runner
        self.settings = SearchSettings(
            start=float(option(environment, "mcp_capacity_start")),
            max_rate=float(option(environment, "mcp_capacity_max_rate")),
            resolution=float(option(environment, "mcp_capacity_resolution")),
            warmup_s=float(option(environment, "mcp_capacity_warmup")),
            steady_s=float(option(environment, "mcp_capacity_steady")),
            max_time_s=float(option(environment, "mcp_capacity_max_time")),
            stop_on_failure=bool(option(environment, "mcp_capacity_stop_on_failure")),
        )
        self.unit, names = unit_of(environment)
        self.slo = parse_slo(list(option(environment, "mcp_slo") or []), names)
        self.search = Search(self.settings)
        self.max_users = int(option(environment, "mcp_capacity_max_users"))
        self.step: _Step | None = None
        self.began = time.monotonic()
        self.readings: list[ServerReading] = []
        host = str(getattr(environment, "host", None) or "")
        pid = int(option(environment, "mcp_server_pid") or 0)
        self.probe = ServerProbe(pid or None, metrics_url(host) if host.startswith(("http://", "https://")) else None)
        self.sampler = gevent.spawn(self._sample)
        self.local = StepRunner(environment, self._local_window) if not isinstance(self.runner, MasterRunner) else None
        self.written: Path | None = None
        self.finished = False

    # -- the server's side
    def _sample(self) -> None:
        while True:
            self.readings.append(self.probe.read())  # gevent's sockets: the page's read yields
            gevent.sleep(SAMPLE_EVERY_S)

    def _server_over(self, start_wall: float, end_wall: float) -> ServerSample:
        """The server over a window given in wall-clock time (the processes' own clocks)."""
        offset = time.time() - time.monotonic()
        start, end = start_wall - offset, end_wall - offset
        inside = [r for r in self.readings if start - SAMPLE_EVERY_S <= r.at <= end + SAMPLE_EVERY_S]
        if not inside:
            return ServerSample()
        first, last = inside[0], inside[-1]
        cpu = None
        if first.cpu_s is not None and last.cpu_s is not None and last.at > first.at:
            cpu = (last.cpu_s - first.cpu_s) / (last.at - first.at)
        alive = all(r.alive for r in inside)
        return ServerSample(cpu=cpu, rss_bytes=last.rss_bytes, sessions_open=last.sessions_open, alive=alive)

    # -- steps
    def _expected(self) -> set[str]:
        if isinstance(self.runner, MasterRunner):
            active = self.runner.clients.ready + self.runner.clients.running + self.runner.clients.spawning
            return {c.id for c in active}
        return {"local"}

    def _start(self, offered: float) -> tuple[int, float]:
        users = users_for(offered, self.slo, self.max_users)
        index = len(self.search.steps) + 1
        data = {
            "step": index,
            "rate": offered,
            "warmup": self.settings.warmup_s,
            "steady": self.settings.steady_s,
        }
        self.step = _Step(index, offered, users, time.monotonic(), self._expected())
        if isinstance(self.runner, MasterRunner):
            self.runner.send_message(STEP_MESSAGE, data)
        elif self.local is not None:
            self.local.on_step(data)
        logger.info("mcpfast capacity: step %d offers %s/s with %d users", index, f"{offered:,.0f}", users)
        return users, float(max(users, 1))

    def add_window(self, source: str, payload: dict[str, Any]) -> None:
        step = self.step
        if step is None or payload.get("step") != step.index:
            return  # a window of a step already judged
        step.windows[source] = payload

    def _local_window(self, payload: dict[str, Any]) -> None:
        self.add_window("local", payload)

    def _judge(self, step: _Step, late: bool) -> None:
        windows = list(step.windows.values())
        ok, failed = HistogramSet(), HistogramSet()
        halves = (HistogramSet(), HistogramSet())
        reasons: dict[str, int] = {}
        for w in windows:
            ok.merge(HistogramSet.from_dict(w["ok"]))
            failed.merge(HistogramSet.from_dict(w["failed"]))
            for half, data in zip(halves, w["halves"], strict=True):
                half.merge(HistogramSet.from_dict(data))
            for reason, n in w["reasons"].items():
                reasons[reason] = reasons.get(reason, 0) + int(n)
        if late:
            missing = len(step.expected - set(step.windows))
            reasons[f"{missing} generator process(es) sent no window"] = missing
        seconds = sum(float(w["seconds"]) for w in windows) / len(windows) if windows else self.settings.steady_s
        opened = min((float(w["opened_wall"]) for w in windows), default=time.time() - seconds)
        closed = max((float(w["closed_wall"]) for w in windows), default=time.time())
        window = Window(
            offered=step.offered,
            seconds=seconds,
            ok=ok,
            failed=failed,
            reasons=reasons,
            dropped=sum(int(w["dropped"]) for w in windows),
            behind=sum(int(w["behind"]) for w in windows),
            generator_cpu=max((float(w["generator_cpu"]) for w in windows), default=0.0),
            server=self._server_over(opened, closed),
            halves=halves,
        )
        verdict = judge(window, self.slo, self.unit, self.settings.min_achieved)
        if late:
            verdict.passed = False
            verdict.kind = verdict.kind if verdict.kind != "pass" else "generator"
            verdict.reasons.append("a generator process sent no window in time")
        self.search.record(step.offered, window, verdict)
        record = self.search.steps[-1].to_dict(self.unit)
        p = record["latency_us"]
        logger.info(
            "mcpfast capacity: step %d at %s/s: %s (achieved %s/s, p50 %s µs, p99 %s µs)%s",
            step.index,
            f"{step.offered:,.0f}",
            verdict.label,
            f"{verdict.achieved:,.0f}",
            p["p50"],
            p["p99"],
            f": {'; '.join(verdict.reasons)}" if verdict.reasons else "",
        )

    def tick(self) -> tuple[int, float] | None:
        if self.finished:
            return None
        step = self.step
        if step is not None:
            done = step.expected <= set(step.windows)
            due = step.started + self.settings.step_s + SETTLE_MAX_S + WINDOW_GRACE_S
            if not done and time.monotonic() < due:
                return step.users, float(max(step.users, 1))
            self._judge(step, late=not done)
            self.step = None
        offered = self.search.next_rate(time.monotonic() - self.began)
        if offered is None:
            self.finish()
            return None
        return self._start(offered)

    # -- the end
    def result(self) -> dict[str, Any]:
        out = self.search.outcome
        steps = [s.to_dict(self.unit) for s in self.search.steps]
        return {
            "format": "mcpfast-capacity",
            "format_version": 1,
            "status": out.status if out else "running",
            "capacity": out.capacity if out else None,
            "last_good": out.last_good if out else None,
            "first_bad": out.first_bad if out else None,
            "why": out.why if out else None,
            "sentence": sentence(self.search, self.slo, self.unit),
            "unit": self.unit.label,
            "unit_names": sorted(self.unit.names) if self.unit.names is not None else None,
            "slo": [t.text for t in self.slo],
            "settings": {
                "start": self.settings.start,
                "max_rate": self.settings.max_rate,
                "resolution": self.settings.resolution,
                "warmup_s": self.settings.warmup_s,
                "steady_s": self.settings.steady_s,
                "max_time_s": self.settings.max_time_s,
                "min_achieved": self.settings.min_achieved,
                "stop_on_failure": self.settings.stop_on_failure,
            },
            "host": getattr(self.environment, "host", None),
            "server_pid": self.probe.pid,
            "server_metrics": self.probe.metrics if self.probe.has_metrics else None,
            "elapsed_s": time.monotonic() - self.began,
            "steps": steps,
        }

    def finish(self) -> None:
        self.finished = True
        self.sampler.kill(block=False)
        if self.local is not None:
            self.local.stop()
        result = self.result()
        out = option(self.environment, "mcp_capacity_out")
        if out:
            self.written = write(Path(out), result)
        print(f"mcpfast capacity: {result['sentence']}", flush=True)
        status = result["status"]
        code = 0 if status in ("found", "at_least", "bracket") else (EXIT_INCONCLUSIVE if status == "inconclusive" else 1)
        if not getattr(self.environment, "process_exit_code", None):
            self.environment.process_exit_code = code


CSV_COLUMNS = (
    "step",
    "phase",
    "offered",
    "achieved",
    "requests",
    "failures",
    "p50_us",
    "p90_us",
    "p99_us",
    "p99.9_us",
    "max_us",
    "generator_cpu",
    "server_cpu",
    "server_rss_bytes",
    "sessions_open",
    "verdict",
    "reasons",
)


def write(folder: Path, result: dict[str, Any]) -> Path:
    """``capacity.json`` and ``capacity.csv`` of a search (the folder is created)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "capacity.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    with open(folder / "capacity.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        for s in result["steps"]:
            p = s["latency_us"]
            writer.writerow(
                [
                    s["step"],
                    s["phase"],
                    f"{s['offered']:.3f}",
                    f"{s['achieved']:.3f}",
                    s["requests"],
                    s["failures"],
                    p["p50"],
                    p["p90"],
                    p["p99"],
                    p["p99.9"],
                    s["max_us"],
                    f"{s['generator_cpu']:.3f}",
                    "" if s["server_cpu"] is None else f"{s['server_cpu']:.3f}",
                    s["server_rss_bytes"] if s["server_rss_bytes"] is not None else "",
                    s["sessions_open"] if s["sessions_open"] is not None else "",
                    s["verdict"],
                    "; ".join(s["reasons"]),
                ]
            )
    return path


def progress(environment: Any) -> dict[str, Any] | None:
    """The search so far, in ``capacity.json``'s shape (its steps judged until now), on the
    process that runs the shape; None where no search runs (a worker, or another shape)."""
    controller = getattr(environment, CONTROLLER_ATTR, None)
    return controller.result() if isinstance(controller, Controller) else None


class CapacityShape(LoadTestShape):
    """The capacity search (see the module doc); the rate, not the user count, is what it sets."""

    def tick(self) -> tuple[int, float] | None:
        environment = self.runner.environment if self.runner is not None else None
        if environment is None:
            return None
        controller = getattr(environment, CONTROLLER_ATTR, None)
        if controller is None:
            try:
                controller = Controller(environment, self)
            except (ValueError, ThresholdError) as exc:
                logger.error("mcpfast capacity: %s", exc)
                print(f"mcpfast capacity: {exc}", flush=True)
                environment.process_exit_code = 2
                return None
            setattr(environment, CONTROLLER_ATTR, controller)
        return controller.tick()


def _on_init(environment: Any, **_kw: Any) -> None:
    """Every process: the step and window messages; the open model from the start (the first
    step's rate until the shape sends it), so no user ever sends in the closed model."""
    runner = environment.runner
    parsed = getattr(environment, "parsed_options", None)
    if parsed is not None and not float(getattr(parsed, "mcp_rate", 0) or 0):
        parsed.mcp_rate = float(option(environment, "mcp_capacity_start"))
    if isinstance(runner, WorkerRunner):
        step_runner = StepRunner(environment, lambda payload: runner.send_message(WINDOW_MESSAGE, payload))

        def on_step(environment: Any, msg: Any, **_kw: Any) -> None:
            step_runner.on_step(msg.data)

        runner.register_message(STEP_MESSAGE, on_step)
        environment.events.test_stop.add_listener(lambda **_kw: step_runner.stop())
    elif isinstance(runner, MasterRunner):

        def on_window(environment: Any, msg: Any, **_kw: Any) -> None:
            controller = getattr(environment, CONTROLLER_ATTR, None)
            if controller is not None:
                controller.add_window(msg.node_id, msg.data)

        runner.register_message(WINDOW_MESSAGE, on_window)


@functools.cache  # once per process
def register() -> None:
    """The shape's options and its ``init`` listener (the shape's locustfile calls it)."""
    add_options(CAPACITY)
    locust.events.init.add_listener(_on_init)
