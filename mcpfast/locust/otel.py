"""Locust's ``--otel``: every request of the run in the OpenTelemetry metrics, the native engine's too.

Locust's own ``--otel`` wiring records ``locust.client.duration`` (a histogram in seconds, with the
attributes ``name`` and, on a failure, ``error.type``: the exception's class name) from its
``request`` event.  The native engine never fires that event - its windows enter Locust's tables in
bulk once a second (:func:`mcpfast.locust.native.feed_locust`) - so without this module an
OpenTelemetry dashboard of a native run shows no request at all.

What this module adds, in every process that sends (the only process of a run, or each worker;
never the master, which sends nothing):

* ``locust.client.duration`` for the native engine's requests: same name, unit, scope (``locust``)
  and attributes as Locust's, counted from the very drained rows that Locust's tables get, so its
  counts per ``name`` are ``_stats.csv``'s.  ``error.type`` is the class the Python users raise for
  the same failure (``HttpStatusError``, ``McpError``, ``RequestTimeout``, ...).  The Python users'
  requests are left to Locust's own listener (recording them here too would count them twice).
* ``mcp.client.operation.duration`` (OpenTelemetry's MCP semantic conventions) for the MCP requests
  of both engines: ``mcp.method.name``, ``gen_ai.tool.name`` / ``gen_ai.prompt.name``,
  ``gen_ai.operation.name`` (``execute_tool``), ``network.transport`` (``tcp``/``pipe``) and, on a
  failure, ``error.type`` (the JSON-RPC error code, the HTTP status, ``tool_error``, ``timeout``, ...)
  with ``rpc.response.status_code`` for a JSON-RPC error.

Why not an OpenTelemetry histogram instrument: ``Histogram.record`` takes one value, so feeding it
a window of n requests costs n calls - the per-request Python the engine exists to remove - and the
API has no asynchronous histogram.  The drained rows already hold (µs, count) pairs, so this module
keeps cumulative bucket counts per attribute set (a dictionary update per distinct latency per
second) and hands them to the SDK's own exporter as histogram data points (the SDK's public
``MetricsData`` types): the same OTLP messages the SDK would send, at the same interval
(``OTEL_METRIC_EXPORT_INTERVAL``), to the same endpoint (the ``OTEL_EXPORTER_OTLP_*`` variables),
with the resource Locust builds (the SDK gives each process its own ``service.instance.id``, so the
workers' series add up instead of overwriting one another).  A last export follows the engine's
final drain at test stop.

The bucket bounds are the Prometheus exporter's (:data:`mcpfast.locust.prometheus.BUCKETS_US`, in
seconds): 50 µs to 60 s, a superset of the semantic conventions' advice from 10 ms to 60 s, since a
swarm's latencies are mostly below the advice's first bound.

An endpoint that is down costs the run nothing: exports run in a greenlet beside the users, the
first failure is logged once, as one mcpfast warning holding the exporter's first message (the
OpenTelemetry exporters would otherwise log every try of every signal, Locust's logs and traces
included), later messages are only counted and summed up at the end, and Locust's own tables
never depend on an export.  The final export waits one second at most once exports have failed.

Without ``--otel`` nothing here runs; the OpenTelemetry SDK is imported only when it is on (it
comes with the ``swarm`` extra, as Locust's ``otel`` extra).  The pure parts (failure classes, MCP
attributes, the tables) import neither Locust nor OpenTelemetry.
"""

from __future__ import annotations

import bisect
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from mcpfast.locust.histogram import HIGHEST, index_of
from mcpfast.locust.prometheus import BUCKETS_US
from mcpfast.protocol.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS, PROMPTS_GET, TOOLS_CALL

__all__ = [
    "BOUNDS_S",
    "LOCUST_DURATION",
    "MCP_DURATION",
    "Failure",
    "OtelExport",
    "Point",
    "Tables",
    "failure_of_exception",
    "failure_of_reason",
    "install",
    "mcp_attributes",
]

logger = logging.getLogger(__name__)

