"""``mcpfast serve --transport http --metrics``: Prometheus text at ``/metrics`` (prometheus-client).

``with_metrics(transport)`` wraps an ``HttpTransport`` (the native server's direct path and
ASGI alike) and counts, per process:

* ``mcpfast_http_requests_total{method, status}``: HTTP requests answered, by the JSON-RPC
  method a POST carries (``tools/call``, ``initialize``, ``notifications/initialized``...;
  ``response`` for a client's answer to a server request, ``batch``, ``invalid`` for a body
  that is not JSON-RPC, ``other`` for a method MCP does not define: the label set stays
  bounded whatever clients send) or, for the other requests, by the HTTP method (``GET``,
  ``DELETE``; a request refused at the Host check too), and the HTTP status. The label is
  read from the message the transport decoded (``request_label`` is a ``Gate`` of its pipeline,
  placed first so it sees what later gates refuse), not from a second decode of the body;
* ``mcpfast_http_request_seconds``: from the request's body read to its answer's end (a
  stream's whole life for SSE);
* ``mcpfast_sessions_open``, ``mcpfast_streams_open``: handshake-era sessions held by this
  process, SSE streams being written;
* ``mcpfast_store_round_trips_total``, ``mcpfast_store_errors_total``: round trips to a shared
  session store (``--store redis://…``) and those that failed.

* ``process_cpu_seconds_total``, ``process_resident_memory_bytes`` (and the rest of
  prometheus-client's process collector in one process): the server's CPU time and memory.

The native server's lane (``core.HttpLane``) answers the requests it can without the full path,
so without this wrapper's ``handle``: it counts them itself (``HttpLane.count_into``: counters
and a histogram of nanoseconds over the same buckets, kept in the core), and the page adds its
counts to these series when it is read. A request is counted by the path that answered it, the
lane or ``handle``, never by both.

With ``--workers N`` the supervisor gives every worker one ``PROMETHEUS_MULTIPROC_DIR``, and
``/metrics`` on any worker answers the sum over all of them (prometheus-client's multiprocess
mode). Each worker's lane counts in a file of that directory (``mcpfast-lane-<pid>.tally``,
mapped into memory: written by the worker alone, read by whichever answers the page), so the
sum holds every worker's requests, the lane's included, when it is read. The process series
are then the sums over the live workers (read from ``/proc``, as the workers share the
machine): the CPU time of a worker that exited leaves the sum with it.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from mcpfast import core
from mcpfast.protocol.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS
from mcpfast.transports.answers import Deferred, Reply
from mcpfast.transports.http import HttpTransport

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest, multiprocess
    from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector
    from prometheus_client.samples import Sample
    from prometheus_client.utils import floatToGoString
except ImportError as exc:  # pragma: no cover - the extra is part of `make install`
    raise ImportError("--metrics needs prometheus-client: pip install 'mcpfast[metrics]'") from exc

__all__ = ["LANE_TALLY", "MULTIPROC_ENV", "Metrics", "request_label", "with_metrics"]

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
LANE_TALLY: Final = "mcpfast-lane-{pid}.tally"
"""A worker's lane counts, in the multiprocess directory (not ``*.db``: prometheus-client reads those)."""
REQUESTS: Final = "mcpfast_http_requests"
LATENCY: Final = "mcpfast_http_request_seconds"
BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
"""The bounds of ``mcpfast_http_request_seconds``, in seconds (the lane's in nanoseconds)."""
_BOUNDS_NS: Final = [round(b * 1e9) for b in BUCKETS]
_PROCESS: Final = ("process_cpu_seconds_total", "process_resident_memory_bytes")
_TEXT: Final = ((b"content-type", b"text/plain; version=0.0.4; charset=utf-8"),)
_RPC_METHODS: Final = CLIENT_REQUESTS | CLIENT_NOTIFICATIONS
_HTTP_METHODS: Final = frozenset({"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"})


def http_label(method: str) -> str:
    """The ``method`` label of a request that carries no JSON-RPC message: its HTTP method."""
    return method if method in _HTTP_METHODS else "other"


