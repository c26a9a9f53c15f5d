"""``mcpfast bench --soak MINUTES``: a long open-model run at a share of the measured capacity,
reported per interval, with a slope check on the server's RSS and on the tools/call latency
(``mcpfast/bench/README.md`` has the steps, the traffic, where each figure comes from and the
finding rule).

The generator is the native load engine, driven in this process: two engines side by side
(:class:`_Traffic`), ``tools_call`` on long-lived sessions and ``session_churn`` from one more
user. Server RSS is the summed ``VmRSS`` of its process tree, open sessions the server's own
``mcpfast_sessions_open`` gauge at ``/metrics`` (else the generator's count), both sampled every
second.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import math
import shlex
import socket
import statistics
import sys
import time
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from mcpfast.bench.procs import (
    Sampler,
    ServerProcess,
    loadavg,
    log_path,
    machine_info,
    machine_was_busy,
    reference_server,
)
from mcpfast.client.probe import METRIC_SESSIONS, metrics_url, process_tree, read_metrics, tree_rss_bytes
from mcpfast.locust.argtypes import finite_positive, int_at_least, positive_share, share
from mcpfast.locust.histogram import Histogram
from mcpfast.results import files
from mcpfast.results.noise import least_squares
from mcpfast.results.report import ms

if TYPE_CHECKING:
    from mcpfast._core import EngineFamily, NativeEngine

__all__ = [
    "DEFAULT_CAPACITY_S",
    "DEFAULT_INTERVAL_S",
    "DEFAULT_OUT",
    "DEFAULT_SHARE",
    "DEFAULT_USERS",
    "LATENCY_SLOPE_THRESHOLD",
    "RSS_SLOPE_THRESHOLD",
    "SoakConfig",
    "SoakError",
    "check_config",
    "find_slope",
    "redraw",
    "render_markdown",
    "run_soak",
    "soak_findings",
]

DEFAULT_OUT = Path("bench_results") / "soak"
DEFAULT_SHARE = 0.5
DEFAULT_INTERVAL_S = 60.0
DEFAULT_CAPACITY_S = 15.0
DEFAULT_USERS = 8
CAPACITY_WARMUP_SHARE = 0.2  # of the capacity run: connections, sessions and the server's caches settle
SAMPLE_S = 1.0  # RSS and the sessions gauge are sampled this often
STOP_GRACE_S = 2.0
TOOL = "echo"
TOOL_ARGUMENTS: dict[str, Any] = {"text": "hello"}  # the swarm's default tools/call
PROTOCOL_VERSION = "2025-11-25"  # the swarm's default revision
CONNECTION_ROWS = frozenset({"connect", "tls:handshake"})  # opening a connection is not an MCP request
CALL_ROW = f"tools/call:{TOOL}"

RSS_SLOPE_THRESHOLD = 0.10
"""RSS finding: growth per hour of at least this share of the first interval's RSS."""
LATENCY_SLOPE_THRESHOLD = 0.50
"""Latency finding: growth per hour of at least this share of the fitted intervals' median."""
SIGNIFICANCE = 3.0
"""A slope counts only when it is at least this many standard errors above zero (a sawtooth or
a single jump between flat stretches is not a trend)."""
MIN_FIT_POINTS = 3
"""Intervals after the warm-up one needed for a fit (two points always make a perfect line)."""
RSS_MIN_RISE = 0.01
"""RSS finding: the fitted line must also rise by this share of the reference across the fitted
intervals, so that a short run's small step (allocator arenas, a cache filling) is not
extrapolated into a steep hourly slope; a 20-minute run at the 10 %/h threshold rises 3 %."""
LATENCY_MIN_RISE = 0.10
"""Latency finding: the same for p50/p99 (a 20-minute run at the 50 %/h threshold rises 16 %)."""


class SoakError(ValueError):
    """Bad input or an unusable target, found before any load (exit code 2)."""


@dataclass
class SoakConfig:
    """What one soak runs; see the module doc. ``target`` None: the embedded reference server."""

    out: Path
    minutes: float
    share: float = DEFAULT_SHARE
    interval_s: float = DEFAULT_INTERVAL_S
    capacity_s: float = DEFAULT_CAPACITY_S
    users: int = DEFAULT_USERS
    churn_users: int = 1
    churn_delete_share: float = 1.0  # every churned session closed: memory kept per closed session shows as a slope
    target: str | None = None
    server_pid: int = 0
    protocol_version: str | None = None
    python: str = sys.executable
    command_line: list[str] = field(default_factory=lambda: list(sys.argv))
    make_plots: bool = True

    @property
    def intervals(self) -> int:
        """How many intervals MINUTES makes (the last one may be shorter)."""
        return max(math.ceil(self.minutes * 60.0 / self.interval_s - 1e-9), 1)