LOCUST_DURATION: Final = "locust.client.duration"  # Locust's own histogram (locust/opentelemetry.py)
MCP_DURATION: Final = "mcp.client.operation.duration"  # OpenTelemetry's MCP semantic conventions
#: Explicit bucket bounds in seconds: the Prometheus exporter's, so both dashboards agree.
BOUNDS_S: Final[tuple[float, ...]] = tuple(bound / 1_000_000 for bound in BUCKETS_US)
# the histogram slot holding each bound: a sample counts under a bound when its slot is at or below
# the bound's (exactly how the Prometheus exporter cuts the µs histograms)
_LIMITS: Final[tuple[int, ...]] = tuple(index_of(bound) for bound in BUCKETS_US)
_TRANSPORT: Final = {"mcp-http": "tcp", "mcp-stdio": "pipe"}
_MCP_METHODS: Final = CLIENT_REQUESTS | CLIENT_NOTIFICATIONS
_FIRST: Final = " (first)"  # the native and Python users' name for a session's first tools/call


# -- what a failure is called ------------------------------------------------------------------------
@dataclass(frozen=True)
class Failure:
    """One kind of failure, as each metric names it."""

    locust: str  # Locust's error.type: the Python client's exception class for this failure
    mcp: str  # the MCP conventions' error.type
    rpc_code: str | None = None  # rpc.response.status_code: a JSON-RPC error's code


#: Several kinds of failure of one name in a window that does not tell their latencies apart (a
#: ``DrainRow`` made without ``failed_by_reason``): counted under the conventions' fallback value.
MIXED: Final = Failure("_OTHER", "_OTHER")


@lru_cache(maxsize=1024)
def failure_of_reason(reason: str) -> Failure:
    """The native engine's failure reason (``timeout``, ``http 503``, ``jsonrpc error -32602``,
    ``result has isError: true``, ``connect failed (ConnectionRefused)``, ...) as a :class:`Failure`
    named like the Python users' exception for the same failure.  Reasons are low-cardinality, so
    the cache holds them all."""
    if reason == "timeout":
        return Failure("RequestTimeout", "timeout")
    if reason.startswith("http "):
        status = reason[5:8]
        return Failure("HttpStatusError", status if status.isdigit() else "_OTHER")
    if reason.startswith("jsonrpc error"):
        code = reason[len("jsonrpc error ") :]
        if code.lstrip("-").isdigit():
            return Failure("McpError", code, code)
        return Failure("McpError", "_OTHER")
    if reason == "result has isError: true":
        return Failure("ToolError", "tool_error")
    if reason.startswith(("connect failed", "tls handshake failed", "io error", "connection ")):
        return Failure("ConnectionFailure", "connection")
    if reason in ("malformed JSON", "not a JSON-RPC 2.0 reply"):
        return Failure("InvalidJson", "invalid_json")
    if reason.startswith(("SSE ", "reply neither")):
        return Failure("BadSse", "bad_sse")
    if reason == "reply id mismatch":
        return Failure("WrongId", "wrong_id")
    return Failure("UnexpectedReply", "unexpected_reply")


def failure_of_exception(exc: object) -> Failure:
    """A Python user's failure (the exception Locust's ``request`` event carried)."""
    cls = type(exc).__name__
    code = getattr(exc, "code", None)
    if cls == "McpError" and isinstance(code, int):
        return Failure(cls, str(code), str(code))
    status = getattr(exc, "status", None)
    if cls == "HttpStatusError" and isinstance(status, int):
        return Failure(cls, str(status))
    category = getattr(exc, "category", None)  # mcpfast.client.errors: low-cardinality by design
    if isinstance(category, str):
        return Failure(cls, category.replace("-", "_"))
    return Failure(cls, cls)


@lru_cache(maxsize=4096)
def mcp_attributes(request_type: str, name: str) -> tuple[tuple[str, str], ...] | None:
    """The MCP conventions' attributes of a Locust row (``mcp-http`` / ``tools/call:echo``), error
    aside; None for a row that is no MCP request (``DELETE``, ``connect``, ``sse:gap``, ...)."""
    transport = _TRANSPORT.get(request_type)
    if transport is None:
        return None
    method, _, target = name.partition(":")
    if method not in _MCP_METHODS:
        return None
    attrs = [("mcp.method.name", method), ("network.transport", transport)]
    if transport == "tcp":
        attrs.append(("network.protocol.name", "http"))
    target = target.removesuffix(_FIRST)
    if method == TOOLS_CALL and target:
        attrs += [("gen_ai.tool.name", target), ("gen_ai.operation.name", "execute_tool")]
    elif method == PROMPTS_GET and target:
        attrs.append(("gen_ai.prompt.name", target))
    return tuple(attrs)


