"""Wiring of the µs histograms, the open-model pacer and the schema validator into Locust.

Importing this module refuses a Locust outside the supported range (:mod:`mcpfast.locust.locust_shim`),
registers two listeners on Locust's global events (:func:`register`) and starts nothing:
``init_command_line_parser`` -> :func:`mcpfast.locust.options.add_arguments`, and ``init`` ->
:func:`install` (and the ``--csv`` files' final rows) for the environment Locust builds.
Environments built by hand (tests, library use) call :func:`install` themselves, after creating
their runner.

Timing never comes from Locust's ``request`` event (it carries float milliseconds and Locust's own
statistics round them).  Clients call :meth:`McpStats.record` (or the module-level
:func:`record`) with integer microseconds, measured from the intended send time when the
open-model pacer is on, and fire Locust's ``request`` event separately for its own tables
(:meth:`McpStats.report` does both).

Distributed runs (``--master``/``--worker`` or ``--processes N``): each worker keeps *delta*
histograms and counters, piggy-backs them on Locust's periodic ``report_to_master`` (every 3 s)
and sends a final delta in a ``mcpfast_histograms`` message from its ``test_stop`` listener.
ZeroMQ keeps one worker's messages in order, so on a plain stop the final delta reaches the master
before the worker's ``client_stopped``, i.e. before the master's own ``test_stop``.  On
``--run-time``/quit the master fires ``test_stop`` before telling workers to quit; then the output
is written as soon as the last expected worker's final delta arrives, or at ``quitting`` at the
latest (then flagged ``"complete": false``).  Merging is bucket-wise addition, hence exact.

A client (the future McpHttpUser / McpStdioUser) uses it like this::

    stats = mcpfast.locust.stats.get(self.environment)      # once, e.g. in on_start
    intended = stats.pacer.wait()                            # open model: sleeps until the slot
    ...send the request, read the reply...                   # closed model: returns now
    elapsed_us = int((time.perf_counter() - intended) * 1_000_000)
    stats.validator(protocol_version).check(reply, method="tools/call")  # may raise SchemaViolation
    stats.report("mcp-http", "tools/call:echo", elapsed_us, len(body), exception)

At test stop, the master or the local runner writes ``<prefix>_histograms.json``, the
HdrHistogram interval log ``<prefix>_histograms.hlog`` (per-second deltas of every key, see
:mod:`mcpfast.locust.hlog`) and the page ``<prefix>_report.html`` (:mod:`mcpfast.locust.report_page`;
not with ``--mcp-no-report``) and logs a percentile table; ``<prefix>`` is ``--mcp-histogram-out``,
else the ``--csv`` prefix; without either nothing is written (the table is only logged).

The native engine (:mod:`mcpfast.locust.native`) feeds the same histograms from its drained
windows and registers a ``stop_hooks`` entry, run first at ``test_stop``, so its final drain is in
every output.  Locust's ``--csv`` files get their final rows from
:mod:`mcpfast.locust.locust_shim` (installed from ``init``), so they count what the console counts.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Iterable
from typing import Any, Protocol

import locust  # first: Locust's import gevent-patches the stdlib, before anything else imports it
from locust.runners import MasterRunner, WorkerRunner

from mcpfast.client.validate import Validator
from mcpfast.locust import locust_shim, thresholds
from mcpfast.locust.histogram import Histogram, HistogramSet
from mcpfast.locust.hlog import IntervalLog, tag_of
from mcpfast.locust.options import add_arguments, option
from mcpfast.locust.pacing import DEFAULT_LATE_TOLERANCE, DEFAULT_MAX_LAG, OpenModelSchedule, Pacer

__all__ = [
    "FORMAT",
    "REPORT_KEY",
    "TABLE_PERCENTILES",
    "McpStats",
    "Part",
    "get",
    "install",
    "output_prefix",
    "record",
    "render_table",
    "runner_kind",
]

logger = logging.getLogger(__name__)

FORMAT = "mcpfast-histograms"
FORMAT_VERSION = 1
REPORT_KEY = "mcpfast"  # key in the report_to_master payload
FINAL_MESSAGE = "mcpfast_histograms"  # worker -> master, final delta at test_stop
TOPOLOGY_MESSAGE = "mcpfast_topology"  # master -> worker, index and count at test_start
TABLE_PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)
COUNTER_KEYS = ("pacer.sent", "pacer.late", "pacer.dropped", "pacer.behind", "validate.seen", "validate.checked", "validate.violations")


class Part(Protocol):
    """A block of ``<prefix>_histograms.json`` a family keeps beside the histograms (the agents'
    figures), under its name: a worker sends its deltas with its reports, the master merges them."""

    def reset(self) -> None:
        """The test starts, or Locust's statistics are reset."""

    def take_delta(self, final: bool) -> dict[str, Any] | None:
        """A worker's figures since its last report (None: nothing to send)."""

    def merge(self, client_id: str, data: dict[str, Any]) -> None:
        """A worker's delta, on the master."""

    def to_dict(self, duration: float | None) -> dict[str, Any]:
        """The block of the output (this process's figures, or the workers' merged)."""

    def lines(self, data: dict[str, Any]) -> list[str]:
        """Lines for the console after the percentile table, from the block."""