def check_config(cfg: SoakConfig) -> None:
    """Refuse what cannot run, before anything starts, by the rules the command line's own
    checks apply (:mod:`mcpfast.locust.argtypes`), so a config made in code is held to them too.

    Raises:
        SoakError: MINUTES not above 0, a share outside (0, 1], an interval or capacity run not
            above 0, no users, a target URL that is not http(s)://host[:port]/path, a target
            without a live ``--server-pid``.
    """
    checks = (
        ("--soak MINUTES", finite_positive, cfg.minutes),
        ("--soak-share", positive_share, cfg.share),
        ("--soak-interval", finite_positive, cfg.interval_s),
        ("the capacity run (--duration)", finite_positive, cfg.capacity_s),
        ("--users", int_at_least(1), min(cfg.users, cfg.churn_users)),
        ("--churn-delete-share", share, cfg.churn_delete_share),
    )
    for flag, check, value in checks:
        try:
            check(str(value))
        except argparse.ArgumentTypeError as exc:
            raise SoakError(f"{flag} {exc}") from None
    if cfg.target is not None:
        _host_port(cfg.target)
        if cfg.server_pid <= 0:
            raise SoakError("--soak with --target needs --server-pid PID: the server's RSS is read from /proc/PID")
        if not Path(f"/proc/{cfg.server_pid}").is_dir():
            raise SoakError(f"--server-pid {cfg.server_pid}: no such process")


def _host_port(url: str) -> tuple[str, int]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SoakError(f"--target must be an http(s)://host[:port]/path URL, got {url!r}")
    try:
        return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise SoakError(f"--target {url!r}: {exc}") from None


@dataclass
class _Window:
    """The drained rows of one stretch of time, per engine part (``calls`` / ``churn``) and name:
    ``[requests, failures, {µs: successes}]``."""

    rows: dict[tuple[str, str], list[Any]] = field(default_factory=dict)

    def add(self, part: str, drained: Iterable[Any]) -> None:
        for row in drained:
            if row.name in CONNECTION_ROWS or not (row.num_requests or row.num_failures):
                continue
            entry = self.rows.setdefault((part, row.name), [0, 0, {}])
            entry[0] += row.num_requests
            entry[1] += row.num_failures
            ok: dict[int, int] = entry[2]
            for us, n in row.buckets:
                ok[us] = ok.get(us, 0) + n
            for us, n in row.failed_buckets:
                ok[us] = ok.get(us, 0) - n

    def count(self, part: str | None = None, name: str | None = None) -> int:
        return sum(v[0] for (p, n), v in self.rows.items() if (part is None or p == part) and (name is None or n == name))

    def failures(self) -> int:
        return sum(v[1] for v in self.rows.values())

    def by_name(self) -> dict[str, int]:
        return {f"{p}:{n}": v[0] for (p, n), v in sorted(self.rows.items())}

    def p50_p99(self, part: str, name: str) -> tuple[int | None, int | None]:
        h = Histogram()
        for us, n in self.rows.get((part, name), [0, 0, {}])[2].items():
            if n > 0:
                h.record(us, n)
        if not h.total_count:
            return None, None
        p50, p99 = h.percentiles((50.0, 99.0))
        return p50, p99


