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

With ``--workers N`` the supervisor gives every worker one ``PROMETHEUS_MULTIPROC_DIR``, and
``/metrics`` on any worker answers the sum over all of them (prometheus-client's multiprocess
mode), each sample also labelled with its worker's ``pid``.
"""

from __future__ import annotations

import os
import time
from typing import Any, Final

from mcpfast import core
from mcpfast.protocol.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS
from mcpfast.transports.answers import Deferred, Reply
from mcpfast.transports.http import HttpTransport

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
except ImportError as exc:  # pragma: no cover - the extra is part of `make install`
    raise ImportError("--metrics needs prometheus-client: pip install 'mcpfast[metrics]'") from exc

__all__ = ["MULTIPROC_ENV", "Metrics", "request_label", "with_metrics"]

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
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
        self.path = path
        self.max_body = transport.max_body
        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        self.registry = CollectorRegistry()
        registry = None if self.multiprocess else self.registry
        if self.multiprocess:
            multiprocess.MultiProcessCollector(self.registry)
        self.requests = Counter("mcpfast_http_requests", "HTTP requests answered", ["method", "status"], registry=registry)
        self.latency = Histogram(
            "mcpfast_http_request_seconds",
            "request to the end of its answer",
            registry=registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0),
        )
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


def with_metrics(transport: HttpTransport) -> Metrics:
    """``transport`` serving ``/metrics`` too (see the module doc)."""
    return Metrics(transport)