def runner_kind(runner: Any) -> str:
    """``master``, ``worker`` or ``local`` (a runner of neither kind, or none)."""
    if isinstance(runner, MasterRunner):
        return "master"
    if isinstance(runner, WorkerRunner):
        return "worker"
    return "local"


class McpStats:
    """Per-environment measurement state; one per Locust process (master, worker or local)."""

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.ok = HistogramSet()  # successful requests, µs
        self.failed = HistogramSet()  # failed requests, µs
        # open model, native engine: service time (actual send to end), µs; the latency in
        # ``ok`` runs from the intended send time and the send lag goes to ``schedule.lag``
        self.service = HistogramSet()
        self.schedule = OpenModelSchedule(0.0, late_tolerance=DEFAULT_LATE_TOLERANCE, max_lag=DEFAULT_MAX_LAG)
        self.pacer = Pacer(self.schedule)
        self.validators: dict[str, Validator] = {}
        self.worker_index = 0
        self.worker_count = 1
        self.topology_received = False  # worker: got index/count from the master for this test
        # counters and lag merged from workers (master); local values are added at output time
        self.remote_counters: dict[str, int] = dict.fromkeys(COUNTER_KEYS, 0)
        self.remote_lag = Histogram()
        self._reported: dict[str, int] = dict.fromkeys(COUNTER_KEYS, 0)  # worker: counters already sent
        self.workers_seen: set[str] = set()
        self.workers_final: set[str] = set()
        self._expected: set[str] | None = None  # master: workers whose final delta is awaited
        self.start_time: float | None = None
        self.stop_time: float | None = None
        # generator CPU: this process (every thread, the native engine's included) over the test,
        # and the engine threads' share; a master adds the workers' final figures
        self._cpu_start = 0.0
        self._thread_cpu_start = 0.0
        self.python_thread_cpu_s: float | None = None
        self.cpu_s: float | None = None
        self.engine_cpu_s = 0.0
        self.remote_cpu: dict[str, dict[str, float]] = {}
        self.written_path: str | None = None
        self.hlog_path: str | None = None
        self._installed_messages = False
        # interval log (.hlog): per-key deltas taken once a second by the local/master process
        self.intervals = IntervalLog()
        self._snapshots: dict[tuple[bool, str, str], Histogram] = {}
        self._last_tick: float | None = None
        self._ticker: Any = None
        # callables run first at test_stop, before any output (the native engine's final drain)
        self.stop_hooks: list[Any] = []
        self.reset_hooks: list[Any] = []  # run on reset_stats (the native engine's reset())
        # callables given every drained window of the native engine (the rows Locust's tables got)
        self.drain_hooks: list[Any] = []
        # the open model's rate set while running (the capacity search's steps) instead of
        # --mcp-rate; each native engine of the process follows it through ``rate_hooks``
        self.rate_override: float | None = None
        # run first by each tick of the interval log (the native engines' drains)
        self.tick_hooks: list[Any] = []
        self.rate_hooks: list[Any] = []
        # blocks of the JSON output a family keeps (the agents' figures): each a :class:`Part`,
        # its deltas riding on the workers' reports, merged on the master
        self.parts: dict[str, Part] = {}

    # -- client-facing API (hot path) -------------------------------------------------------
    def record(
        self,
        request_type: str,
        name: str,
        elapsed_us: int,
        failed: bool = False,
        expected_interval_us: int | None = None,
    ) -> None:
        """Record one request's latency in integer µs.

        ``expected_interval_us`` applies HdrHistogram's coordinated-omission back-fill (for
        closed-model users with a known pacing); leave it None when the latency is already
        measured from the pacer's intended send time.
        """
        target = self.failed if failed else self.ok
        names = target._by_type.get(request_type)
        h = names.get(name) if names is not None else None
        if h is None:
            h = target.get(request_type, name)
        if expected_interval_us:
            h.record_corrected(elapsed_us, expected_interval_us)
        else:
            h.record(elapsed_us)

    def histogram(self, request_type: str, name: str, failed: bool = False) -> Histogram:
        """The live histogram for one key, for callers that cache it to skip the key lookups.

        Reports to the master and test starts reset histograms in place, so a cached reference
        stays valid for the whole process.
        """
        return (self.failed if failed else self.ok).get(request_type, name)

    def report(
        self,
        request_type: str,
        name: str,
        elapsed_us: int,
        response_length: int = 0,
        exception: BaseException | None = None,
        context: dict | None = None,
    ) -> None:
        """:meth:`record` plus Locust's ``request`` event (ms float) for Locust's own tables."""
        self.record(request_type, name, elapsed_us, failed=exception is not None)
        self.environment.events.request.fire(
            request_type=request_type,
            name=name,
            response_time=elapsed_us / 1000.0,
            response_length=response_length,
            exception=exception,
            context=context or {},
        )

    def validator(self, version: str) -> Validator:
        """The (per process, per version) sampled validator, share from ``--mcp-validate-share``."""
        v = self.validators.get(version)
        if v is None:
            v = self.validators[version] = Validator(float(option(self.environment, "mcp_validate_share")), version)
        return v

    # -- counters ---------------------------------------------------------------------------------
    def local_counters(self) -> dict[str, int]:
        out = dict.fromkeys(COUNTER_KEYS, 0)
        out["pacer.sent"] = self.schedule.sent
        out["pacer.late"] = self.schedule.late
        out["pacer.dropped"] = self.schedule.dropped
        out["pacer.behind"] = self.schedule.behind
        for v in self.validators.values():
            out["validate.seen"] += v.seen
            out["validate.checked"] += v.checked
            out["validate.violations"] += v.violations
        return out

    def counters(self) -> dict[str, int]:
        local = self.local_counters()
        return {k: local[k] + self.remote_counters.get(k, 0) for k in COUNTER_KEYS}

    def finish_engines(self) -> None:
        """Run the ``stop_hooks`` (the native engine: stop, final drain).  Idempotent: a family's
        ``test_stop`` listener that reads the engine's counts calls it first."""
        for hook in list(self.stop_hooks):
            hook()

    def lag_histogram(self) -> Histogram:
        return self.remote_lag.copy().merge(self.schedule.lag)

    # -- lifecycle ----------------------------------------------------------------------------------
    def reset(self) -> None:
        self.ok.reset()
        self.failed.reset()
        self.service.reset()
        self.schedule.reset_counters()
        for v in self.validators.values():
            v.reset_counters()
        self.remote_counters = dict.fromkeys(COUNTER_KEYS, 0)
        self.remote_lag.reset()
        self._reported = dict.fromkeys(COUNTER_KEYS, 0)
        self.workers_seen.clear()
        self.workers_final.clear()
        self._expected = None
        self.start_time = time.time()
        self.stop_time = None
        self._cpu_start = time.process_time()
        self._thread_cpu_start = time.thread_time()  # Locust's Python thread (the gevent hub's)
        self.python_thread_cpu_s = None
        self.cpu_s = None
        self.engine_cpu_s = 0.0
        self.remote_cpu = {}
        self.written_path = None
        self.hlog_path = None
        self.intervals.reset(self.start_time)
        self._snapshots.clear()
        self._last_tick = self.start_time
        for part in self.parts.values():
            part.reset()

    def reset_histograms(self) -> None:
        """Locust's reset_stats (``--reset-stats``, the web UI's reset): the µs histograms and the
        interval log start again with Locust's own tables."""
        self.ok.reset()
        self.failed.reset()
        self.service.reset()
        self._snapshots.clear()
        now = time.time()
        self.intervals.reset(now)
        self._last_tick = now
        for hook in list(self.reset_hooks):
            hook()
        for part in self.parts.values():
            part.reset()

    # -- interval log --------------------------------------------------------------------------------
    def tick(self, now: float | None = None) -> None:
        """Add every key's histogram since the previous tick to the interval log (exact deltas:
        the intervals of a key sum to its final histogram)."""
        if now is None:
            # this process's native engines drained first: what they completed until now
            # enters this interval, not the next one (they drain on their own once a second)
            for hook in list(self.tick_hooks):
                hook()
            now = time.time()
        start = self._last_tick if self._last_tick is not None else (self.start_time or now)
        for failed, hset in ((False, self.ok), (True, self.failed)):
            for (request_type, name), h in hset.items():
                key = (failed, request_type, name)
                prev = self._snapshots.get(key)
                if prev is None:
                    prev = self._snapshots[key] = Histogram()
                if h.total_count == prev.total_count:
                    continue
                delta = h.minus(prev)
                prev.merge(delta)
                self.intervals.add(tag_of(request_type, name, failed), start, now, delta)
        self._last_tick = now

    def start_ticker(self, interval: float = 1.0) -> None:
        import gevent

        self.stop_ticker()

        def loop() -> None:
            while True:
                gevent.sleep(interval)
                self.tick()

        self._ticker = gevent.spawn(loop)

    def stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.kill(block=False)
            self._ticker = None

    def configure_pacer(self) -> None:
        """(Re)configure the schedule from ``--mcp-rate`` and this runner's place."""
        runner = self.environment.runner
        kind = runner_kind(runner)
        if kind == "worker" and not self.topology_received:
            # no topology message (e.g. old master): best effort from what the worker knows
            count = int(getattr(self.environment.parsed_options, "expect_workers", 1) or 1)
            index = max(int(getattr(runner, "worker_index", 0)), 0)
            self.worker_count, self.worker_index = count, index % count
        self.schedule.configure(self.target_rate(), self.worker_index, self.worker_count)

    def target_rate(self) -> float:
        """The open model's rate for the whole run (every worker): the one set while running,
        else ``--mcp-rate``; 0 is the closed model."""
        if self.rate_override is not None:
            return self.rate_override
        return float(option(self.environment, "mcp_rate"))

    def set_rate(self, rate: float) -> None:
        """Change the open model's rate while running: this runner's share goes to the Python
        pacer and to every native engine of the process, each starting a new schedule now."""
        if not rate > 0:
            raise ValueError(f"an open model's rate must be above 0, got {rate!r}")
        self.rate_override = float(rate)
        self.schedule.configure(self.rate_override, self.worker_index, self.worker_count)
        for hook in list(self.rate_hooks):
            hook(self.schedule.runner_rate)

    # -- worker side ---------------------------------------------------------------------------------
    def take_delta(self, final: bool = False) -> dict[str, Any] | None:
        """Payload for the master: histograms since the last report, then reset in place."""
        current = self.local_counters()
        counters = {k: current[k] - self._reported[k] for k in COUNTER_KEYS}
        self._reported = current
        lag = self.schedule.lag
        payload: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "ok": self.ok.take_delta(),
            "failed": self.failed.take_delta(),
            "service": self.service.take_delta(),
            "counters": {k: n for k, n in counters.items() if n},
            "lag": lag.to_dict() if lag.total_count else None,
            "final": final,
        }
        parts = {name: data for name, part in self.parts.items() if (data := part.take_delta(final)) is not None}
        if parts:
            payload["parts"] = parts
        if final and self.cpu_s is not None:
            payload["cpu"] = self._own_cpu()
        if lag.total_count:
            lag.reset()
        empty = not (
            payload["ok"]["histograms"]
            or payload["failed"]["histograms"]
            or payload["service"]["histograms"]
            or payload["counters"]
            or payload["lag"]
            or parts
        )
        if empty and not final:
            return None
        return payload

    # -- master side -----------------------------------------------------------------------------------
    def merge_payload(self, client_id: str, payload: dict[str, Any]) -> None:
        if payload.get("v") != FORMAT_VERSION:
            logger.warning("mcpfast: ignoring histogram payload of unknown format from %s", client_id)
            return
        self.workers_seen.add(client_id)
        self.ok.merge(HistogramSet.from_dict(payload["ok"]))
        self.failed.merge(HistogramSet.from_dict(payload["failed"]))
        if payload.get("service"):
            self.service.merge(HistogramSet.from_dict(payload["service"]))
        for key, n in payload.get("counters", {}).items():
            self.remote_counters[key] = self.remote_counters.get(key, 0) + int(n)
        if payload.get("lag"):
            self.remote_lag.merge(Histogram.from_dict(payload["lag"]))
        if payload.get("cpu"):
            self.remote_cpu[client_id] = payload["cpu"]
        for name, data in (payload.get("parts") or {}).items():
            part = self.parts.get(name)
            if part is not None:
                part.merge(client_id, data)
        if payload.get("final"):
            self.workers_final.add(client_id)
            if self._expected is not None and self._expected <= self.workers_final:
                self._expected = None
                self.write_output(complete=True)

    def missing_workers(self) -> list[str]:
        return sorted((self._expected or set()) - self.workers_final)

    def await_final(self, workers: Iterable[str]) -> None:
        """Master: write the output once every one of ``workers`` has sent its final delta."""
        expected = set(workers) | self.workers_final
        if expected <= self.workers_final:
            self._expected = None
            self.write_output(complete=True)
        else:
            self._expected = expected

    def flush_pending(self) -> str | None:
        """Master: if final deltas are still awaited, write what has arrived (``complete: false``)."""
        if self._expected is None:
            return None
        path = self.write_output(complete=False)
        self._expected = None
        return path

    # -- output ------------------------------------------------------------------------------------------
    def to_dict(self, complete: bool = True) -> dict[str, Any]:
        counters = self.counters()
        lag = self.lag_histogram()
        runner = self.environment.runner
        stop = self.stop_time or time.time()
        duration = (stop - self.start_time) if self.start_time else None
        rate = self.target_rate()

        def entries(hset: HistogramSet) -> list[dict[str, Any]]:
            out = []
            for (request_type, name), h in hset.items():
                if h.total_count:
                    out.append({"type": request_type, "name": name, "summary": summary(h), **h.to_dict()})
            return out

        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "unit": "us",
            "locust_version": locust.__version__,
            "mcpfast_version": _mcpfast_version(),
            "runner": runner_kind(runner),
            "workers": sorted(self.workers_seen) if self.workers_seen else None,
            "complete": complete,
            "missing_workers": self.missing_workers(),
            "host": getattr(self.environment, "host", None),
            "start_time": self.start_time,
            "stop_time": stop,
            "duration_s": duration,
            "latency_origin": "intended send time (open model)" if rate > 0 else "actual send time (closed model)",
            "tls_verification": "off (--mcp-insecure: any server certificate accepted)"
            if option(self.environment, "mcp_insecure")
            else "on",
            "pacer": {
                "target_rate": rate,
                "late_tolerance_s": self.schedule.late_tolerance,
                "max_lag_s": self.schedule.max_lag,
                "sent": counters["pacer.sent"],
                "late": counters["pacer.late"],
                "dropped": counters["pacer.dropped"],
                "behind": counters["pacer.behind"],
                "achieved_rate": (counters["pacer.sent"] / duration) if (rate > 0 and duration) else None,
                "lag_summary": summary(lag),
                "lag": lag.to_dict(),
            },
            "validation": {
                "share": float(option(self.environment, "mcp_validate_share")),
                "seen": counters["validate.seen"],
                "checked": counters["validate.checked"],
                "violations": counters["validate.violations"],
            },
            "generator": self.generator(duration),
            "histograms": entries(self.ok),
            "failed_histograms": entries(self.failed),
            # open model on the native engine: µs from the actual send to the end, per key
            "service_histograms": entries(self.service),
            **{name: part.to_dict(duration) for name, part in self.parts.items()},
        }

    def _own_cpu(self) -> dict[str, Any]:
        return {"cpu_s": self.cpu_s, "engine_cpu_s": self.engine_cpu_s, "python_thread_cpu_s": self.python_thread_cpu_s, "cores": _cores()}

    def generator(self, duration: float | None) -> dict[str, Any]:
        """CPU the load generator used over the test: every process that sent (this one, or on a
        master the workers' final figures), all threads (the native engine's included), against
        the cores those processes could run on."""
        procs = list(self.remote_cpu.values())
        if not procs and self.cpu_s is not None:
            procs = [self._own_cpu()]
        cpu = sum(float(p["cpu_s"]) for p in procs)
        cores = sum(int(p["cores"]) for p in procs) if procs else _cores()
        share = cpu / (duration * cores) if (procs and duration) else None
        return {
            "processes": len(procs),
            "cpu_s": round(cpu, 3),
            "engine_cpu_s": round(sum(float(p["engine_cpu_s"]) for p in procs), 3),
            "python_thread_cpu_s": round(sum(float(p.get("python_thread_cpu_s") or 0.0) for p in procs), 3),
            "cores": cores,
            "cpu_share": None if share is None else round(share, 4),
        }

    def output_path(self) -> str | None:
        prefix = output_prefix(self.environment)
        return None if prefix is None else prefix + "_histograms.json"

    def write_output(self, complete: bool = True) -> str | None:
        """Write ``<prefix>_histograms.json`` and ``<prefix>_histograms.hlog`` and log the
        percentile table; returns the JSON path (None without --csv / --mcp-histogram-out: then
        only the table is logged, nothing is written)."""
        if self.stop_time is None:
            self.stop_time = time.time()
        self.stop_ticker()
        self.tick(max(self.stop_time, self._last_tick or 0.0))
        path = self.output_path()
        data = self.to_dict(complete=complete)
        thresholds.apply(
            self.environment, data, list(option(self.environment, "mcp_threshold") or [])
        )  # --mcp-threshold: into the JSON, printed, exit code
        if path is not None:
            if directory := os.path.dirname(path):
                os.makedirs(directory, exist_ok=True)
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(data, fh, separators=(",", ":"))
            os.replace(tmp, path)
            self.hlog_path = self.intervals.write(path[: -len(".json")] + ".hlog")
            if not option(self.environment, "mcp_no_report"):
                self.write_page(path[: -len("_histograms.json")] + "_report.html", data)
        self.written_path = path
        if not complete:
            logger.warning("mcpfast: histograms written without the final data of workers %s", data["missing_workers"])
        table = render_table(self.ok, self.failed, data["pacer"], data["validation"])
        for name, part in self.parts.items():
            table = "\n".join([table, *part.lines(data[name])])
        where = f"{path} and {self.hlog_path}" if path else "not written (no --csv or --mcp-histogram-out)"
        _console(f"{table}\nmcpfast histograms: {where}")
        return path

    def failure_reasons(self) -> list[tuple[str, str, str, int]]:
        """Every failure Locust recorded in this run: (request type, name, reason, count)."""
        from locust.stats import StatsError

        runner = self.environment.runner
        errors = runner.stats.errors.values() if runner is not None else []
        return [(str(e.method), str(e.name), StatsError.parse_error(e.error), int(e.occurrences)) for e in errors]

    def write_page(self, path: str, data: dict[str, Any]) -> str | None:
        """``<prefix>_report.html``: the run's page (:mod:`mcpfast.locust.report_page`), from the
        figures just written and the failures' reasons Locust recorded; a page that cannot be
        drawn is logged, never the end of the run's files."""
        from mcpfast.locust.report_page import write_run_page

        try:
            return str(write_run_page(path, data, self.intervals, self.failure_reasons()))
        except Exception:  # the page is a view of the files: they are written already
            logger.exception("mcpfast: the report page %s could not be written", path)
            return None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _mcpfast_version() -> str | None:
    try:
        from mcpfast._version import __version__

        return __version__
    except Exception:  # pragma: no cover - version module is optional for this report
        return None