def request_label(method: str, message: Any) -> str:
    """The ``method`` label of one HTTP request: the JSON-RPC method of the message its POST
    carried as the transport decoded it (bounded to MCP's own: ``other`` beyond them),
    ``response``/``batch``/``invalid``, else (``message`` is ``None``) the HTTP method."""
    if message is None:
        return http_label(method)
    if isinstance(message, core.JsonRpcError):
        return "invalid"
    if type(message) is list:
        return "batch"
    if message.kind in ("result", "error"):
        return "response"
    rpc = message.method
    return rpc if rpc in _RPC_METHODS else "other"


class Metrics:
    """The wrapped transport (``handle``/``__call__`` as the transport's), counting as it goes."""

    direct_http: Final = True

    def __init__(self, transport: HttpTransport, path: str = "/metrics") -> None:
        self.transport = transport
        self._label: str | None = None
        transport.gates.insert(0, self._observe)
        transport.observers.add(self._observe)  # the lane may answer past it: it counts too
        self.path = path
        self.max_body = transport.max_body
        shared = os.environ.get(MULTIPROC_ENV)
        self.multiprocess = bool(shared)
        self.registry = CollectorRegistry()
        registry = None if self.multiprocess else self.registry
        # The two series the lane counts in too: collected through _WithLane, which adds its counts.
        self.requests = Counter(REQUESTS, "HTTP requests answered", ["method", "status"], registry=None)
        self.latency = Histogram(LATENCY, "request to the end of its answer", registry=None, buckets=BUCKETS)
        self._lane: core.HttpLane | None = None
        self._tally: _TallyFile | None = None
        self._shared = Path(shared) if shared else None
        if self._shared is not None:
            self._tally = _TallyFile(self._shared / LANE_TALLY.format(pid=os.getpid()))
            self.registry.register(_WithLane([multiprocess.MultiProcessCollector(None)], self._lane_counts))
            self.registry.register(_Workers(self._shared))
        else:
            self.registry.register(_WithLane([self.requests, self.latency], self._lane_counts))
            ProcessCollector(registry=self.registry)
        # livesum: summed over the live workers in multiprocess mode (ignored otherwise)
        self.sessions = Gauge("mcpfast_sessions_open", "handshake-era sessions held", registry=registry, multiprocess_mode="livesum")
        self.streams = Gauge("mcpfast_streams_open", "SSE answers being written", registry=registry, multiprocess_mode="livesum")
        self.store_ops = Counter("mcpfast_store_round_trips", "round trips to the shared session store", registry=registry)
        self.store_errors = Counter("mcpfast_store_errors", "failed round trips to the shared session store", registry=registry)
        self._children: dict[tuple[str, int], Any] = {}
        self._seen_ops = 0
        self._seen_errors = 0

    def __getattr__(self, name: str) -> Any:  # aclose, sessions... : the transport's
        return getattr(self.transport, name)

    def open_lane(
        self, *, max_head: int, max_body: int, head: Callable[[int, Any], bytes], clock: Callable[[], bytes]
    ) -> core.HttpLane | None:
        """The transport's lane (``HttpTransport.open_lane``), counting what it answers where this
        page reads it."""
        return self.transport.open_lane(max_head=max_head, max_body=max_body, head=head, clock=clock, counted=self._count_in)

    def _count_in(self, lane: core.HttpLane) -> None:
        self._lane = lane
        if self._tally is not None:
            lane.count_into(_BOUNDS_NS, self._tally.cells(core.HttpLane.tally_cells(_BOUNDS_NS)))
        else:
            lane.count_into(_BOUNDS_NS)

    def _lane_counts(self) -> list[_Counts]:
        """What the lanes counted: this process's, or every worker's (multiprocess mode)."""
        if self._shared is not None:
            return _read_tallies(self._shared)
        counted = self._lane.tally() if self._lane is not None else None
        return [counted] if counted is not None else []

    def _count(self, label: str, status: int, started: float) -> None:
        child = self._children.get((label, status))
        if child is None:
            child = self._children[(label, status)] = self.requests.labels(label, str(status))
        child.inc()
        self.latency.observe(time.perf_counter() - started)
        self._sync()

    def _sync(self) -> None:
        """This process's gauges and store counters, brought up to date (each worker keeps its own)."""
        transport = self.transport
        self.sessions.set(len(transport.sessions))
        store = transport.table.store
        if store is not None:
            if store.ops != self._seen_ops:
                self.store_ops.inc(store.ops - self._seen_ops)
                self._seen_ops = store.ops
            if store.errors != self._seen_errors:
                self.store_errors.inc(store.errors - self._seen_errors)
                self._seen_errors = store.errors

    def _render(self) -> Reply:
        self._sync()
        return (200, _TEXT, generate_latest(self.registry))

    def _observe(self, method: str, endpoint: str | None, headers: dict[bytes, bytes], message: Any) -> None:
        """The transport's first gate: the request's label, from the message it decoded."""
        self._label = request_label(method, message)

    def handle(self, method: str, path: str, query: bytes, headers: dict[bytes, bytes], body: bytes, root: str = "") -> Reply | Deferred:
        if path == self.path:
            return self._render() if method == "GET" else (405, [(b"allow", b"GET")], b"")
        started = time.perf_counter()
        self._label = None
        outcome = self.transport.handle(method, path, query, headers, body, root)  # sync: _observe ran in it, or not at all
        label = self._label if self._label is not None else http_label(method)
        if isinstance(outcome, tuple):
            self._count(label, outcome[0], started)
            return outcome

        async def deferred(receive: Any, send: Any) -> None:
            status = 0
            streaming = False

            async def counted(message: dict[str, Any]) -> None:
                nonlocal status, streaming
                if message["type"] == "http.response.start":
                    status = message["status"]
                    streaming = any(k == b"content-type" and v.startswith(b"text/event-stream") for k, v in message["headers"])
                    if streaming:
                        self.streams.inc()
                await send(message)

            try:
                await outcome(receive, counted)
            finally:
                if streaming:
                    self.streams.dec()
                self._count(label, status, started)

        return deferred

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """ASGI (uvicorn, granian): the transport's own ASGI entry, answering through :meth:`handle`
        (``/metrics`` included), so both paths count the same requests the same way."""
        await self.transport.asgi(scope, receive, send, self.handle)


