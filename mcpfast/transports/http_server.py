"""mcpfast's own HTTP/1.1 server: asyncio (uvloop) + httptools, with no ASGI on the hot path.

``HttpTransport.handle`` answers most MCP requests at once with ``(status, headers, body)``: a
sync tool's JSON reply, 202 for a notification, every error. This server parses a request,
calls ``handle`` and writes the whole answer in one ``write``: no scope dict, no
receive/send coroutines, no task. Answers that stream or wait (SSE, the GET stream, an
``async`` tool) come back as an async callable and run as a task with an ASGI-style
``receive``/``send`` pair, so the same code serves them under this server and under any ASGI
server. Any other ASGI application (a Starlette app with mcpfast mounted in it, a test
middleware) is served over plain ASGI.

HTTP/1.1 as clients use it: keep-alive, pipelined requests answered in order, chunked request
bodies, ``Expect: 100-continue``, chunked responses when the length is not known, flow control
on writes. Limits with clear answers: header bytes (431), body bytes (413, checked against
``Content-Length`` before the body arrives), malformed requests (400), connections at most
(503), idle keep-alive connections closed after ``keepalive_timeout``. A refused request is
answered in its turn (after the answers pipelined before it, a running stream included), then
the connection ends with a lingering close, so the client reads the refusal instead of a reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import gc
import logging
import signal
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import unquote

import httptools

from mcpfast import core
from mcpfast.protocol import http as wire
from mcpfast.protocol.http import DEFAULT_MAX_BODY

__all__ = ["DEFAULT_MAX_BODY", "HttpServer", "serve"]

logger = logging.getLogger("mcpfast.transports.http_server")

LINGER_SECONDS: Final = 2.0
"""After a refusal, how long the rest of the client's request is read and dropped before closing."""
MAX_PIPELINE: Final = 16
"""Requests queued behind a running one before the server stops reading from the connection."""

_STATUS: dict[int, bytes] = {
    s.value: b"HTTP/1.1 %d %s\r\n" % (s.value, s.phrase.encode("ascii")) for s in HTTPStatus
}
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"
_DISCONNECT: Final = {"type": "http.disconnect"}


def _status_line(status: int) -> bytes:
    line = _STATUS.get(status)
    return line if line is not None else b"HTTP/1.1 %d Status\r\n" % status