def _console(text: str) -> None:
    from locust.stats import console_logger

    for line in text.splitlines():
        console_logger.info(line)


def output_prefix(environment: Any) -> str | None:
    """``--mcp-histogram-out``, else the ``--csv`` prefix, else None (write no files)."""
    prefix = option(environment, "mcp_histogram_out")
    if not prefix:
        parsed = getattr(environment, "parsed_options", None)
        prefix = getattr(parsed, "csv_prefix", None)
    return str(prefix) if prefix else None


def summary(h: Histogram, percentiles: Iterable[float] = (50.0, 90.0, 99.0, 99.9, 99.99)) -> dict[str, Any]:
    ps = list(percentiles)
    values = h.percentiles(ps)
    out: dict[str, Any] = {
        "count": h.total_count,
        "min": h.min,
        "max": h.max,
        "mean": round(h.mean, 3),
        "stdev": round(h.stdev, 3),
    }
    for p, v in zip(ps, values, strict=True):
        out[f"p{p:g}"] = v
    if h.overflow:
        out["overflow"] = h.overflow
    return out


def _ms(us: int) -> str:
    return f"{us / 1000.0:.3f}"


def render_table(
    ok: HistogramSet,
    failed: HistogramSet | None = None,
    pacer: dict[str, Any] | None = None,
    validation: dict[str, Any] | None = None,
) -> str:
    """Percentile table (ms with µs resolution) per (type, name) plus an aggregated row."""
    failed = failed if failed is not None else HistogramSet()
    keys = sorted({k for k, h in ok.items() if h.total_count} | {k for k, h in failed.items() if h.total_count})
    name_w = max([len(f"{t} {n}") for t, n in keys] + [len("Aggregated"), 30])
    header = (
        f"{'Type Name':<{name_w}} {'count':>9} {'fail':>7} "
        + " ".join(f"{('p' + format(p, 'g')):>9}" for p in TABLE_PERCENTILES)
        + f" {'max':>10}"
    )
    lines = ["mcpfast latency percentiles (HDR, 1 µs resolution; values in ms)", header, "-" * len(header)]

    def row(label: str, h: Histogram, n_fail: int) -> str:
        values = h.percentiles(TABLE_PERCENTILES) if h.total_count else [0] * len(TABLE_PERCENTILES)
        cells = " ".join(f"{_ms(v):>9}" for v in values)
        return f"{label:<{name_w}} {h.total_count:>9} {n_fail:>7} {cells} {_ms(h.max):>10}"

    total = Histogram()
    total_fail = 0
    for request_type, name in keys:
        h = ok.get(request_type, name) if (request_type, name) in ok else Histogram()
        n_fail = failed.get(request_type, name).total_count if (request_type, name) in failed else 0
        total.merge(h)
        total_fail += n_fail
        lines.append(row(f"{request_type} {name}", h, n_fail))
    lines.append("-" * len(header))
    lines.append(row("Aggregated", total, total_fail))
    if pacer is not None:
        if pacer.get("target_rate"):
            lag = pacer.get("lag_summary") or {}
            lines.append(
                f"open model: target {pacer['target_rate']:g}/s, sent {pacer['sent']}, late {pacer['late']} "
                f"(> {pacer['late_tolerance_s'] * 1000:g} ms), dropped {pacer['dropped']} "
                f"(> {pacer['max_lag_s']:g} s behind), schedule lag p99 {_ms(lag.get('p99', 0))} ms"
            )
        else:
            lines.append("closed model (--mcp-rate 0): latency from actual send time")
    if validation is not None and validation.get("seen"):
        lines.append(
            f"schema checks: {validation['checked']} of {validation['seen']} messages "
            f"(share {validation['share']:g}), violations {validation['violations']}"
        )
    return "\n".join(lines)