_Counts = tuple[list[tuple[str, int, int]], list[int], list[int], int]
"""A lane's tally as ``HttpLane.tally`` reads it: ``(requests, bounds, buckets, nanos)``."""


class _TallyFile:
    """This worker's lane tally file, mapped (created empty; the lane starts and fills it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._map: mmap.mmap | None = None
        self._view: memoryview | None = None
        path.touch()  # the workers' pids are read from these names (_Workers), lane or not

    def cells(self, count: int) -> memoryview:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, count * 8)
            self._map = mmap.mmap(fd, count * 8)
        finally:
            os.close(fd)
        self._view = memoryview(self._map).cast("Q")
        return self._view


def _read_tallies(directory: Path) -> list[_Counts]:
    """Every worker's lane tally in ``directory`` (the workers that ever ran: their requests count)."""
    found: list[_Counts] = []
    if not core.HAS_LANE:
        return found
    for path in directory.glob(LANE_TALLY.format(pid="*")):
        try:
            with open(path, "r+b") as f:
                mapped = mmap.mmap(f.fileno(), 0)
        except (OSError, ValueError):  # gone, or made but not sized yet: nothing counted there
            continue
        with mapped, memoryview(mapped) as raw, raw.cast("Q") as view:
            counted = core.HttpLane.read_tally(view)
        if counted is not None:
            found.append(counted)
    return found