# -- the tables ---------------------------------------------------------------------------------------------
class _Series:
    """Cumulative bucket counts of one (type, name, failure) since the test started."""

    __slots__ = ("count", "counts", "max_us", "min_us", "sum_us", "window_max_us", "window_min_us")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_US) + 1)
        self.count = 0
        self.sum_us = 0
        self.min_us = HIGHEST + 1
        self.max_us = 0
        # since the last export (delta temporality's min and max)
        self.window_min_us = HIGHEST + 1
        self.window_max_us = 0

    def add(self, us: int, n: int) -> None:
        us = min(max(us, 1), HIGHEST)  # the histograms' range: a longer request counts at 60 s
        self.counts[bisect.bisect_left(_LIMITS, index_of(us))] += n
        self.count += n
        self.sum_us += us * n
        if us < self.min_us:
            self.min_us = us
        if us > self.max_us:
            self.max_us = us
        if us < self.window_min_us:
            self.window_min_us = us
        if us > self.window_max_us:
            self.window_max_us = us


@dataclass
class Point:
    """One data point: the series of one attribute set, added up."""

    attributes: tuple[tuple[str, str], ...]
    counts: list[int]
    count: int
    sum_s: float
    min_s: float
    max_s: float


class Tables:
    """The requests this process sent since the test started, per (type, name, failure, engine).

    ``add_rows`` takes the native engine's drained windows (native), ``add_request`` one request of
    a Python user (Locust's ``request`` event); :meth:`points` adds them up per attribute set of
    each metric.  Not thread-safe: everything runs on Locust's hub.
    """

    def __init__(self) -> None:
        self.series: dict[tuple[str, str, Failure | None, bool], _Series] = {}
        self.start_ns = time.time_ns()
        self._exported: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[list[int], int, int]] = {}

    def reset(self) -> None:
        """A new test (or Locust's reset_stats): the counts start again, from a new start time."""
        self.series.clear()
        self._exported.clear()
        self.start_ns = time.time_ns()

    def _series(self, request_type: str, name: str, failure: Failure | None, native: bool) -> _Series:
        key = (request_type, name, failure, native)
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = _Series()
        return s

    def add_rows(self, rows: Iterable[Any]) -> None:
        """Drained native windows (``mcpfast._core.DrainRow``): every request by its latency bucket,
        the failed ones (``failed_by_reason``) under their kind of failure, each with its own latencies."""
        for row in rows:
            if not row.num_requests:
                continue
            rtype, name = row.request_type, row.name
            failed = dict(row.failed_buckets)
            by_reason = row.failed_by_reason
            if by_reason:
                for reason, reason_buckets in by_reason:
                    s = self._series(rtype, name, failure_of_reason(reason), True)
                    for us, n in reason_buckets:
                        s.add(us, n)
            elif failed:  # a row made without the split: one kind, or the conventions' fallback
                kinds = {failure_of_reason(reason) for reason, _ in row.errors}
                failure = kinds.pop() if len(kinds) == 1 else MIXED
                s = self._series(rtype, name, failure, True)
                for us, n in failed.items():
                    s.add(us, n)
            s = self._series(rtype, name, None, True)
            for us, n in row.buckets:
                ok = n - failed.get(us, 0)
                if ok:
                    s.add(us, ok)

    def add_request(self, request_type: str, name: str, response_time_ms: float | None, exception: object) -> None:
        """One Python user's request, for the MCP metric only (Locust records its own)."""
        if response_time_ms is None or mcp_attributes(request_type, name) is None:
            return
        failure = None if exception is None else failure_of_exception(exception)
        self._series(request_type, name, failure, False).add(int(response_time_ms * 1000 + 0.5), 1)

    def points(self, metric: str, delta: bool = False, names: Callable[[str], str] | None = None) -> list[Point]:
        """``metric``'s data points: cumulative since :attr:`start_ns`, or (``delta``) since the
        previous call's.  ``names`` maps a Locust name to the ``name`` attribute (Locust's cap)."""
        merged: dict[tuple[tuple[str, str], ...], list[_Series]] = {}
        for (rtype, name, failure, native), s in self.series.items():
            attrs: tuple[tuple[str, str], ...] | None
            if metric == LOCUST_DURATION:
                if not native:
                    continue
                attrs = (("name", names(name) if names is not None else name),)
                if failure is not None:
                    attrs += (("error.type", failure.locust),)
            else:
                attrs = mcp_attributes(rtype, name)
                if attrs is None:
                    continue
                if failure is not None:
                    attrs += (("error.type", failure.mcp),)
                    if failure.rpc_code is not None:
                        attrs += (("rpc.response.status_code", failure.rpc_code),)
            merged.setdefault(attrs, []).append(s)
        out = []
        for attrs, group in merged.items():
            counts = [sum(column) for column in zip(*(s.counts for s in group), strict=True)]
            count = sum(s.count for s in group)
            total_us = sum(s.sum_us for s in group)
            lo, hi = min(s.min_us for s in group), max(s.max_us for s in group)
            if delta:
                key = (metric, attrs)
                before_counts, before_count, before_us = self._exported.get(key, ([0] * len(counts), 0, 0))
                self._exported[key] = (counts, count, total_us)
                counts = [a - b for a, b in zip(counts, before_counts, strict=True)]
                count -= before_count
                total_us -= before_us
                lo = min((s.window_min_us for s in group), default=HIGHEST + 1)
                hi = max((s.window_max_us for s in group), default=0)
                if not count:
                    continue
            if count:
                out.append(Point(attrs, counts, count, total_us / 1e6, lo / 1e6, hi / 1e6))
        return out

    def close_window(self) -> None:
        """After a delta export: the next one's min and max start afresh."""
        for s in self.series.values():
            s.window_min_us, s.window_max_us = HIGHEST + 1, 0