class _Traffic:
    """The two engines side by side: ``tools_call`` on ``cfg.users`` long-lived sessions (one
    keep-alive connection each, ``tools/call`` :data:`TOOL`) and ``session_churn`` from
    ``cfg.churn_users`` more; in the open model at ``rates`` (calls/s, churn cycles/s), else
    closed (as fast as they go)."""

    def __init__(self, cfg: SoakConfig, url: str, rates: tuple[float, float] | None = None) -> None:
        from mcpfast.core import EngineConfig, native_engine

        def engine(family: str, rate: float | None) -> NativeEngine:
            return native_engine(
                EngineConfig(
                    transport="http",
                    url=url,
                    family=cast("EngineFamily", family),
                    protocol_version=cfg.protocol_version or PROTOCOL_VERSION,
                    tool=TOOL,
                    arguments=dict(TOOL_ARGUMENTS),
                    churn_delete_share=cfg.churn_delete_share,
                    rate=rate,
                )
            )

        call_rate, churn_rate = rates or (None, None)
        self.calls, self.churn = engine("tools_call", call_rate), engine("session_churn", churn_rate)
        self.users = cfg.users, cfg.churn_users

    def start(self) -> None:
        for engine, users in zip((self.calls, self.churn), self.users, strict=True):
            engine.start()
            engine.set_users(users)

    def drain(self, window: _Window) -> _Window:
        window.add("calls", self.calls.drain())
        window.add("churn", self.churn.drain())
        return window

    def stop(self) -> None:
        self.calls.stop(STOP_GRACE_S)
        self.churn.stop(STOP_GRACE_S)

    def status(self, key: str) -> int:
        """A counter of both engines' ``status()`` added up (``sent``, ``late``, ``dropped``...)."""
        return sum(int(e.status()[key]) for e in (self.calls, self.churn))

    def cumulative(self) -> int:
        """Every MCP request the engines completed since start, from their cumulative histograms
        (a count kept apart from the drained windows: the per-interval counts must add up to it)."""
        return sum(
            n
            for e in (self.calls, self.churn)
            for _rtype, name, buckets in e.histograms()
            if name.split(" (failed)")[0] not in CONNECTION_ROWS
            for _, n in buckets
        )


def measure_capacity(cfg: SoakConfig, url: str, stream: TextIO) -> dict[str, Any]:
    """The closed-model run: the same two engines, as fast as they go, for ``cfg.capacity_s``.

    Raises:
        RuntimeError: requests failed, or nothing completed.
    """
    warmup = min(max(cfg.capacity_s * CAPACITY_WARMUP_SHARE, 0.0), 3.0)
    traffic = _Traffic(cfg, url)
    try:
        traffic.start()
        stream.write(f"soak: measuring capacity (closed model, {cfg.capacity_s:g} s, {warmup:g} s of it warm-up)\n")
        stream.flush()
        time.sleep(warmup)
        traffic.drain(_Window())
        t0 = time.monotonic()
        time.sleep(cfg.capacity_s - warmup)
        window = traffic.drain(_Window())
        elapsed = time.monotonic() - t0
    finally:
        traffic.stop()
    calls_n, cycles_n = window.count("calls", CALL_ROW), window.count("churn", "initialize")
    if window.failures():
        raise RuntimeError(f"the capacity run had {window.failures()} failed requests: {window.by_name()}")
    if not calls_n or not cycles_n:
        raise RuntimeError(f"the capacity run completed no tools/call or no churn cycle: {window.by_name()}")
    p50, p99 = window.p50_p99("calls", CALL_ROW)
    return {
        "model": "closed",
        "duration_s": cfg.capacity_s,
        "warmup_s": warmup,
        "measured_s": round(elapsed, 3),
        "call_users": cfg.users,
        "churn_users": cfg.churn_users,
        "calls_per_s": round(calls_n / elapsed, 2),
        "churn_cycles_per_s": round(cycles_n / elapsed, 2),
        "requests_per_s": round(window.count() / elapsed, 2),
        "call_p50_us": p50,
        "call_p99_us": p99,
        "requests": window.by_name(),
    }