class _Clock:
    """The ``date`` header line, rebuilt at most once a second."""

    __slots__ = ("line", "second")

    def __init__(self) -> None:
        self.second = 0
        self.line = b""

    def get(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.line = b"date: " + email.utils.formatdate(now, usegmt=True).encode("ascii") + b"\r\n"
        return self.line


_clock = _Clock()


def _head(status: int, headers: Any) -> bytes:
    out = bytearray(_status_line(status))
    for key, value in headers:
        out += key
        out += b": "
        out += value
        out += b"\r\n"
    return bytes(out)


_HEADS: dict[int, tuple[Any, int, bytes]] = {}
"""Rendered status line + headers per shared (tuple) header block: the transport's constants."""


def _render(status: int, headers: Any, body: bytes, keep_alive: bool) -> bytes:
    if type(headers) is tuple:  # a constant of the transport's: rendered once
        hit = _HEADS.get(id(headers))
        if hit is not None and hit[0] is headers and hit[1] == status:
            head = hit[2]
        else:
            head = _head(status, headers)
            if len(_HEADS) < 64:  # the entry keeps the tuple alive, so its id is never reused
                _HEADS[id(headers)] = (headers, status, head)
    else:
        head = _head(status, headers)
    if keep_alive:
        return b"%scontent-length: %d\r\n%s\r\n%s" % (head, len(body), _clock.get(), body)
    return b"%scontent-length: %d\r\nconnection: close\r\n%s\r\n%s" % (head, len(body), _clock.get(), body)


def _error_reply(status: int, message: str) -> bytes:
    # The refusal format every runner shares (a JSON-RPC error body), so a client reads one shape.
    return _render(status, [(b"content-type", b"application/json")], wire.refusal(message), False)


_TARGETS: dict[bytes, tuple[str, bytes]] = {}
"""``(path, query)`` per request target without a query (clients use a handful of paths)."""


def _split_target(target: bytes) -> tuple[str, bytes]:
    known = _TARGETS.get(target)
    if known is not None:
        return known
    raw_path, mark, query = target.partition(b"?")
    text = raw_path.decode("latin-1")
    split = (unquote(text) if b"%" in raw_path else text, query)
    if not mark and len(_TARGETS) < 256:
        _TARGETS[target] = split
    return split


class _Request:
    """A request answered over ASGI (streamed or deferred answers, other ASGI apps)."""

    __slots__ = ("body", "headers", "keep_alive", "method", "path", "query", "raw_path")

    def __init__(self, method: str, target: bytes, headers: dict[bytes, bytes], body: bytes, keep_alive: bool):
        self.method = method
        self.raw_path = target.partition(b"?")[0]
        self.path, self.query = _split_target(target)
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive


class _Failure:
    """A malformed or refused request queued behind running answers: answered in its turn, then close."""

    __slots__ = ("message", "status")

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message


Incoming = tuple[str, bytes, dict[bytes, bytes], bytes, bool]
"""A framed request: ``(method, target, headers, body, keep_alive)``."""


class _Connection(asyncio.Protocol):
    """One client connection (see the module doc)."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.parser: httptools.HttpRequestParser | None = None  # the full parser, after a fallback
        self.pending: list[bytes] = []  # bytes of an incomplete request (fast path)
        self.pending_size = 0
        self.need = 0  # that request's whole length, once its head is known
        self.url = b""
        self.headers: dict[bytes, bytes] = {}
        self.header_bytes = 0
        self.chunks: list[bytes] = []
        self.body_size = 0
        self.closing = False
        self.busy: asyncio.Task[None] | None = None
        self.queue: deque[Incoming | _Failure] = deque()
        self.ended = False  # a request was refused: nothing more is read from this connection
        self.last_active = time.monotonic()
        self.lost: asyncio.Future[None] | None = None
        self.paused_writing: asyncio.Future[None] | None = None
        self.paused_reading = False
        self.client: tuple[str, int] | None = None

    # ------------------------------------------------------------ transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        server = self.server
        if len(server.connections) >= server.max_connections:
            transport.write(_error_reply(503, "too many connections"))  # type: ignore[attr-defined]
            transport.close()
            self.closing = True
            return
        server.connections.add(self)
        peer = transport.get_extra_info("peername")
        self.client = (peer[0], peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else None
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server.connections.discard(self)
        lost = self.lost
        if lost is not None and not lost.done():
            lost.set_result(None)
        self.lost = None
        waiter = self.paused_writing
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self.queue.clear()

    def eof_received(self) -> bool | None:
        return None  # close our side too: the client has finished sending

    def pause_writing(self) -> None:
        if self.paused_writing is None:
            self.paused_writing = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        waiter = self.paused_writing
        self.paused_writing = None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def data_received(self, data: bytes) -> None:
        if self.closing or self.ended:
            return
        self.last_active = time.monotonic()
        if self.parser is None:
            self._fast(data)
        else:
            self._feed(data)

    def _fast(self, data: bytes) -> None:
        """Frame requests with the core's ``parse_http``: one call per read, not one per header."""
        if self.pending:
            self.pending.append(data)
            self.pending_size += len(data)
            if self.pending_size < self.need:
                return  # a large body still arriving: join once it is all here
            data = b"".join(self.pending)
            self.pending = []
        server = self.server
        requests, used, status, need = core.parse_http(data, server.max_header_bytes, server.max_body)
        for item in requests:
            if self.busy is None and not self.queue:
                self._answer(*item)
            else:
                self._enqueue(item)
            if self.closing or self.ended:
                return
        if status == 0:
            if used < len(data):
                rest = data[used:]
                self.pending = [rest]
                self.pending_size = len(rest)
                self.need = need
        elif status == 1:  # outside the fast subset: the full parser takes over this connection
            self.parser = httptools.HttpRequestParser(self)
            self._feed(data[used:])
        else:
            self._fail(413, wire.too_large_message(server.max_body))

    def _feed(self, data: bytes) -> None:
        assert self.parser is not None
        try:
            self.parser.feed_data(data)
        except _TooLarge as exc:
            self._fail(exc.status, exc.message)
        except httptools.HttpParserUpgrade:
            self._fail(400, "protocol upgrades are not supported")
        except httptools.HttpParserError as exc:
            cause = exc.__cause__ or exc.__context__  # httptools wraps what a callback raised
            if isinstance(cause, _TooLarge):
                self._fail(cause.status, cause.message)
            else:
                self._fail(400, f"malformed HTTP request: {exc}")

    def _fail(self, status: int, message: str) -> None:
        """Refuse the request being read: answered in order (after the answers before it), then close."""
        transport = self.transport
        if transport is None or self.closing or self.ended:
            return
        if self.busy is None and not self.queue:
            self._refuse(status, message)
            return
        # An answer is still running (a stream, a deferred reply): it owns the socket until it
        # ends; the refusal waits its turn and nothing more is read.
        self.ended = True
        self.queue.append(_Failure(status, message))
        if not self.paused_reading:
            self.paused_reading = True
            transport.pause_reading()

    def _refuse(self, status: int, message: str) -> None:
        """Write the refusal, then a lingering close: our side ends (FIN after the answer) and
        whatever the client still sends (the rest of a large body) is read and dropped until it
        closes or ``LINGER_SECONDS`` pass. Closing at once with unread bytes would send a reset,
        and the client could lose the answer before reading it."""
        transport = self.transport
        self.closing = True  # data_received drops everything from now on
        if transport is None:
            return
        transport.write(_error_reply(status, message))
        if not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        if self.paused_reading:
            self.paused_reading = False
            transport.resume_reading()
        asyncio.get_running_loop().call_later(LINGER_SECONDS, transport.close)

    def _close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    # --------------------------------------------------------- parsing

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers = {}
        self.header_bytes = 0
        self.chunks = []
        self.body_size = 0

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_bytes += len(name) + len(value) + 4
        if self.header_bytes > self.server.max_header_bytes:
            raise _TooLarge(431, "request headers too large")
        key = name.lower()
        known = self.headers.get(key)
        self.headers[key] = value if known is None else known + b", " + value

    def on_headers_complete(self) -> None:
        length = self.headers.get(b"content-length")
        limit = self.server.max_body
        if length is not None and length.isdigit() and int(length) > limit:
            raise _TooLarge(413, wire.too_large_message(limit))
        if self.headers.get(b"expect", b"").lower() == b"100-continue" and self.transport is not None:
            self.transport.write(_CONTINUE)

    def on_body(self, body: bytes) -> None:
        self.body_size += len(body)
        if self.body_size > self.server.max_body:
            raise _TooLarge(413, wire.too_large_message(self.server.max_body))
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        parser = self.parser
        assert parser is not None
        chunks = self.chunks
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        item = (parser.get_method().decode("ascii"), self.url, self.headers, body, parser.should_keep_alive())
        if self.busy is None and not self.queue:
            self._answer(*item)
        else:
            self._enqueue(item)

    def _enqueue(self, item: Incoming) -> None:
        """A request pipelined behind a running answer: answered in order once that one ends."""
        self.queue.append(item)
        if len(self.queue) >= MAX_PIPELINE and not self.paused_reading and self.transport is not None:
            self.paused_reading = True
            self.transport.pause_reading()

    # -------------------------------------------------------- answering

    def _answer(self, method: str, target: bytes, headers: dict[bytes, bytes], body: bytes, keep_alive: bool) -> None:
        """Answer one request: written at once when the app answers at once, else run as a task."""
        handle = self.server.handle
        if handle is not None:
            path, query = _split_target(target)
            try:
                outcome = handle(method, path, query, headers, body)
            except Exception:
                logger.exception("unexpected failure handling %s %s", method, path)
                outcome = (500, [(b"content-type", b"text/plain")], b"internal error")
            if type(outcome) is tuple:
                if not self.closing:
                    status, reply_headers, reply = outcome
                    self.transport.write(_render(status, reply_headers, reply, keep_alive))  # type: ignore[union-attr]
                    if not keep_alive:
                        self._close()
                return
            runner = outcome
        else:
            runner = None
        request = _Request(method, target, headers, body, keep_alive)
        self.busy = asyncio.get_running_loop().create_task(self._run(request, runner))

    async def _run(self, request: _Request, runner: Callable[[Any, Any], Awaitable[None]] | None) -> None:
        cycle = _Cycle(self, request)
        try:
            if runner is not None:
                await runner(cycle.receive_disconnect, cycle.send)
            else:
                await self.server.app(cycle.scope(), cycle.receive, cycle.send)
        except asyncio.CancelledError:
            self._close()
            raise
        except Exception:
            logger.exception("unexpected failure handling %s %s", request.method, request.path)
            if not cycle.started and not self.closing and self.transport is not None:
                self.transport.write(_render(500, [(b"content-type", b"text/plain")], b"internal error", False))
            self._close()
        finally:
            self.busy = None
        if not cycle.finished:
            if not cycle.started and not self.closing and self.transport is not None:
                self.transport.write(_render(500, [(b"content-type", b"text/plain")], b"no response", False))
            self._close()
            return
        if not request.keep_alive:
            self._close()
            return
        self.last_active = time.monotonic()
        while self.queue and self.busy is None and not self.closing:
            item = self.queue.popleft()
            if type(item) is _Failure:
                self._refuse(item.status, item.message)
                return
            self._answer(*item)  # type: ignore[misc]
        if self.paused_reading and not self.queue and not self.ended and self.transport is not None and not self.closing:
            self.paused_reading = False
            self.transport.resume_reading()

    def disconnected(self) -> asyncio.Future[None]:
        lost = self.lost
        if lost is None:
            lost = self.lost = asyncio.get_running_loop().create_future()
            if self.closing:
                lost.set_result(None)
        return lost


class _TooLarge(Exception):
    """Raised from a parser callback: answer ``status`` now and close after it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Cycle:
    """One request answered over ASGI ``send`` (streamed or deferred answers, other ASGI apps)."""

    __slots__ = ("body_sent", "chunked", "conn", "finished", "request", "started")

    def __init__(self, conn: _Connection, request: _Request) -> None:
        self.conn = conn
        self.request = request
        self.started = False
        self.finished = False
        self.chunked = False
        self.body_sent = False

    def scope(self) -> dict[str, Any]:
        request = self.request
        server = self.conn.server
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": "http",
            "path": request.path,
            "raw_path": request.raw_path,
            "query_string": request.query,
            "root_path": "",
            "headers": list(request.headers.items()),
            "client": self.conn.client,
            "server": server.bound,
        }

    async def receive(self) -> dict[str, Any]:
        if not self.body_sent:
            self.body_sent = True
            return {"type": "http.request", "body": self.request.body, "more_body": False}
        return await self.receive_disconnect()

    async def receive_disconnect(self) -> dict[str, Any]:
        # Shielded: the future belongs to the connection, and a waiter being cancelled (the
        # answer is done) must not cancel it for the next request's waiter.
        await asyncio.shield(self.conn.disconnected())
        return _DISCONNECT

    async def send(self, message: dict[str, Any]) -> None:
        conn = self.conn
        transport = conn.transport
        kind = message["type"]
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("http.response.start sent twice")
            self.started = True
            status = message["status"]
            out = bytearray(_status_line(status))
            has_length = False
            for key, value in message.get("headers", ()):
                key = bytes(key).lower()
                value = bytes(value)
                if b"\r" in key or b"\n" in key or b"\r" in value or b"\n" in value:
                    raise RuntimeError("invalid header in the response")
                if key == b"content-length":
                    has_length = True
                out += key + b": " + value + b"\r\n"
            if not has_length and status >= 200 and status not in (204, 304) and self.request.method != "HEAD":
                self.chunked = True
                out += b"transfer-encoding: chunked\r\n"
            if not self.request.keep_alive:
                out += b"connection: close\r\n"
            out += _clock.get() + b"\r\n"
            if transport is not None and not conn.closing:
                transport.write(bytes(out))
            return
        if kind != "http.response.body":
            return
        if not self.started:
            raise RuntimeError("http.response.body before http.response.start")
        if self.finished:
            return
        body = message.get("body", b"")
        more = message.get("more_body", False)
        if not more:
            self.finished = True
        if transport is None or conn.closing:
            return
        if self.chunked:
            if body:
                transport.write(b"%x\r\n%s\r\n%s" % (len(body), body, b"" if more else b"0\r\n\r\n"))
            elif not more:
                transport.write(b"0\r\n\r\n")
        elif body:
            transport.write(body)
        waiter = conn.paused_writing
        if waiter is not None:
            await waiter


class HttpServer:
    """Serves an ``HttpTransport`` (fast path) or any ASGI application on asyncio.

    Args:
        app: the application; one with ``direct_http = True`` and a ``handle`` method
            (``HttpTransport``) is called directly, anything else over ASGI.
        max_body: the largest request body in bytes (413 above); defaults to the app's
            ``max_body`` when it has one.
        max_header_bytes: the largest header block (431 above).
        max_connections: open connections at most (503 and close above).
        keepalive_timeout: seconds an idle keep-alive connection stays open.
    """

    def __init__(
        self,
        app: Any,
        *,
        max_body: int | None = None,
        max_header_bytes: int = 64 * 1024,
        max_connections: int = 10_000,
        keepalive_timeout: float = 30.0,
    ) -> None:
        self.app = app
        self.handle: Callable[..., Any] | None = getattr(app, "handle", None) if _is_transport(app) else None
        self.max_body = max_body if max_body is not None else getattr(app, "max_body", DEFAULT_MAX_BODY)
        self.max_header_bytes = max_header_bytes
        self.max_connections = max_connections
        self.keepalive_timeout = keepalive_timeout
        self.connections: set[_Connection] = set()
        self.bound: tuple[str, int] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._lifespan: _Lifespan | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 8000, *, sock: socket.socket | None = None) -> None:
        """Run the app's startup, then listen (on ``sock`` when given)."""
        loop = asyncio.get_running_loop()
        if self.handle is None:
            self._lifespan = _Lifespan(self.app)
            await self._lifespan.startup()
        if sock is not None:
            self._server = await loop.create_server(lambda: _Connection(self), sock=sock, backlog=2048)
        else:
            self._server = await loop.create_server(lambda: _Connection(self), host, port, backlog=2048, reuse_address=True)
        name = self._server.sockets[0].getsockname()
        self.bound = (name[0], name[1])
        self._sweeper = loop.create_task(self._sweep())

    async def _sweep(self) -> None:
        period = max(0.05, min(self.keepalive_timeout / 2, 1.0))
        while True:
            await asyncio.sleep(period)
            cutoff = time.monotonic() - self.keepalive_timeout
            for conn in list(self.connections):
                if conn.busy is None and not conn.queue and conn.last_active < cutoff:
                    conn._close()

    async def close(self, grace: float = 5.0) -> None:
        """Stop listening, let running answers finish (``grace`` seconds), close, run the app's shutdown."""
        if self._server is not None:
            self._server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for conn in list(self.connections):
            if conn.busy is None:
                conn._close()
        shutdown = getattr(self.app, "aclose", None) if self.handle is not None else None
        if shutdown is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(shutdown(), grace)  # ends sessions: their streams finish
        deadline = time.monotonic() + grace
        while any(c.busy is not None for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for conn in list(self.connections):
            if conn.busy is not None:
                conn.busy.cancel()
            conn._close()
        if self._lifespan is not None:
            await self._lifespan.shutdown()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)


def _is_transport(app: Any) -> bool:
    """An app that answers through ``handle(method, path, query, headers, body)`` (see the module doc)."""
    return getattr(app, "direct_http", False) is True and callable(getattr(app, "handle", None))


class _Lifespan:
    """The ASGI lifespan protocol for an app served over plain ASGI (skipped when unsupported)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def startup(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._main())
        await self.inbox.put({"type": "lifespan.startup"})
        started = asyncio.ensure_future(self.started.wait())
        done, _ = await asyncio.wait([self.task, started], return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        if self.task in done:
            self.task = None  # the app does not do lifespan

    async def shutdown(self) -> None:
        if self.task is None:
            return
        await self.inbox.put({"type": "lifespan.shutdown"})
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stopped.wait(), 5.0)

    async def _main(self) -> None:
        async def send(message: dict[str, Any]) -> None:
            if message["type"].startswith("lifespan.startup"):
                self.started.set()
            elif message["type"].startswith("lifespan.shutdown"):
                self.stopped.set()

        try:
            await self.app({"type": "lifespan", "asgi": {"version": "3.0"}}, self.inbox.get, send)
        except Exception:  # an app without lifespan support raises on the unknown scope type
            pass


async def serve(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    ready: Callable[[HttpServer], None] | None = None,
    freeze_gc: bool = False,
    sock: socket.socket | None = None,
    grace: float = 5.0,
    **options: Any,
) -> None:
    """Serve ``app`` until SIGINT/SIGTERM (see ``HttpServer`` for the options).

    ``sock``: serve this bound socket instead of binding ``host:port``; ``grace``: seconds a
    SIGTERM lets answers in flight finish.

    ``freeze_gc``: after start-up, move every object alive to the collector's permanent
    generation (``gc.freeze``), for a process that does nothing but serve.
    """
    server = HttpServer(app, **options)
    await server.start(host, port, sock=sock)
    if freeze_gc:
        # Everything alive now (modules, the app) lives as long as the process: keep it out of
        # the collector's way, so full collections walk only what requests and sessions made.
        gc.collect()
        gc.freeze()
    logger.info("serving on http://%s:%d", *server.bound)  # type: ignore[misc]
    if ready is not None:
        ready(server)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.close(grace)