# -- export ------------------------------------------------------------------------------------------------------
def _env_list(name: str, default: str) -> set[str]:
    return {part.strip().lower() for part in os.environ.get(name, default).split(",") if part.strip()}


def _exporters() -> list[Any]:
    """The metric exporters Locust's ``--otel`` set up from the same variables (``otlp`` over gRPC
    or HTTP, ``console``); an exporter that cannot be made is left out (Locust already said why)."""
    out: list[Any] = []
    for kind in sorted(_env_list("OTEL_METRICS_EXPORTER", "otlp")):
        if kind == "otlp":
            protocol = os.environ.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"))
            protocol = protocol.strip().lower()
            try:
                if protocol == "grpc":
                    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
                elif protocol in ("http/protobuf", "http"):
                    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter  # type: ignore[assignment]
                else:
                    continue
            except ImportError:
                continue
            out.append(OTLPMetricExporter())
        elif kind == "console":
            from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

            out.append(ConsoleMetricExporter())
    return out


def _delta_preferred() -> bool:
    """``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE``: ``delta`` and ``lowmemory`` both make a
    synchronous histogram's points deltas (the SDK's rule); the default is cumulative."""
    return os.environ.get("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "cumulative").strip().lower() in ("delta", "lowmemory")


def _interval_s() -> float:
    """``OTEL_METRIC_EXPORT_INTERVAL`` (ms, default 60 000), as Locust's metric reader reads it."""
    try:
        value = float(os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "60000"))
    except ValueError:
        value = 60000.0
    return max(value, 1.0) / 1000.0


class _Once(logging.Filter):
    """On the OpenTelemetry exporters' loggers: an export that failed is said once, by mcpfast,
    with the first exporter message in it; every later message of those loggers (each try of each
    signal - metrics, and Locust's own logs and traces - says it again) is only counted."""

    def __init__(self) -> None:
        super().__init__()
        self.said = False
        self.dropped = 0

    def say(self, what: str) -> None:
        if not self.said:
            self.said = True
            logger.warning(
                "mcpfast: OpenTelemetry export failed (%s); the run goes on and Locust's statistics are complete; "
                "later export failures are counted, not shown",
                what,
            )

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        if not self.said:
            self.say(record.getMessage())
        else:
            self.dropped += 1
        return False


#: Where the OpenTelemetry exporters log each failed try (the SDK's module loggers).
_EXPORTER_LOGGERS: Final = (
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.sdk.metrics._internal.export",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk._logs._internal.export",
)