def find_slope(
    series: str,
    unit: str,
    hours: Sequence[float],
    values: Sequence[float | None],
    reference: float | None,
    threshold: float,
    min_rise: float = 0.0,
) -> dict[str, Any]:
    """Fit a line through ``(hours, values)`` and say whether it is a rising slope.

    A **finding** when the slope per hour is at least ``threshold`` x ``reference`` (e.g. 10 %
    of the first interval's RSS per hour), at least :data:`SIGNIFICANCE` standard errors above
    zero, and the line rises by at least ``min_rise`` x ``reference`` across the fitted points.
    Points whose value is None are left out; fewer than :data:`MIN_FIT_POINTS`: no fit, no
    finding. Returns the fit and a ``text`` line for the report.
    """
    pts = [(x, float(v)) for x, v in zip(hours, values, strict=True) if v is not None]
    out: dict[str, Any] = {
        "series": series,
        "unit": unit,
        "points": len(pts),
        "reference": reference,
        "threshold_per_h": threshold,
        "min_rise": min_rise,
        "finding": False,
    }
    fit = least_squares([p[0] for p in pts], [p[1] for p in pts]) if len(pts) >= MIN_FIT_POINTS else None
    if fit is None or not reference or reference <= 0:
        out["text"] = f"{series}: too few intervals after the warm-up to fit a line ({len(pts)}; {MIN_FIT_POINTS} needed)"
        return out
    a, b, se = fit
    se = se or 0.0
    relative = b / reference
    t = math.inf if se == 0 and b > 0 else (b / se if se > 0 else 0.0)
    rise = b * (pts[-1][0] - pts[0][0]) / reference
    finding = relative >= threshold and t >= SIGNIFICANCE and rise >= min_rise
    out.update(
        intercept=a,
        slope_per_h=b,
        stderr_per_h=se,
        relative_per_h=relative,
        rise=rise,
        t=None if math.isinf(t) else round(t, 2),
        x_from_h=pts[0][0],
        x_to_h=pts[-1][0],
        finding=finding,
    )
    rate = f"{b:+.4g} {unit}/h ({100 * relative:+.1f} %/h of {reference:.4g} {unit}, ± {se:.2g}; {100 * rise:+.1f} % over the fit)"
    rule = f"{100 * threshold:g} %/h, {SIGNIFICANCE:g} standard errors, {100 * min_rise:g} % rise"
    verdict = f"SLOPE FOUND (at least {rule})" if finding else f"no slope found (a finding needs {rule})"
    out["text"] = f"{series}: {rate}: {verdict}"
    return out


