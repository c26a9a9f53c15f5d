"""gevent adapter: the 2024-11-05 HTTP+SSE transport (imports gevent).

The client opens ``GET <sse url>`` (``Accept: text/event-stream``); the server's first event is
``event: endpoint`` whose data is the URL (usually relative, e.g. ``/messages?session_id=...``)
to POST every client message to.  POSTs are answered ``202 Accepted``; every server message -
replies, notifications, server-to-client requests - arrives as an ``event: message`` on the
GET stream.  Closing the GET stream ends the session (there is no DELETE).

* the SSE URL: ``url`` itself when its path ends in ``/sse``, else the sibling ``sse`` of its last
  path segment (``http://h:p/mcp`` -> ``http://h:p/sse``, the reference server's layout);
* lazy: the stream opens on the first request (``connect()``), never at construction, so
  ``--processes`` forks first;
* a reader greenlet feeds :class:`mcpfast.core.SseDecoder` and resolves one
  ``gevent.event.AsyncResult`` per JSON-RPC id (several requests may be in flight); arrival times
  of the events tied to a request (progress, the reply) go to ``Pending.event_times``;
* timeouts send ``notifications/cancelled`` (never for ``initialize``).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import gevent
from gevent.event import AsyncResult
from gevent.event import Event as GEvent
from geventhttpclient import HTTPClient

from mcpfast import core
from mcpfast.client._inflight import InFlight
from mcpfast.client.base import McpClient
from mcpfast.client.errors import (
    BadSse,
    ConnectionFailure,
    HttpStatusError,
    InvalidJson,
    McpClientError,
    RequestTimeout,
    WrongId,
)
from mcpfast.client.http import _network_errors
from mcpfast.client.oauth import TokenSource
from mcpfast.client.reach import Reach
from mcpfast.client.session import CallResult, ClientSession, Pending
from mcpfast.protocol.http import ACCEPT_BOTH, JSON, SSE

__all__ = ["LegacySseClient", "sse_url_for"]

STREAM_NETWORK_TIMEOUT = 3600.0  # s: the GET stream may stay quiet for long; requests time out on their own


def sse_url_for(url: str) -> str:
    """The HTTP+SSE stream URL for an endpoint URL (``.../mcp`` -> ``.../sse``)."""
    parts = urlsplit(url)
    path = parts.path or "/"
    if not path.rstrip("/").endswith("/sse"):
        head = path.rstrip("/").rsplit("/", 1)[0]
        path = f"{head}/sse"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


class LegacySseClient(InFlight, McpClient):
    _dead_message = "SSE stream closed"
    transport = "http"
    session_is_connection = True

    def __init__(
        self,
        url: str,
        session: ClientSession | None = None,
        *,
        token: str | TokenSource | None = None,
        reach: Reach | None = None,
        connection_timeout: float = 10.0,
        concurrency: int = 4,
        **kw: Any,
    ) -> None:
        super().__init__(session or ClientSession("2024-11-05"), **kw)
        self.sse_url = sse_url_for(url)
        parts = urlsplit(self.sse_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url
        self.token = token
        self.sent_token: str | None = None
        self._host, self._port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = parts.scheme == "https"
        self.reach = reach or Reach()
        self.reach.check_url(self._host, self._port)
        self._fixed = self.reach.fixed_headers(self._host, self._port, self._ssl)
        self._sse_path = parts.path + (f"?{parts.query}" if parts.query else "")
        self.connection_timeout = connection_timeout
        self._concurrency = concurrency
        self._errors = _network_errors()
        self._post_http: HTTPClient | None = None
        self._stream_http: HTTPClient | None = None
        self._reader: gevent.Greenlet | None = None
        self._endpoint: AsyncResult | None = None
        self.endpoint_path: str | None = None
        self._waiters: dict[int, AsyncResult] = {}
        self.dead: str | None = None
        self.events = 0

    # -- connection -------------------------------------------------------------------------------
    def _client(self, network_timeout: float, concurrency: int) -> HTTPClient:
        client: HTTPClient = self.reach.http_client(
            self._host,
            self._port,
            self._ssl,
            concurrency=concurrency,
            connection_timeout=self.connection_timeout,
            network_timeout=network_timeout,
        )
        return client

    def _headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept, **self._fixed}
        if self.token:
            # a process's OAuth token source hands out the current token of the moment
            self.sent_token = self.token if isinstance(self.token, str) else self.token.access_token
            headers["Authorization"] = f"Bearer {self.sent_token}"
        return headers

    def connect(self) -> None:
        """Open the GET stream and wait for the ``endpoint`` event (raises McpClientError)."""
        if self._reader is not None and self.dead is None:
            if self._endpoint is not None:
                self._wait_endpoint()
            return
        self.dead = None
        self.endpoint_path = None
        self._endpoint = AsyncResult()
        self._stream_http = self._client(STREAM_NETWORK_TIMEOUT, 1)
        self._reader = gevent.spawn(self._read_stream, self._stream_http, self._endpoint)
        self._wait_endpoint()

    def _wait_endpoint(self) -> None:
        assert self._endpoint is not None
        try:
            self.endpoint_path = self._endpoint.get(timeout=self.timeout)
        except gevent.Timeout:
            self._close_stream("no endpoint event")
            raise BadSse("no endpoint event") from None

    def _read_stream(self, http: HTTPClient, endpoint: AsyncResult) -> None:
        why = "SSE stream ended"
        try:
            try:
                resp = http.request("GET", self._sse_path, headers=self._headers(SSE))
            except self._errors as exc:
                endpoint.set_exception(ConnectionFailure("connection error", str(exc)[:200]))
                why = "connection error"
                return
            try:
                ctype = str(resp.get("content-type") or "").split(";")[0].strip().lower()
                if resp.status_code != 200:
                    endpoint.set_exception(HttpStatusError(resp.status_code, resp.read()[:2000]))
                    why = f"HTTP {resp.status_code}"
                    return
                if ctype != SSE:
                    endpoint.set_exception(BadSse("the SSE endpoint did not answer with an event stream", ctype))
                    why = "not an event stream"
                    return
                decoder = core.SseDecoder()
                while True:
                    line = resp.readline(b"\n")
                    if not line:
                        break
                    now = time.perf_counter()
                    for item in decoder.feed(line):
                        if isinstance(item, core.FrameTooLarge):
                            self._fail_oldest(BadSse("SSE event too large"))
                            continue
                        self._on_event(item, now, endpoint)
            finally:
                resp.release()
        except self._errors:
            why = "SSE stream broke"
        finally:
            if not endpoint.ready():
                endpoint.set_exception(BadSse("no endpoint event"))
            self._on_dead(why)

    def _on_event(self, item: Any, now: float, endpoint: AsyncResult) -> None:
        self.events += 1
        if item.event == "endpoint":
            target = urljoin(self.sse_url, item.data.strip())
            parts = urlsplit(target)
            endpoint.set(parts.path + (f"?{parts.query}" if parts.query else ""))
            return
        if not item.data or item.event not in (None, "", "message"):
            return
        try:
            event = self.session.receive(item.data.encode("utf-8"), now)
        except (WrongId, InvalidJson) as exc:
            self._fail_oldest(exc)
            return
        if event.kind == "reply":
            assert event.reply is not None
            waiter = self._waiters.pop(event.reply.id, None)
            if waiter is not None:
                waiter.set((event.reply, now))
        elif event.kind == "notification" and event.pending is not None:
            event.pending.event_times.append(now)
        elif event.kind == "server-request" and event.response is not None:
            gevent.spawn(self._post_quiet, event.response)

    def _on_dead(self, why: str) -> None:
        self._fail_all(why)
        self.session.initialized = False  # the session ended with its stream

    # -- POSTs ------------------------------------------------------------------------------------------
    @property
    def post_http(self) -> HTTPClient:
        if self._post_http is None:
            self._post_http = self._client(self.timeout, self._concurrency)
        return self._post_http

    def _post(self, data: bytes) -> None:
        self.connect()
        assert self.endpoint_path is not None
        headers = self._headers(ACCEPT_BOTH)
        headers["Content-Type"] = JSON
        try:
            resp = self.post_http.request("POST", self.endpoint_path, body=data, headers=headers)
        except self._errors as exc:
            if "timed out" in str(exc) or exc.__class__.__name__ == "timeout":
                raise RequestTimeout from None
            raise ConnectionFailure("connection error", str(exc)[:200]) from None
        try:
            body = resp.read()
            if resp.status_code not in (200, 202, 204):
                if resp.status_code == 404:
                    self.session.initialized = False
                raise HttpStatusError(resp.status_code, body[:2000])
        except self._errors as exc:
            raise ConnectionFailure("connection error", str(exc)[:200]) from None
        finally:
            resp.release()

    def _post_quiet(self, data: bytes) -> None:
        try:
            self._post(data)
        except McpClientError:
            pass

    # -- McpClient hooks ------------------------------------------------------------------------------
    def _roundtrip(self, pending: Pending, stream: bool = False) -> CallResult:
        waiter = AsyncResult()
        self._waiters[pending.id] = waiter
        try:
            self._post(pending.data)
        except McpClientError:
            self._waiters.pop(pending.id, None)
            raise
        try:
            reply, at = waiter.get(timeout=self.timeout)
        except gevent.Timeout:
            self._waiters.pop(pending.id, None)
            if pending.method != "initialize":
                gevent.spawn(self._post_quiet, self.session.cancel(pending, "timeout"))
            raise RequestTimeout(pending.method) from None
        pending.event_times.append(at)
        return reply

    def _send_notification(self, data: bytes, method: str) -> None:
        self._post(data)

    def _report_stream(self, pending: Pending, intended: float) -> None:
        super()._report_stream(pending, intended)
        self._report_times("sse", pending.event_times, intended)

    def on_legacy_fallback(self) -> None:
        pass

    # -- lifecycle ------------------------------------------------------------------------------------------
    def open_get_stream(self, duration: float = 1.0, on_event: Any = None) -> GEvent:
        """The GET stream is the transport itself here: nothing extra to open."""
        done = GEvent()
        done.set()
        return done

    def delete(self) -> bool:
        """No DELETE in 2024-11-05: closing the stream ends the session (see :meth:`restart`)."""
        return False

    def _close_stream(self, why: str) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.kill(block=True, timeout=1.0)
        if self._stream_http is not None:
            self._stream_http.close()
            self._stream_http = None
        self._on_dead(why)
        self.dead = why

    def restart(self) -> None:
        """End this session (close the stream); the next request opens a new one."""
        self._close_stream("closed")
        self.session.reset()

    def close(self) -> None:
        self._close_stream("closed")
        if self._post_http is not None:
            self._post_http.close()
            self._post_http = None
        self.session.reset()
