"""Locust drives the native load engine (``mcpfast._core.NativeEngine``).

With ``--mcp-engine native`` (the default when the compiled core has the engine) a family user
sends nothing itself: Locust's user count is the engine's concurrency.  Each user that starts
adds one to the engine's target (one HTTP session with its own keep-alive connection, or one
stdio child process), each user that stops takes one away, so spawn rate, ``--run-time``, stop,
``LoadTestShape`` classes, ``--processes N`` and master/worker work unchanged.

One :class:`NativeDriver` per Locust process and family, made by the first user that starts
(after ``--processes`` forked, so no engine thread crosses a fork).  No greenlet waits on the
engine: every call but ``stop`` returns in microseconds, and

* once a second :meth:`NativeDriver.poll` drains the engine's per-thread windows and feeds them
  into Locust's own statistics in bulk (:func:`feed_locust`: ``StatsEntry.extend`` per name,
  failures merged into ``stats.errors`` under ``StatsError.create_key``), and the same rows'
  µs buckets into :mod:`mcpfast.locust.stats` (one source, so both count the same requests);
* urgent events (a stdio child that exited, a connection error, a fatal engine error) wake a
  greenlet through ``gevent.socket.wait_read(engine.fileno())``;
* ``stop`` (blocking, GIL released) runs in the hub's thread pool, from the ``test_stop`` hook of
  :class:`mcpfast.locust.stats.McpStats`, followed by the final drain, so every output of the
  run (console, CSV, HTML, ``_histograms.json``/``.hlog``, the master's merge) counts the same
  requests.

Locust's CPU monitor reads the whole process (engine threads included) and would warn at 90 %
of one core while the engine is merely busy; the driver replaces it with one that reports the
Python side only (process CPU minus the engine threads' ``status()["cpu_s"]``).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import gevent
import locust  # first: Locust's import gevent-patches the stdlib
from locust.stats import RequestStats, StatsEntry, StatsError

from mcpfast import core
from mcpfast.locust import oauth

if TYPE_CHECKING:
    from mcpfast._core import DrainRow, EngineConfig, EngineFamily, MixItem
else:  # the compiled classes, or None with the pure-Python core (config_for refuses to run then)
    from mcpfast.core import EngineConfig, MixItem
from mcpfast.locust import stats as mstats
from mcpfast.locust.options import option, reach, stream_arguments

__all__ = ["FAMILIES", "NativeDriver", "config_for", "driver", "feed_locust"]

logger = logging.getLogger(__name__)

FAMILIES = ("tools_call", "handshake", "session_churn", "sse_streaming", "mixed", "hold", "discover", "tasks", "agents")
POLL_INTERVAL = 1.0  # s between drains (the issue: once a second per name)
STOP_GRACE = 2.0  # s the engine may spend finishing in-flight requests at stop
MIXED_WEIGHTS = ((None, 10), ("tools/list", 3))  # the Python mixed user's tool/list task weights


# -- Locust statistics in bulk ---------------------------------------------------------------------
def feed_locust(stats: RequestStats, rows: Iterable[DrainRow], now: float | None = None) -> int:
    """Add drained engine windows to Locust's ``RequestStats``; returns the requests added.

    One ``StatsEntry`` per row is filled from the window and merged with ``extend`` into the
    named entry and into ``stats.total`` (what ``log_request`` would have done request by
    request).  Response times keep Locust's unit (ms) and bucketing: each µs bucket goes through
    ``locust.stats.bucket_response_time`` - looked up at call time, so a locustfile that replaces
    it (custom bucketing) is honoured.  Failure reasons become ``StatsError`` rows keyed like
    Locust's own (``StatsError.create_key``), so the Failures tab and ``_failures.csv`` show them.
    """
    bucket = locust.stats.bucket_response_time
    now = time.time() if now is None else now
    added = 0
    for row in rows:
        rtype, name, num, num_fail = row.request_type, row.name, row.num_requests, row.num_failures
        if not num and not num_fail:
            continue
        window = StatsEntry(stats, name, rtype, use_response_times_cache=False)
        per_second = row.per_second
        window.start_time = min(window.start_time, min((s for s, _, _ in per_second), default=now))
        window.num_requests = num
        window.num_none_requests = 0  # every request has a latency
        window.num_failures = num_fail
        # Locust annotates these int; log_request sums float milliseconds into them, as here
        window.total_response_time = row.total_ms  # type: ignore[assignment]
        window.min_response_time = row.min_ms  # type: ignore[assignment]
        window.max_response_time = row.max_ms  # type: ignore[assignment]
        window.total_content_length = row.content_length
        window.last_request_timestamp = row.last_ts
        times = window.response_times
        for us, count in row.buckets:
            times[bucket(us / 1000.0)] += count
        reqs, fails = window.num_reqs_per_sec, window.num_fail_per_sec
        for second, n, f in per_second:
            reqs[second] += n
            if f:
                fails[second] += f
        stats.entries[(name, rtype)].extend(window)
        stats.total.extend(window)
        for reason, count in row.errors:
            key = StatsError.create_key(rtype, name, reason)
            entry = stats.errors.get(key)
            if entry is None:
                entry = stats.errors[key] = StatsError(rtype, name, reason)
            entry.occurrences += count
            if entry.first_seen is None:
                entry.first_seen = now
            entry.last_seen = now
        added += num
    return added


# -- engine configuration ----------------------------------------------------------------------------
def config_for(environment: Any, family: str, host: str | None, mix: list[MixItem] | None = None, **fields: Any) -> EngineConfig:
    """The engine's config for ``family`` from the ``--mcp-*`` options, ``--host`` and this
    process's share of ``--mcp-rate``; ``mix`` replaces the ``mixed`` family's own (a scenario's
    user class, an agent class's steps); ``fields`` are more of the engine's fields (an agent
    class's think time...).

    Raises:
        RuntimeError: the compiled core (the engine) is not in use.
        ValueError: an unknown family, no ``--host`` over HTTP, or a value the engine refuses
            (the message names the field).
    """
    if family not in FAMILIES:
        raise ValueError(f"no native engine family {family!r} (one of {', '.join(FAMILIES)})")
    core.require_native_engine()
    command = option(environment, "mcp_command")
    tool = str(option(environment, "mcp_tool"))
    args = json.loads(option(environment, "mcp_tool_args"))
    if family == "mixed" and mix is None:
        mix = [
            MixItem(tool=tool, arguments=args, weight=w) if method is None else MixItem(method=method, weight=w)
            for method, w in MIXED_WEIGHTS
        ]
    # how the engine reaches the server: child processes, or the URL as the options aim and secure it
    where: dict[str, Any]
    if command:
        where = {
            "transport": "stdio",
            "command": shlex.split(command),
            "request_type": "mcp-stdio",
            "inflight_per_process": int(option(environment, "mcp_stdio_inflight")),
        }
    else:
        if not host:
            raise ValueError("the native engine needs --host (the MCP endpoint URL, e.g. http://127.0.0.1:8000/mcp)")
        worker = getattr(mstats.get(environment), "worker_index", None) or 0
        where = {"transport": "http", "url": host, "request_type": "mcp-http", **reach(environment).engine_fields(worker)}
        sources = [a.strip() for given in option(environment, "mcp_source_address") or () for a in given.split(",") if a.strip()]
        if sources:
            where["source_addresses"] = sources
        tokens = oauth.source(environment)
        if tokens is not None:
            where["bearer_tokens"] = [tokens.access_token]  # and each new one by set_bearer_tokens
    if family == "hold":
        where.update(hold_fields(environment))
    capabilities = json.loads(option(environment, "mcp_client_capabilities"))
    if family == "tasks":  # 2026-07-28, declaring the tasks extension, as the Python user does
        capabilities.setdefault("extensions", {})[TASKS_EXTENSION] = {}
        where["tasks_cancel_share"] = float(option(environment, "mcp_tasks_cancel_share"))
    schedule = mstats.get(environment).schedule
    version = str(option(environment, "mcp_protocol_version"))
    if family == "discover" and version in ("2026-07-28", "auto"):
        version = "2025-11-25"  # discover's handshake era, as the Python user's
    elif family == "tasks":
        version = "2026-07-28"
    return EngineConfig(
        family=cast("EngineFamily", family),
        protocol_version=version,
        client_capabilities=capabilities,
        tool=tool,
        arguments=args,
        mix=mix,
        stream_tool=str(option(environment, "mcp_stream_tool")),
        stream_arguments=stream_arguments(environment),
        churn_delete_share=float(option(environment, "mcp_churn_delete_share")),
        threads=int(option(environment, "mcp_engine_threads")),
        timeout_s=float(option(environment, "mcp_timeout")),
        # open model: this process's share of --mcp-rate, and one "late" for both engines
        rate=schedule.runner_rate if schedule.enabled else None,
        # this process's place among the workers sharing the rate: their arrivals interleave
        worker_index=schedule.worker_index,
        worker_count=schedule.worker_count,
        late_after_s=schedule.late_tolerance if schedule.enabled else None,
        **where,
        **fields,
    )


TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
HOLD_CLOCK_ATTR = "mcpfast_hold_clock"  # the environment's shared trigger clock file (mcpfast.locust.hold sets it)


def hold_fields(environment: Any) -> dict[str, Any]:
    """The ``hold`` family's engine fields: ``--mcp-hold-per-user`` GET streams per user (one
    session each), the fan-out trigger in the process that triggers (the first worker, or the
    only process), and, over several processes, the file the trigger's rounds go through."""
    stats = mstats.get(environment)
    trigger = option(environment, "mcp_hold_trigger") or None
    clock = getattr(environment, HOLD_CLOCK_ATTR, None) if stats.worker_count > 1 else None
    return {
        "hold_streams": int(option(environment, "mcp_hold_per_user")),
        "hold_trigger": trigger if trigger and not stats.worker_index else None,
        "hold_trigger_every_s": float(option(environment, "mcp_hold_trigger_every")),
        "hold_clock": clock,
        "hold_delete": False,  # as the Python users: the held sessions are left to the server
    }


# -- the driver ------------------------------------------------------------------------------------------
class NativeDriver:
    """One engine for one family in one Locust process; users are its concurrency."""

    def __init__(self, environment: Any, family: str, host: str | None) -> None:
        self.environment = environment
        self.family = family
        self.host = host
        self.pid = os.getpid()
        self.users = 0
        self.per_user = 1  # the engine's units (sessions, agents) each Locust user stands for
        self.engine: Any = None
        self.error: str | None = None
        self.last_status: dict[str, Any] = {}
        self._greenlets: list[Any] = []
        self.fanout: dict[str, Any] = {"triggers": 0, "rounds": []}  # hold: the engine's fan-out rounds
        self._late_seen = 0  # the engine's late / dropped arrivals already added to the pacer's counters
        self._dropped_seen = 0
        self._behind_seen = 0
        # requests and failures per name since the test started (for counters such as session churn's;
        # Locust's own tables are reset on a worker after every report)
        self.totals: dict[str, list[int]] = {}
        self._stopping = False
        self.stats = mstats.get(environment)
        self.stats.stop_hooks.append(self.finish)
        self.stats.reset_hooks.append(self.reset)
        self.stats.rate_hooks.append(self.set_rate)
        self.stats.tick_hooks.append(self.poll)

    def config(self) -> EngineConfig:
        """The engine's config (a scenario's driver overrides it with its user class's mix)."""
        return config_for(self.environment, self.family, self.host)

    def split_rows(self, rows: list[DrainRow]) -> list[DrainRow]:
        """The drained rows that are requests (all of them here; the agents' driver keeps its
        figures, which are not, out of Locust's tables)."""
        return rows

    # -- users ---------------------------------------------------------------------------------
    def add_user(self) -> bool:
        if self.engine is None and not self._start():
            return False
        self.users += 1
        self.engine.set_users(self.users * self.per_user)
        return True

    def remove_user(self) -> None:
        if self.users <= 0:
            return
        self.users -= 1
        if self.engine is not None and not self._stopping:
            self.engine.set_users(self.users * self.per_user)

    # -- lifecycle -------------------------------------------------------------------------------
    def _start(self) -> bool:
        if self.error is not None:
            return False
        from mcpfast.core import native_engine

        try:
            cfg = self.config()
            engine = native_engine(cfg)
            engine.start()
        except (ValueError, OSError, RuntimeError) as exc:
            self.error = str(exc)
            logger.error("mcpfast native engine (%s): %s", self.family, exc)
            self.environment.process_exit_code = 2  # a run that could not send fails visibly
            return False
        self.engine = engine
        tokens = oauth.source(self.environment)  # None over stdio
        if tokens is not None:
            tokens.listeners.append(self._new_token)
        self._stopping = False
        self.totals.clear()
        self._late_seen = self._dropped_seen = self._behind_seen = 0
        self._greenlets = [gevent.spawn(self._poll_loop), gevent.spawn(self._event_loop)]
        _replace_cpu_monitor(self.environment.runner)
        logger.info("mcpfast native engine started: family %s, %s, %d thread(s)", self.family, cfg.transport, cfg.threads)
        return True

    def set_rate(self, runner_rate: float) -> None:
        """A new open-model rate for this process (``McpStats.set_rate``): a new schedule now."""
        if self.engine is not None:
            self.engine.set_rate(runner_rate)

    def _new_token(self, token: str) -> None:
        if self.engine is not None:
            self.engine.set_bearer_tokens([token])

    def finish(self) -> None:
        """``test_stop`` hook: stop the engine (in the hub's thread pool) and drain the rest."""
        engine = self.engine
        if engine is None:
            return
        self._stopping = True
        for g in self._greenlets:
            g.kill(block=False)
        self._greenlets = []
        gevent.get_hub().threadpool.apply(engine.stop, (STOP_GRACE,))
        self.poll()
        self._events()
        self.stats.engine_cpu_s += float(self.last_status.get("cpu_s") or 0.0)
        self.engine = None
        self.users = 0
        tokens = oauth.source(self.environment)
        if tokens is not None and self._new_token in tokens.listeners:
            tokens.listeners.remove(self._new_token)

    def reset(self) -> None:
        """``reset_stats``: windows drained so far are dropped with Locust's tables, histograms restart."""
        if self.engine is not None:
            self.engine.drain()
            self.engine.reset()
        self.totals.clear()

    # -- polling -----------------------------------------------------------------------------------
    def _poll_loop(self) -> None:
        while True:
            gevent.sleep(POLL_INTERVAL)
            self.poll()

    def poll(self) -> int:
        engine = self.engine
        if engine is None:
            return 0
        rows = self.split_rows(engine.drain())
        for row in rows:
            t = self.totals.setdefault(row.name, [0, 0])
            t[0] += row.num_requests
            t[1] += row.num_failures
        added = feed_locust(self.environment.stats, rows)
        for hook in self.stats.drain_hooks:
            hook(rows)  # e.g. --otel: the same rows, so its counts are the tables'
        if self._invalid_token(rows):
            tokens = oauth.source(self.environment)
            if tokens is not None:
                tokens.invalidate_current(min_age=2 * POLL_INTERVAL)
        # the µs histograms from the very rows Locust's tables got (never from engine.histograms(),
        # whose cumulative counts know nothing of what was drained): an empty drain adds nothing to either
        self._feed_window_histograms(rows)
        self.last_status = engine.status()
        if self.family == "hold":
            self.fanout = engine.fanout()
        self._feed_open_model(rows, self.last_status)
        return added

    @staticmethod
    def _invalid_token(rows: Iterable[DrainRow]) -> bool:
        return any(reason.startswith("http 401 invalid_token") for row in rows for reason, _ in row.errors)

    def succeeded(self, name: str) -> int:
        num, failed = self.totals.get(name, (0, 0))
        return num - failed

    def failed(self, name: str) -> int:
        return self.totals.get(name, (0, 0))[1]

    def _feed_window_histograms(self, rows: Iterable[DrainRow]) -> None:
        """Rows with ``failed_buckets``: successes are the buckets minus the failures'."""
        for row in rows:
            rtype, name, buckets, failed_buckets = row.request_type, row.name, row.buckets, row.failed_buckets
            failed_counts: dict[int, int] = dict(failed_buckets)
            if failed_counts:
                h = self.stats.histogram(rtype, name, failed=True)
                for us, count in failed_buckets:
                    h.record(us, count)
            h = self.stats.histogram(rtype, name)
            for us, count in buckets:
                ok = count - failed_counts.get(us, 0)
                if ok:
                    h.record(us, ok)

    def _feed_open_model(self, rows: Iterable[DrainRow], status: dict[str, Any]) -> None:
        """Open model: the engine's send lag (actual minus intended send time) into the
        pacer's lag histogram and ``sent`` count, as the Python pacer records them; its late and
        dropped arrivals into the pacer's counters; the service time (actual send to end) into
        ``McpStats.service`` (``service_histograms`` in the JSON)."""
        schedule = self.stats.schedule
        for row in rows:
            rtype, name, service, lag = row.request_type, row.name, row.service_buckets, row.lag_buckets
            for us, count in lag:
                schedule.lag.record(us, count)
                schedule.sent += count
            if service:
                h = self.stats.service.get(rtype, name)
                for us, count in service:
                    h.record(us, count)
        late, dropped = int(status.get("late") or 0), int(status.get("dropped") or 0)
        behind = int(status.get("behind") or 0)
        schedule.late += late - self._late_seen
        schedule.dropped += dropped - self._dropped_seen
        schedule.behind += behind - self._behind_seen
        self._late_seen, self._dropped_seen, self._behind_seen = late, dropped, behind

    def _event_loop(self) -> None:
        from gevent.socket import wait_read

        fd = self.engine.fileno()
        while True:
            wait_read(fd)
            self._events()

    def _events(self) -> None:
        engine = self.engine
        if engine is None:
            return
        for kind, message in engine.events():
            if kind == "fatal":
                logger.error("mcpfast native engine: %s", message)
            elif kind in ("child_exited", "connect_error", "limit"):
                logger.warning("mcpfast native engine %s: %s", kind.replace("_", " "), message)
            else:
                logger.info("mcpfast native engine %s: %s", kind, message)


_ATTR = "_mcpfast_native"


def driver(environment: Any, family: str, host: str | None, key: str | None = None, factory: Any = None) -> NativeDriver:
    """This process's driver for ``family`` (made on first use; a fork gets its own); ``key``
    (default the family) tells several engines of one family apart, ``factory`` makes it."""
    drivers = getattr(environment, _ATTR, None)
    if drivers is None or drivers.get("pid") != os.getpid():
        drivers = {"pid": os.getpid()}
        setattr(environment, _ATTR, drivers)
    key = key or family
    d = drivers.get(key)
    if d is None:
        d = drivers[key] = (factory or NativeDriver)(environment, family, host)
    return d


def drivers(environment: Any) -> list[NativeDriver]:
    found = getattr(environment, _ATTR, None) or {}
    return [d for k, d in found.items() if k != "pid" and d.pid == os.getpid()]


# -- Locust's CPU warning ------------------------------------------------------------------------------
def engine_cpu_seconds(environment: Any) -> float:
    total = 0.0
    for d in drivers(environment):
        if d.engine is not None:
            total += float(d.engine.status().get("cpu_s") or 0.0)
        else:
            total += float(d.last_status.get("cpu_s") or 0.0)
    return total


def _replace_cpu_monitor(runner: Any) -> None:
    """Swap Locust's CPU monitor for one that leaves the engine's threads out (once per runner)."""
    if runner is None or getattr(runner, "_mcpfast_cpu_monitor", False):
        return
    runner._mcpfast_cpu_monitor = True
    group = getattr(runner, "greenlet", None)
    for g in list(group or ()):
        run = getattr(g, "_run", None)
        if getattr(run, "__name__", "") == "monitor_cpu_and_memory" and getattr(run, "__self__", None) is runner:
            g.kill(block=False)
            break
    else:
        return
    assert group is not None  # the loop found the monitor in it
    group.spawn(_python_cpu_monitor, runner)


def _python_cpu_monitor(runner: Any) -> None:
    import psutil
    from locust.runners import CPU_MONITOR_INTERVAL, CPU_WARNING_THRESHOLD

    process = psutil.Process()
    environment = runner.environment
    last_wall, last_cpu, last_engine = time.monotonic(), _process_cpu(process), engine_cpu_seconds(environment)
    while True:
        gevent.sleep(CPU_MONITOR_INTERVAL)
        wall, cpu, engine = time.monotonic(), _process_cpu(process), engine_cpu_seconds(environment)
        # engine seconds restart with each engine: never let a new engine make the share negative
        engine_delta = engine - last_engine if engine >= last_engine else engine
        python_cpu = max((cpu - last_cpu) - engine_delta, 0.0)
        runner.current_cpu_usage = 100.0 * python_cpu / max(wall - last_wall, 1e-9)
        runner.current_memory_usage = process.memory_info().rss
        last_wall, last_cpu, last_engine = wall, cpu, engine
        if runner.current_cpu_usage > CPU_WARNING_THRESHOLD:
            environment.events.cpu_warning.fire(environment=environment, cpu_usage=runner.current_cpu_usage)
            if not runner.cpu_warning_emitted:
                logger.warning(
                    "CPU usage of Locust's Python thread above %s%% (the native engine's threads not counted): "
                    "it may fall behind in stats and the web UI",
                    CPU_WARNING_THRESHOLD,
                )
                runner.cpu_warning_emitted = True
        environment.events.usage_monitor.fire(
            environment=environment, cpu_usage=runner.current_cpu_usage, memory_usage=runner.current_memory_usage
        )


def _process_cpu(process: Any) -> float:
    t = process.cpu_times()
    return float(t.user + t.system)