class _WithLane(Collector):
    """``sources``' series, with the lanes' counts added to the requests and their histogram."""

    def __init__(self, sources: Iterable[Any], counts: Callable[[], list[_Counts]]) -> None:
        self.sources = list(sources)
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        counts = self.counts()
        requests: dict[tuple[str, str], float] = {}
        buckets = [0] * (len(_BOUNDS_NS) + 1)
        seconds = 0.0
        for counted, bounds, in_bucket, nanos in counts:
            for label, status, n in counted:
                key = (label, str(status))
                requests[key] = requests.get(key, 0) + n
            if bounds != _BOUNDS_NS:  # cannot be: every worker runs this module
                raise ValueError(f"a lane tally with other buckets: {bounds}")
            for i, n in enumerate(in_bucket):
                buckets[i] += n
            seconds += nanos / 1e9
        seen: set[str] = set()
        for source in self.sources:
            for family in source.collect():
                if family.name == REQUESTS:
                    seen.add(REQUESTS)
                    yield _with_requests(family, requests)
                elif family.name == LATENCY:
                    seen.add(LATENCY)
                    yield _with_latency(family, buckets, seconds)
                else:
                    yield family
        if REQUESTS not in seen and requests:  # nothing counted by the full path (multiprocess: no file has it yet)
            yield _with_requests(Metric(REQUESTS, "HTTP requests answered", "counter"), requests)
        if LATENCY not in seen and any(buckets):
            yield _with_latency(Metric(LATENCY, "request to the end of its answer", "histogram"), buckets, seconds)


def _with_requests(family: Metric, lane: dict[tuple[str, str], float]) -> Metric:
    out = Metric(family.name, family.documentation, family.type)
    total = REQUESTS + "_total"
    left = dict(lane)
    for sample in family.samples:
        if sample.name == total:
            key = (sample.labels["method"], sample.labels["status"])
            sample = sample._replace(value=sample.value + left.pop(key, 0))
        out.samples.append(sample)
    for (method, status), n in left.items():
        out.samples.append(Sample(total, {"method": method, "status": status}, float(n)))
    return out


def _with_latency(family: Metric, lane: list[int], seconds: float) -> Metric:
    """``family`` (a histogram over ``BUCKETS``) with the lanes' requests added (``lane``: per
    bucket, not cumulative)."""
    cumulative = {b: float(sum(lane[: i + 1])) for i, b in enumerate(BUCKETS)}
    everyone = float(sum(lane))
    out = Metric(family.name, family.documentation, family.type)
    added: dict[str, float] = {
        LATENCY + "_count": everyone,
        LATENCY + "_sum": seconds,
    }
    found: set[float | str] = set()
    for sample in family.samples:
        if sample.name == LATENCY + "_bucket":
            le = float(sample.labels["le"])
            sample = sample._replace(value=sample.value + cumulative.get(le, everyone))
            found.add(le)
        elif sample.name in added:
            sample = sample._replace(value=sample.value + added[sample.name])
            found.add(sample.name)
        out.samples.append(sample)
    if not found:  # a histogram the full path never observed into
        for b in (*BUCKETS, float("inf")):
            out.samples.append(Sample(LATENCY + "_bucket", {"le": floatToGoString(b)}, cumulative.get(b, everyone)))
        for name, value in added.items():
            out.samples.append(Sample(name, {}, value))
    return out


class _Workers(Collector):
    """The process series of a multiprocess server: sums over its live workers (the processes
    whose lane tally files are in ``directory`` and that share this worker's parent)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def collect(self) -> Iterator[Metric]:
        totals = dict.fromkeys(_PROCESS, 0.0)
        parent = os.getppid()
        for path in self.directory.glob(LANE_TALLY.format(pid="*")):
            pid = path.name.removeprefix("mcpfast-lane-").removesuffix(".tally")
            if not pid.isdigit() or _parent(int(pid)) != parent:
                continue  # exited (its pid perhaps taken by another process since)
            for family in ProcessCollector(pid=functools.partial(int, pid), registry=None).collect():
                for sample in family.samples:
                    if sample.name in totals:
                        totals[sample.name] += sample.value
        yield CounterMetricFamily("process_cpu_seconds", "Total user and system CPU time spent in seconds.", value=totals[_PROCESS[0]])
        yield GaugeMetricFamily(_PROCESS[1], "Resident memory size in bytes.", value=totals[_PROCESS[1]])


def _parent(pid: int) -> int | None:
    """The parent of ``pid`` (``None``: no such process)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    return None


def with_metrics(transport: HttpTransport) -> Metrics:
    """``transport`` serving ``/metrics`` too (see the module doc)."""
    return Metrics(transport)