# -- installation ---------------------------------------------------------------------------------------
_ATTR = "_mcpfast_stats"
_default: McpStats | None = None


def get(environment: Any) -> McpStats:
    """The environment's :class:`McpStats` (installing it if needed)."""
    stats = getattr(environment, _ATTR, None)
    return stats if stats is not None else install(environment)


def record(request_type: str, name: str, elapsed_us: int, failed: bool = False) -> None:
    """Record into the most recently installed environment (the process's only one under the CLI)."""
    stats = _default
    if stats is None:
        raise RuntimeError("mcpfast.locust.stats: no Locust environment installed yet")
    stats.record(request_type, name, elapsed_us, failed)


def _register_messages(stats: McpStats) -> None:
    runner = stats.environment.runner
    if runner is None or stats._installed_messages:
        return
    stats._installed_messages = True
    if isinstance(runner, MasterRunner):

        def on_final(environment: Any, msg: Any, **_kw: Any) -> None:
            stats.merge_payload(msg.node_id, msg.data)

        runner.register_message(FINAL_MESSAGE, on_final)
    elif isinstance(runner, WorkerRunner):

        def on_topology(environment: Any, msg: Any, **_kw: Any) -> None:
            stats.worker_index = int(msg.data["index"])
            stats.worker_count = max(int(msg.data["count"]), 1)
            stats.topology_received = True

        runner.register_message(TOPOLOGY_MESSAGE, on_topology)