def soak_findings(intervals: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The slope checks over the per-interval rows (the first interval is the warm-up and is
    left out): server RSS at each interval's end against the first interval's, and the tools/call
    p50 and p99 against their median over the fitted intervals; x is each interval's end."""
    fitted = list(intervals[1:])
    # every figure is placed at its interval's end (RSS is read there; a latency covers the
    # interval): equal intervals make the slope the same either way, and the plot matches
    end_h = [r["end_s"] / 3600.0 for r in fitted]
    first_rss = intervals[0].get("rss_kib") if intervals else None
    out = [find_slope("server RSS", "KiB", end_h, [r.get("rss_kib") for r in fitted], first_rss, RSS_SLOPE_THRESHOLD, RSS_MIN_RISE)]
    for key, label in (("call_p50_us", "tools/call p50"), ("call_p99_us", "tools/call p99")):
        values = [r.get(key) for r in fitted]
        known = [v for v in values if v is not None]
        reference = statistics.median(known) if known else None
        out.append(find_slope(label, "us", end_h, values, reference, LATENCY_SLOPE_THRESHOLD, LATENCY_MIN_RISE))
    return out


def _interval_row(
    index: int, start: float, end: float, t0: float, window: _Window, samples: list[Any], *, gen_sessions: int, late: int, dropped: int
) -> dict[str, Any]:
    """One interval's figures; ``samples`` are the sampler's ``(t, RSS KiB, processes, sessions)``
    rows of the interval, the rest the generator's counts (open sessions, late and dropped arrivals)."""
    length = end - start
    rss = [s[1] for s in samples if s[1] is not None]
    sessions = [s[3] for s in samples if s[3] is not None]
    p50, p99 = window.p50_p99("calls", CALL_ROW)
    init_p50, init_p99 = window.p50_p99("churn", "initialize")
    requests = window.count()
    return {
        "index": index,
        "start_s": round(start - t0, 3),
        "end_s": round(end - t0, 3),
        "length_s": round(length, 3),
        "requests": requests,
        "requests_per_s": round(requests / length, 2) if length > 0 else None,
        "failures": window.failures(),
        "calls": window.count("calls", CALL_ROW),
        "churn_cycles": window.count("churn", "initialize"),
        "call_p50_us": p50,
        "call_p99_us": p99,
        "initialize_p50_us": init_p50,
        "initialize_p99_us": init_p99,
        "rss_kib": rss[-1] if rss else None,
        "rss_max_kib": max(rss) if rss else None,
        "server_processes": samples[-1][2] if samples else None,
        "sessions_open": int(sessions[-1]) if sessions else None,
        "sessions_open_max": int(max(sessions)) if sessions else None,
        "sessions_open_generator": gen_sessions,
        "late": late,
        "dropped": dropped,
        "by_name": window.by_name(),
    }


class _ServerGone(RuntimeError):
    pass


def _soak_intervals(
    cfg: SoakConfig, traffic: _Traffic, sampler: Sampler, server: ServerProcess | None, intervals: list[dict[str, Any]], problems: list[str]
) -> None:
    """Run the open-model traffic for ``cfg.minutes`` and read it out into ``intervals`` at every
    interval's end (so that what ran is kept when the server exits); a Ctrl-C ends the interval
    it falls in, which is reported as the last one."""
    duration, n_intervals = cfg.minutes * 60.0, cfg.intervals
    deletes = late_seen = dropped_seen = 0
    t0 = time.monotonic()
    traffic.start()
    for k in range(n_intervals):
        start = t0 + k * cfg.interval_s
        end = min(t0 + (k + 1) * cfg.interval_s, t0 + duration)
        interrupted = False
        try:
            while (left := end - time.monotonic()) > 0:
                time.sleep(min(left, 0.5))
                if server is not None and (code := server.exited()) is not None:
                    raise _ServerGone(f"the server exited ({code}) during the soak: {server.log_tail(3)}")
        except KeyboardInterrupt:
            interrupted = True
            end = time.monotonic()
            problems.append("interrupted (Ctrl-C): the intervals so far are reported, the last one cut short")
        window = traffic.drain(_Window())
        held = int(traffic.calls.status()["sessions_open"])  # before a stop closes them
        last = interrupted or k == n_intervals - 1
        if last:
            # requests in flight at the end complete within the grace: they belong to the last interval
            traffic.stop()
            traffic.drain(window)
        late, dropped = traffic.status("late"), traffic.status("dropped")
        deletes += window.count("churn", "DELETE")
        gen_sessions = held + int(traffic.churn.status()["established"]) - deletes
        samples = sampler.between(start, end)
        row = _interval_row(
            k,
            start,
            time.monotonic() if last else end,
            t0,
            window,
            samples,
            gen_sessions=gen_sessions,
            late=late - late_seen,
            dropped=dropped - dropped_seen,
        )
        late_seen, dropped_seen = late, dropped
        intervals.append(row)
        rss = "-" if row["rss_kib"] is None else f"{row['rss_kib'] / 1024:.1f}"
        sys.stderr.write(
            f"soak {k + 1}/{n_intervals}  {row['end_s'] / 60:6.2f} min  {row['requests_per_s']}/s  fail {row['failures']}  "
            f"p50 {ms(row['call_p50_us'])} ms  p99 {ms(row['call_p99_us'])} ms  RSS {rss} MiB  sessions {row['sessions_open']}\n"
        )
        sys.stderr.flush()
        if interrupted:
            break


def run_soak(cfg: SoakConfig, stream: TextIO | None = None) -> int:
    """Run the soak; write ``results.json``, ``results.md`` and ``soak.png`` into ``cfg.out``.

    Returns the exit code: 0 (every request answered, the counts add up), 1 (failures, a
    server that exited, counts that do not add up), 2 (bad input or an unreachable target,
    before any load; the reason on stderr). A slope is a finding, printed and recorded, not a
    failure of the run.
    """
    out = sys.stdout if stream is None else stream
    try:
        check_config(cfg)
        from mcpfast.core import require_native_engine

        require_native_engine()
        if cfg.target:
            host, port = _host_port(cfg.target)
            try:
                socket.create_connection((host, port), timeout=3.0).close()
            except OSError as exc:
                raise SoakError(f"cannot reach the target {cfg.target} ({host}:{port}): {exc.strerror or exc}") from None
    except (SoakError, RuntimeError) as exc:
        sys.stderr.write(f"mcpfast bench --soak: {exc}\n")
        return 2
    cfg.out.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    load_start = loadavg()
    machine = machine_info(())
    server: ServerProcess | None = None
    if cfg.target:
        url, pid, server_desc = cfg.target, cfg.server_pid, f"target {cfg.target} (pid {cfg.server_pid})"
    else:
        # --metrics: the server's own count of open sessions, read once a second
        server = reference_server(cfg.python, log_path(cfg.out, "server-http.log"), "--metrics")
        try:
            server.start()
        except RuntimeError as exc:
            sys.stderr.write(f"mcpfast bench --soak: the embedded HTTP server did not start: {exc}\n")
            return 2
        url, pid = server.url, server.pid
        server_desc = f"embedded `{shlex.join(['python', *server.argv[1:]])}` (pid {pid})"
    problems: list[str] = []
    notes: list[str] = []
    try:
        gauge_url = metrics_url(url)
        has_gauge = METRIC_SESSIONS in (read_metrics(gauge_url) or {})
        sessions_source = (
            f"the server's mcpfast_sessions_open gauge ({gauge_url})"
            if has_gauge
            else "the generator: sessions it holds plus those it abandoned (the target has no mcpfast_sessions_open at /metrics)"
        )
        out.write(f"soak: server {server_desc}\n")
        try:
            capacity = measure_capacity(cfg, url, out)
        except RuntimeError as exc:
            sys.stderr.write(f"mcpfast bench --soak: {exc}\n")
            return 1
        call_rate = cfg.share * capacity["calls_per_s"]
        churn_rate = cfg.share * capacity["churn_cycles_per_s"]
        out.write(
            f"soak: capacity {capacity['calls_per_s']:g} tools/call/s + {capacity['churn_cycles_per_s']:g} churn cycles/s; "
            f"soaking {cfg.minutes:g} min at {cfg.share:g} of it: {call_rate:.1f} calls/s + {churn_rate:.2f} cycles/s (open model), "
            f"{cfg.intervals} interval(s) of {cfg.interval_s:g} s\n"
        )
        out.flush()

        def sample() -> tuple[int | None, int, float | None]:
            rss = tree_rss_bytes(pid)
            sessions = (read_metrics(gauge_url) or {}).get(METRIC_SESSIONS) if has_gauge else None
            return None if rss is None else rss // 1024, (len(process_tree(pid)) if rss is not None else 0), sessions

        sampler = Sampler(sample, SAMPLE_S, clock=time.monotonic)
        sampler.start()
        traffic = _Traffic(cfg, url, (call_rate, churn_rate))
        intervals: list[dict[str, Any]] = []
        try:
            _soak_intervals(cfg, traffic, sampler, server, intervals, problems)
        except _ServerGone as exc:
            problems.append(str(exc))
        except KeyboardInterrupt:  # a second Ctrl-C while the last interval was being read
            problems.append("interrupted (Ctrl-C) twice: the intervals so far are reported")
        finally:
            traffic.stop()
            sampler.stop()
        cumulative = traffic.cumulative()
    finally:
        if server is not None:
            server.stop()
    load_end = loadavg()
    drained = sum(r["requests"] for r in intervals)
    failures = sum(r["failures"] for r in intervals)
    if failures:
        problems.append(f"{failures} requests failed")
    if drained != cumulative:
        problems.append(f"the per-interval counts add up to {drained}, the engines counted {cumulative}")
    if dropped := traffic.status("dropped"):
        notes.append(f"{dropped} arrivals were dropped (the generator's queue was full): the server fell behind the schedule")
    findings = soak_findings(intervals) if intervals else []
    soak_s = intervals[-1]["end_s"] if intervals else 0.0
    results: dict[str, Any] = {
        "format": files.SOAK_FORMAT,
        "format_version": 1,
        "command": _command(cfg.command_line),
        "command_line": cfg.command_line,
        "started": started,
        "finished": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "loadavg_at_start": load_start,
        "loadavg_at_end": load_end,
        "machine_was_busy": machine_was_busy(load_start, load_end, machine.get("nproc")),
        "server": server_desc,
        "url": url,
        "config": {
            "minutes": cfg.minutes,
            "share": cfg.share,
            "interval_s": cfg.interval_s,
            "capacity_s": cfg.capacity_s,
            "call_users": cfg.users,
            "churn_users": cfg.churn_users,
            "churn_delete_share": cfg.churn_delete_share,
            "protocol_version": cfg.protocol_version or PROTOCOL_VERSION,
            "tool": TOOL,
            "arguments": TOOL_ARGUMENTS,
            "engine": "native",
        },
        "traffic": _traffic_text(cfg),
        "capacity": capacity,
        "soak": {
            "model": "open",
            "latency_origin": "intended send time",
            "calls_rate": round(call_rate, 3),
            "churn_cycles_rate": round(churn_rate, 3),
            "duration_s": soak_s,
            "requests": drained,
            "requests_engine_total": cumulative,
            "counts_consistent": drained == cumulative,
            "requests_per_s": round(drained / soak_s, 2) if soak_s else None,
            "failures": failures,
            "sent": traffic.status("sent"),
            "late": traffic.status("late"),
            "dropped": dropped,
            "generator_cpu_s": round(sum(float(e.status()["cpu_s"]) for e in (traffic.calls, traffic.churn)), 2),
        },
        "sessions_source": sessions_source,
        "rss_source": f"summed VmRSS of the server's process tree (/proc/{pid} and its descendants), sampled every {SAMPLE_S:g} s",
        "thresholds": {
            "rss_per_h_of_first_interval": RSS_SLOPE_THRESHOLD,
            "latency_per_h_of_median": LATENCY_SLOPE_THRESHOLD,
            "standard_errors": SIGNIFICANCE,
            "rss_min_rise": RSS_MIN_RISE,
            "latency_min_rise": LATENCY_MIN_RISE,
            "min_points": MIN_FIT_POINTS,
        },
        "intervals": intervals,
        "findings": findings,
        "slope_found": any(f["finding"] for f in findings),
        "notes": notes,
        "problems": problems,
        "ok": not problems,
        "plots": [],
    }
    if cfg.make_plots and intervals:
        try:
            results["plots"] = [p.name for p in _draw(results, cfg.out)]
        except Exception as exc:  # a plotting bug must not lose the measurements
            problems.append(f"plot: {type(exc).__name__}: {exc}")
            results["ok"] = False
    _write(results, cfg.out)
    out.write(_summary_lines(results) + "\n")
    out.flush()
    return 0 if results["ok"] else 1


def _command(argv: Sequence[str]) -> str:
    """The command as typed: ``python -m mcpfast ...`` for the package's entry points."""
    args = list(argv)
    if args and (args[0].endswith(("__main__.py", "mcpfast")) or args[0] == "-m"):
        return shlex.join(["python", "-m", "mcpfast", *args[1:]])
    return shlex.join(args)


def _traffic_text(cfg: SoakConfig) -> str:
    closed = (
        "every churned session is closed with DELETE"
        if cfg.churn_delete_share >= 1.0
        else f"{100 * cfg.churn_delete_share:g} % of churned sessions are closed with DELETE, the rest abandoned"
    )
    return (
        f"tools/call {TOOL} on {cfg.users} long-lived sessions (one keep-alive connection each), plus session churn "
        f"from {cfg.churn_users} user: initialize, notifications/initialized, a first tools/call, DELETE ({closed}); "
        f"both in the open model at {cfg.share:g} of the rates the closed-model capacity run reached"
    )


def _mib(kib: Any) -> str:
    return "-" if kib is None else f"{kib / 1024:.1f}"


def render_markdown(results: dict[str, Any]) -> str:
    """``results.md``: the command, the machine, the traffic, the per-interval table, the findings."""
    cfg, cap, soak = results["config"], results["capacity"], results["soak"]
    m = results["machine"]
    busy = " **The machine was busy** (other work ran: read the latency figures with care)." if results["machine_was_busy"] else ""
    lines = [
        f"# Soak: {cfg['minutes']:g} min at {cfg['share']:g} of capacity",
        "",
        f"Command: `{results['command']}`",
        "",
        f"Started {results['started']}, finished {results['finished']}; {m.get('nproc')} CPUs ({m.get('cpu_model')}), "
        f"mcpfast {m.get('mcpfast_version')} ({m.get('mcpfast_core')} core); load average at start {results['loadavg_at_start']}, "
        f"at end {results['loadavg_at_end']}; machine_was_busy: {str(results['machine_was_busy']).lower()}.{busy}",
        "",
        f"Server: {results['server']}.",
        "",
        f"Traffic: {results['traffic']}. Generator: the native load engine (two engines in the bench process); "
        "latency of every request from its intended send time (no coordinated omission).",
        "",
        f"Capacity (closed model, {cap['duration_s']:g} s, the first {cap['warmup_s']:g} s dropped): "
        f"{cap['calls_per_s']:g} tools/call/s and {cap['churn_cycles_per_s']:g} churn cycles/s "
        f"({cap['requests_per_s']:g} requests/s; tools/call p50 {ms(cap['call_p50_us'])} ms, p99 {ms(cap['call_p99_us'])} ms).",
        "",
        f"Soak (open model): {soak['calls_rate']:g} tools/call/s + {soak['churn_cycles_rate']:g} churn cycles/s for "
        f"{soak['duration_s']:g} s: {soak['requests']} requests ({soak['requests_per_s']}/s), {soak['failures']} failed, "
        f"{soak['late']} sent late (> 1 ms after their intended time), {soak['dropped']} dropped; the intervals add up to "
        f"the engines' own count: {str(soak['counts_consistent']).lower()} ({soak['requests_engine_total']}). "
        f"Generator CPU {soak['generator_cpu_s']} s.",
        "",
        f"RSS: {results['rss_source']}. Open sessions: {results['sessions_source']} (`gen` column: the generator's count, "
        "sessions held plus opened minus DELETEd, read a moment apart from the drained counts, so a few too many under a backlog). "
        "`late`: arrivals sent more than 1 ms after their intended time; `dropped`: arrivals the generator's queue had no room for.",
        "",
        "| # | end (min) | requests | req/s | fail | late | dropped | tools/call | churn cycles | p50 ms | p99 ms | init p99 ms "
        "| RSS MiB | RSS max MiB | sessions | gen |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results["intervals"]:
        lines.append(
            f"| {r['index'] + 1}{' (warm-up)' if r['index'] == 0 else ''} | {r['end_s'] / 60:.2f} | {r['requests']} | "
            f"{r['requests_per_s']} | {r['failures']} | {r['late']} | {r['dropped']} | {r['calls']} | {r['churn_cycles']} | {ms(r['call_p50_us'])} | "
            f"{ms(r['call_p99_us'])} | {ms(r['initialize_p99_us'])} | {_mib(r['rss_kib'])} | {_mib(r['rss_max_kib'])} | "
            f"{'-' if r['sessions_open'] is None else r['sessions_open']} | {r['sessions_open_generator']} |"
        )
    th = results["thresholds"]
    lines += [
        "",
        "## Findings",
        "",
        f"A line is fitted (least squares) through the intervals after the first (warm-up) one. A slope is a finding "
        f"when it rises by at least {100 * th['rss_per_h_of_first_interval']:g} % per hour of the first interval's RSS "
        f"(server RSS at each interval's end), or {100 * th['latency_per_h_of_median']:g} % per hour of the fitted "
        f"intervals' median (tools/call p50, p99), is at least {th['standard_errors']:g} standard errors above zero, "
        f"and rises across the fitted intervals by at least {100 * th['rss_min_rise']:g} % (RSS) or "
        f"{100 * th['latency_min_rise']:g} % (latency) of that reference; at least {th['min_points']} intervals after "
        "the warm-up are needed.",
        "",
    ]
    lines += [f"- {f['text']}" for f in results["findings"]] or ["- no intervals"]
    if not any(f["finding"] for f in results["findings"]):
        lines += ["", "No slope found."]
    for note in results["notes"]:
        lines += ["", f"Note: {note}"]
    if results["problems"]:
        lines += ["", "Problems:", *(f"- {p}" for p in results["problems"])]
    if results["plots"]:
        lines += ["", f"![soak]({results['plots'][0]})"]
    return "\n".join(lines) + "\n"


def _draw(results: dict[str, Any], run: Path) -> list[Path]:
    from mcpfast.results.plots import soak_plot

    cfg = results["config"]
    title = f"soak: {cfg['minutes']:g} min at {cfg['share']:g} of capacity ({results['soak']['calls_rate']:.0f} calls/s)"
    return [soak_plot(results["intervals"], results["findings"], run / "soak.png", title)] if results["intervals"] else []


def _write(results: dict[str, Any], run: Path) -> None:
    files.write_json(run / "results.json", results)
    (run / "results.md").write_text(render_markdown(results), encoding="utf-8")


def redraw(run: Path) -> list[Path]:
    """``mcpfast report`` on a soak: ``soak.png`` and ``results.md`` again from ``results.json``
    (the findings recomputed with the current rule)."""
    results = files.read_json(run / "results.json")
    results["findings"] = soak_findings(results["intervals"]) if results["intervals"] else []
    results["slope_found"] = any(f["finding"] for f in results["findings"])
    made = _draw(results, run)
    results["plots"] = [p.name for p in made]
    _write(results, run)
    return made


def _summary_lines(results: dict[str, Any]) -> str:
    soak = results["soak"]
    lines = [
        f"soak: {soak['requests']} requests in {soak['duration_s']:g} s ({soak['requests_per_s']}/s), {soak['failures']} failed, "
        f"{soak['dropped']} dropped; counts consistent: {str(soak['counts_consistent']).lower()}",
    ]
    lines += [("finding: " if f["finding"] else "  ") + f["text"] for f in results["findings"]]
    if not any(f["finding"] for f in results["findings"]):
        lines.append("no slope found")
    lines += [f"note: {n}" for n in results["notes"]]
    lines += [f"problem: {p}" for p in results["problems"]]
    lines.append(f"results: {'soak.png, ' if results.get('plots') else ''}results.json, results.md")
    return "\n".join(lines)