class OtelExport:
    """One process's export: the tables, the exporters, the periodic greenlet and the final export."""

    def __init__(
        self,
        tables: Tables,
        resource: Any,
        exporters: list[Any],
        interval_s: float,
        delta: bool = False,
        names: Callable[[str], str] | None = None,
    ) -> None:
        self.tables = tables
        self.names = names  # the ``name`` attribute of a Locust name (Locust's cap), else the name itself
        self.resource = resource
        self.exporters = exporters
        self.interval_s = interval_s
        self.delta = delta
        self.exports = 0
        self.failed = 0
        self._loop: Any = None
        self._sending: Any = None
        self._last_ns = tables.start_ns  # delta temporality: where the next points start
        self._filter = _Once()

    # -- what is sent ------------------------------------------------------------------------------
    def metrics_data(self) -> Any:
        """This process's data points as the SDK's ``MetricsData`` (None when there is none)."""
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality,
            Histogram,
            HistogramDataPoint,
            Metric,
            MetricsData,
            ResourceMetrics,
            ScopeMetrics,
        )
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        now = time.time_ns()
        start = self._last_ns if self.delta else self.tables.start_ns
        temporality = AggregationTemporality.DELTA if self.delta else AggregationTemporality.CUMULATIVE

        def histogram(points: list[Point]) -> Any:
            return Histogram(
                data_points=[
                    HistogramDataPoint(
                        attributes=dict(p.attributes),
                        start_time_unix_nano=start,
                        time_unix_nano=now,
                        count=p.count,
                        sum=p.sum_s,
                        bucket_counts=p.counts,
                        explicit_bounds=BOUNDS_S,
                        min=p.min_s,
                        max=p.max_s,
                    )
                    for p in points
                ],
                aggregation_temporality=temporality,
            )

        scopes = []
        locust_points = self.tables.points(LOCUST_DURATION, self.delta, self.names)
        if locust_points:
            metric = Metric(LOCUST_DURATION, "Time to last byte for requests", "s", histogram(locust_points))
            scopes.append(ScopeMetrics(InstrumentationScope("locust"), [metric], ""))
        mcp_points = self.tables.points(MCP_DURATION, self.delta)
        if mcp_points:
            description = "The duration of the MCP request or notification as observed on the sender"
            metric = Metric(MCP_DURATION, description, "s", histogram(mcp_points))
            scopes.append(ScopeMetrics(InstrumentationScope("mcpfast", _mcpfast_version()), [metric], ""))
        if self.delta:
            self.tables.close_window()
            self._last_ns = now
        if not scopes:
            return None
        return MetricsData([ResourceMetrics(self.resource, scopes, "")])

    # -- sending -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Export every interval from now on, failures said once (the filter stays to the exit)."""
        import gevent

        for name in _EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(self._filter)

        def loop() -> None:
            while True:
                gevent.sleep(self.interval_s)
                if self._sending is None or self._sending.ready():
                    self._sending = gevent.spawn(self.export)

        self._loop = gevent.spawn(loop)

    def export(self) -> bool:
        """Send the current points to every exporter (nothing when there are none); False when one failed."""
        from opentelemetry.sdk.metrics.export import MetricExportResult

        data = self.metrics_data()
        if data is None:
            return True
        ok = True
        for exporter in self.exporters:
            self.exports += 1
            try:
                result = exporter.export(data)
            except Exception as exc:  # an exporter bug must not end the run: it is one failed export
                logger.debug("mcpfast: OpenTelemetry exporter raised %r", exc)
                result = MetricExportResult.FAILURE
            if result is not MetricExportResult.SUCCESS:
                ok = False
                self.failed += 1
                self._filter.say(f"metrics {_endpoint(exporter)}")  # when the exporter itself said nothing
        return ok

    def final(self, **_kw: Any) -> None:
        """``test_stop`` (after the engine's final drain): the last points, whatever the interval.

        Waited for up to the exporter's timeout; only a second when exports already failed (the
        endpoint is down: the run's end is not held up for points that would not arrive)."""
        import gevent

        wait = 1.0 if (self.failed or self._filter.said) else _timeout_s() + 1.0
        deadline = time.monotonic() + wait
        if self._sending is not None:
            self._sending.join(timeout=wait)
        self._sending = gevent.spawn(self.export)
        self._sending.join(timeout=max(deadline - time.monotonic(), 0.1))

    def stop(self, **_kw: Any) -> None:
        """``quitting``: no more periodic exports; what failed, counted.  The filter stays on the
        exporters' loggers: Locust's own providers flush (and fail again) at exit."""
        if self._loop is not None:
            self._loop.kill(block=False)
            self._loop = None
        if self.failed or self._filter.dropped:
            logger.info(
                "mcpfast: %d of %d OpenTelemetry metric exports of mcpfast failed; %d exporter messages not shown",
                self.failed,
                self.exports,
                self._filter.dropped,
            )

    def reset(self, **_kw: Any) -> None:
        self.tables.reset()
        self._last_ns = self.tables.start_ns