def install(environment: Any) -> McpStats:
    """Attach :class:`McpStats` to an environment and register its listeners (idempotent).

    Call it after the environment's runner exists (the CLI path does, from ``init``); if the
    runner does not exist yet, message handlers are registered when ``init`` fires.
    """
    global _default
    existing = getattr(environment, _ATTR, None)
    if existing is not None:
        _register_messages(existing)
        return existing
    stats = McpStats(environment)
    setattr(environment, _ATTR, stats)
    _default = stats
    events = environment.events

    def on_init(environment: Any, **_kw: Any) -> None:
        _register_messages(stats)

    def on_test_start(environment: Any, **_kw: Any) -> None:
        stats.reset()
        runner = environment.runner
        if isinstance(runner, MasterRunner):
            active = runner.clients.ready + runner.clients.running + runner.clients.spawning
            ids = sorted((c.id for c in active), key=runner.get_worker_index)
            for index, client_id in enumerate(ids):
                runner.send_message(TOPOLOGY_MESSAGE, {"index": index, "count": len(ids)}, client_id)
        elif not isinstance(runner, WorkerRunner):
            stats.worker_index, stats.worker_count = 0, 1
        if not isinstance(runner, WorkerRunner):
            stats.start_ticker()
        stats.configure_pacer()

    def on_reset_stats(**_kw: Any) -> None:
        stats.reset_histograms()

    def on_spawning_complete(**_kw: Any) -> None:
        if getattr(stats.environment, "reset_stats", False):  # --reset-stats: Locust resets its tables
            stats.reset_histograms()

    def on_test_stop(environment: Any, **_kw: Any) -> None:
        runner = environment.runner
        stats.finish_engines()  # before anything is written or sent
        stats.stop_time = time.time()
        stats.cpu_s = time.process_time() - stats._cpu_start
        stats.python_thread_cpu_s = time.thread_time() - stats._thread_cpu_start
        if isinstance(runner, WorkerRunner):
            payload = stats.take_delta(final=True)
            runner.send_message(FINAL_MESSAGE, payload)
        elif isinstance(runner, MasterRunner):
            from locust.runners import STATE_MISSING

            connected = {c.id for c in runner.clients.all if c.state != STATE_MISSING}
            stats.await_final(connected | stats.workers_seen)
        else:
            stats.write_output(complete=True)

    def on_report_to_master(client_id: str, data: dict, **_kw: Any) -> None:
        payload = stats.take_delta(final=False)
        if payload is not None:
            data[REPORT_KEY] = payload

    def on_worker_report(client_id: str, data: dict, **_kw: Any) -> None:
        payload = data.get(REPORT_KEY)
        if payload:
            stats.merge_payload(client_id, payload)

    def on_quitting(environment: Any, **_kw: Any) -> None:
        if isinstance(environment.runner, MasterRunner):
            stats.flush_pending()

    events.init.add_listener(on_init)
    events.test_start.add_listener(on_test_start)
    events.test_stop.add_listener(on_test_stop)
    events.reset_stats.add_listener(on_reset_stats)
    events.spawning_complete.add_listener(on_spawning_complete)
    events.report_to_master.add_listener(on_report_to_master)
    events.worker_report.add_listener(on_worker_report)
    events.quitting.add_listener(on_quitting)
    _register_messages(stats)
    return stats


def _on_global_init(environment: Any, **_kw: Any) -> None:
    stats = install(environment)
    _check_reach(environment)
    if option(environment, "mcp_prometheus_port") is not None:
        from mcpfast.locust import prometheus  # prometheus-client is imported only when asked for

        prometheus.serve(environment, stats, runner_kind(environment.runner))
    if getattr(getattr(environment, "parsed_options", None), "otel", False):
        from mcpfast.locust import otel  # the OpenTelemetry SDK is imported only with --otel

        otel.install(environment, stats, runner_kind(environment.runner))
    # last: its test_stop listener reads the stats after the native engine's final drain
    locust_shim.install(environment)


def _check_reach(environment: Any) -> None:
    """The options that reach a deployed server, checked once before any load: a bad
    combination, a client key that is not its certificate's, a CA file that is no CA."""
    from mcpfast.locust.options import reach

    if getattr(environment, "parsed_options", None) is None:
        return
    try:
        how = reach(environment)
        host = str(getattr(environment, "host", None) or "")
        if host.startswith("https://"):
            how.ssl_context()
            if how.insecure:
                logger.warning("mcpfast: TLS without verification: any server certificate is accepted (--mcp-insecure)")
    except ValueError as exc:
        logger.error("mcpfast: %s", exc)
        raise SystemExit(2) from None


@functools.cache  # once per process
def register() -> None:
    """Wire the swarm into Locust's global events: its options, and the ``init`` listener that
    sets the swarm up for each environment Locust builds.  Adds listeners only: nothing of
    Locust is replaced."""
    locust.events.init_command_line_parser.add_listener(add_arguments)
    locust.events.init.add_listener(_on_global_init)


register()  # a locustfile that imports the swarm (its users) gets the swarm