def _timeout_s() -> float:
    try:
        return float(os.environ.get("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT", "10")))
    except ValueError:
        return 10.0


def _endpoint(exporter: Any) -> str:
    endpoint = getattr(exporter, "_endpoint", None)  # the OTLP exporters keep the address they send to
    return f"to {endpoint}" if endpoint else type(exporter).__name__


def _locust_name(name: str) -> str:
    """Locust's cap on ``name`` values (its first ``MAX_REQUEST_NAMES``, then one shared value),
    with Locust's own set, so the native rows and its listener share one budget."""
    from locust import opentelemetry as lotel

    if name in lotel.request_names:
        return name
    if len(lotel.request_names) < lotel.MAX_REQUEST_NAMES:
        lotel.request_names.add(name)
        return name
    return "Too many unique request names"


def _mcpfast_version() -> str | None:
    try:
        from mcpfast._version import __version__

        return __version__
    except Exception:  # pragma: no cover - the version module is optional here
        return None


def _resource(environment: Any) -> Any:
    """The resource ``locust --otel`` gives its own metrics (the SDK adds this process's
    ``service.instance.id``, the same one Locust's provider carries here)."""
    import locust
    from opentelemetry.sdk.resources import Resource

    parsed = getattr(environment, "parsed_options", None)
    return Resource.create(
        {
            "service.name": os.environ.get("OTEL_SERVICE_NAME", "locust"),
            "service.version": locust.__version__,
            "host.name": socket.gethostname(),
            "filename": str(getattr(parsed, "locustfile", "") or ""),
            "profile": str(getattr(parsed, "profile", "") or ""),
        }
    )


def enabled(environment: Any) -> bool:
    """``--otel`` and Locust's set-up gave it an SDK meter provider (the SDK is installed and a
    metrics exporter is configured): else Locust has said why and there is nothing to add."""
    parsed = getattr(environment, "parsed_options", None)
    if not getattr(parsed, "otel", False):
        return False
    try:
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
    except ImportError:
        return False
    return isinstance(metrics.get_meter_provider(), MeterProvider)


def install(environment: Any, stats: Any, runner_kind: str) -> OtelExport | None:
    """At ``init``, in a process that sends (not the master): the tables, fed by the native engine's
    drains (``stats.drain_hooks``) and the Python users' ``request`` events, and their export."""
    if runner_kind == "master" or not enabled(environment):
        return None
    exporters = _exporters()
    if not exporters:
        return None
    tables = Tables()
    export = OtelExport(tables, _resource(environment), exporters, _interval_s(), _delta_preferred(), _locust_name)
    stats.drain_hooks.append(tables.add_rows)

    def on_request(request_type: str, name: str, response_time: float | None, exception: object = None, **_kw: Any) -> None:
        tables.add_request(request_type, name, response_time, exception)

    events = environment.events
    events.request.add_listener(on_request)
    events.test_start.add_listener(export.reset)
    stats.reset_hooks.append(export.reset)  # --reset-stats and the web UI's reset, as Locust's tables
    events.test_stop.add_listener(export.final)  # after McpStats' test_stop: the engine's final drain is in
    events.quitting.add_listener(export.stop)
    export.start()
    logger.info("mcpfast: OpenTelemetry metrics of every request (%s, %s), every %g s", LOCUST_DURATION, MCP_DURATION, export.interval_s)
    return export
