"""mcpfast's own HTTP/1.1 server: asyncio (uvloop) + the core's strict parser, with no ASGI on the hot path.

``HttpTransport.handle`` answers most MCP requests at once with ``(status, headers, body)``: a
sync tool's JSON reply, 202 for a notification, every error. This server parses a request,
calls ``handle`` and writes the whole answer: no scope dict, no receive/send coroutines, no
task. The transport's lane (``HttpTransport.open_lane``) answers the commonest requests before
that, in the core. A reply that waits for one future (a session kept in a shared store, an
``async`` tool's reply, ``mcpfast.transports.answers.Later``) is written from that future's
callback, still without a task. Answers that stream or wait otherwise (SSE, the GET stream)
come back as an async callable and run as a task with an ASGI-style ``receive``/``send``
pair, so the same code serves them under this server and under any ASGI server. Any other
ASGI application (a Starlette app with mcpfast mounted in it, a test middleware) is served
over plain ASGI.

The replies a connection makes while the loop handles its ready reads go out in one write per
connection at the end of that loop iteration (``_Connection._write``), in order: a write per
reply, at once, would wake the client (a load generator on another CPU) once per reply while
the server still has reads to handle.

HTTP/1.1 as clients use it: keep-alive, pipelined requests answered in order, chunked request
bodies, ``Expect: 100-continue``, chunked responses when the length is not known, flow control
on writes. One parser judges the bytes, the core's ``parse_http`` (strict, on ``httparse`` in
the Rust core): a byte that cannot belong to a request is refused when it arrives (a TLS
ClientHello, binary junk, a request line without a version: 400), the head limit holds while
the head arrives (414/431), a body over the limit is refused before it arrives (413), HTTP/1.0
with ``Transfer-Encoding`` is refused (400), ``Upgrade`` is not acted on. Every refusal is
one answer, in its turn (after the answers pipelined before it, a running stream included),
then the connection ends with a lingering close, so the client reads it instead of a reset.
Slow clients: a head must be complete within ``head_timeout`` seconds of its first byte (408),
idle keep-alive connections close after ``keepalive_timeout`` (not one whose next request has
already arrived), and at most ``max_connections`` are open (503 above). Absolute-form targets
(``POST http://host/mcp``) are served as their path, with the target's authority as the Host
(RFC 9112 §3.2.2).

Open files: every connection is a file descriptor, and a process has ``RLIMIT_NOFILE`` of them
(``serve`` raises its soft limit to the hard one). Past the limit ``accept`` fails with
``EMFILE``, and the event loop (libuv) closes the connections it cannot take without a word: the
client reads a reset. So the server refuses before: a connection whose descriptor is among the
last ``fd_reserve`` of the limit gets ``503`` with its reason (``too many connections (open-file
limit N)``) and ``Retry-After``, then a lingering close; the reserve leaves room for the
connections the loop accepts at once (up to the listen backlog) before any is looked at, and for
the refusals themselves. Each kind of refusal is logged once.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import fcntl
import functools
import logging
import os
import resource
import signal
import socket
import ssl
import struct
import termios
import time
from collections import deque
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote

from mcpfast import core
from mcpfast.protocol import http as wire
from mcpfast.protocol.host import absolute_form
from mcpfast.protocol.http import DEFAULT_MAX_BODY, DEFAULT_MAX_HEAD
from mcpfast.server.inline import running_loop
from mcpfast.transports.answers import DISCONNECT, Disconnect, Later, Outcome
from mcpfast.transports.collector import Collector

if TYPE_CHECKING:
    from mcpfast.core import HttpLane

__all__ = [
    "BACKLOG",
    "DEFAULT_HEAD_TIMEOUT",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_HEAD",
    "HttpServer",
    "fd_reserve",
    "raise_open_files_limit",
    "serve",
]

logger = logging.getLogger("mcpfast.transports.http_server")

DEFAULT_HEAD_TIMEOUT: Final = 10.0
"""Seconds from a head's first byte to its blank line (408 and close after): bounds slowloris."""
DEFAULT_MAX_CONNECTIONS: Final = 10_000
"""Open connections at most (a new one gets 503 and is closed)."""
BACKLOG: Final = 2048
"""The listen backlog: connections the kernel holds until the server accepts them."""
SWEEP_SLICE: Final = 1024
"""Connections the idle sweep looks at in one loop turn (the rest later in its period)."""
RETRY_AFTER: Final = b"1"
"""Seconds a client refused for a lack of connections is told to wait (``Retry-After``)."""
LINGER_SECONDS: Final = 2.0
"""After a refusal, how long the rest of the client's request is read and dropped before closing."""
_JUDGE_EVERY_READ: Final = 8 * 1024
"""An incomplete head shorter than this is judged again on every read (a bad byte refused when
it arrives); a longer one when it has doubled, a read may end it, or it passed the limit."""
MAX_PIPELINE: Final = 16
"""Requests queued behind a running one before the server stops reading from the connection."""
WRITE_BATCH: Final = 64 * 1024
"""Bytes of replies a connection holds for its one write per loop iteration: more go out at once."""

TLS_READ_BUFFER: Final = 256 * 1024
"""Bytes the TLS layer may decrypt in one read into a connection's buffer (as many as it reads
at once into a buffer of its own): a larger request is read in turns."""

_CONTINUE_STATUS: Final = 100
_STATUS: dict[int, bytes] = {s.value: b"HTTP/1.1 %d %s\r\n" % (s.value, s.phrase.encode("ascii")) for s in HTTPStatus}
_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


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
    # The refusal format every runner shares (a JSON-RPC error body), so a client reads one shape;
    # a 503 is a lack of room now, so it says when to come back.
    headers = [(b"content-type", b"application/json")]
    if status == 503:
        headers.append((b"retry-after", RETRY_AFTER))
    return _render(status, headers, wire.refusal(message), False)


def raise_open_files_limit() -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit (as far as the OS lets it):
    each connection is a descriptor, and a soft limit is often a small default. Returns the
    soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def fd_reserve(limit: int) -> int:
    """Descriptors kept free below an open-file ``limit`` (see the module doc): a sixteenth of it,
    at least 16 and at most the listen backlog (1,250 of 20,000)."""
    return max(16, min(BACKLOG, limit // 16))


def _unread(transport: asyncio.BaseTransport) -> int:
    """Bytes the client sent that the kernel holds for the connection, not read yet (0 when unknown)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0])
    except (OSError, ValueError):
        return 0


_TARGETS: dict[bytes, tuple[str, bytes]] = {}
"""``(path, query)`` per request target without a query (clients use a handful of paths)."""


def _may_end_head(last: list[bytes]) -> bool:
    """Whether the newest read (``last[-1]``, after at least two earlier bytes in ``last``) can
    complete a head's blank line. Re-parsing an incomplete head only then, or when it has
    doubled, keeps a client that trickles a long head byte by byte from costing O(n^2)."""
    tail = b"".join(last)
    return b"\n\n" in tail or b"\n\r\n" in tail


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


class _Connection(asyncio.BaseProtocol):
    """One client connection (see the module doc).

    A ``BaseProtocol`` with its own ``data_received``, not an ``asyncio.Protocol``: uvloop's TLS
    layer reads into a protocol's buffer (``_TlsConnection``) only when it is not one.
    """

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.pending: list[bytes] = []  # bytes of an incomplete request
        self.pending_size = 0
        self.need = 0  # that request's whole length, once its head is known
        self.judged = 0  # pending bytes the parser last saw (an incomplete head)
        self.head_started: float | None = None  # when the incomplete head's first bytes came
        self.continued = False  # ``100 Continue`` sent for the incomplete request
        self.closing = False
        self.busy: asyncio.Task[None] | Later | None = None
        self.queue: deque[Incoming | _Failure] = deque()
        self.ended = False  # a request was refused: nothing more is read from this connection
        self.last_active = time.monotonic()
        self.lost: asyncio.Future[None] | None = None
        self.paused_writing: asyncio.Future[None] | None = None
        self.paused_reading = False
        self.client: tuple[str, int] | None = None
        self.out: list[bytes] = []  # replies to write at the end of this loop iteration (``_write``)
        self.out_size = 0

    # ------------------------------------------------------------ transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        server = self.server
        sock = transport.get_extra_info("socket")
        # Descriptors are handed out lowest first: one at or above the ceiling means the process
        # holds that many, and the last ones are kept for what the loop accepts at once.
        fd = sock.fileno() if sock is not None else -1
        if len(server.connections) >= server.max_connections or fd >= server.fd_ceiling:
            self._refuse(503, server.refusal(fd))
            return
        server.connections.add(self)
        peer = transport.get_extra_info("peername")
        self.client = (peer[0], peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.out = []
        self.server.connections.discard(self)
        busy = self.busy
        if type(busy) is Later:  # nobody reads its answer now (work only this client would read is abandoned)
            busy.cancel()
        lost = self.lost
        if lost is not None and not lost.done():
            lost.set_result(None)
        self.lost = None
        waiter = self.paused_writing
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self.queue.clear()

    def eof_received(self) -> bool | None:
        if self.pending and not self.closing and not self.ended:
            data = b"".join(self.pending)  # an incomplete head not judged yet: judged now
            self.pending = []
            self.pending_size = self.need = self.judged = 0
            self._frame(data)
        self._flush()  # the transport closes when this returns: the replies made so far go first
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
        self.last_active = now = time.monotonic()
        lane = self.server.lane
        if lane is None or self.pending:
            self._frame(data)
            return
        # The usual read, whole requests the lane answers: no frame more than needed.
        fed = lane.feed(data, now, self.busy is None and not self.queue)
        if type(fed) is bytes:
            self.continued = False
            self._write(fed)
            return
        self._framed(data, *fed)  # type: ignore[misc]

    def _frame(self, data: bytes) -> None:
        """Frame requests with the core's ``parse_http``: one call per read, not one per header."""
        if self.pending:
            self.pending.append(data)
            self.pending_size += len(data)
            if self.pending_size < self.need:
                return  # a large body still arriving: join once it is all here
            if (
                not self.need
                and self.judged >= _JUDGE_EVERY_READ
                and self.pending_size < 2 * self.judged
                and self.pending_size <= self.server.max_header_bytes
                and not _may_end_head(self.pending[-3:])
            ):
                return  # a head trickling in: judged again when it doubles, may be complete or is too long
            data = b"".join(self.pending)
            self.pending = []
        server = self.server
        lane = server.lane
        if lane is None:
            self._framed(data, None, *core.parse_http(data, server.max_header_bytes, server.max_body))
            return
        fed = lane.feed(data, self.last_active, self.busy is None and not self.queue)
        if type(fed) is bytes:  # the usual read: whole requests the lane answered, the replies alone
            self.continued = False
            self._write(fed)
            return
        self._framed(data, *fed)  # type: ignore[misc]

    def _framed(
        self,
        data: bytes,
        replies: bytes | None,
        requests: list[Incoming],
        used: int,
        status: int,
        need: int,
        reason: str,
        waiting: tuple[Outcome | Later, bytes] | None = None,
    ) -> None:
        """Go on from what the parser (or the lane) made of ``data``: ``replies`` written first,
        then the lane's call that waits (``waiting``), then ``requests``."""
        if replies is not None:
            self.continued = False
            self._write(replies)
        if waiting is not None:
            self.continued = False
            self._wait(*waiting)
        server = self.server
        if requests:
            self.continued = False
        for item in requests:
            if self.busy is None and not self.queue:
                self._answer(*item)
            else:
                self._enqueue(item)
            if self.closing or self.ended:
                return
        if status >= 400:
            self._fail(status, wire.too_large_message(server.max_body) if status == 413 else reason)
            return
        if used < len(data):
            rest = data[used:]
            self.pending = [rest]
            self.pending_size = self.judged = len(rest)
            self.need = need
            if need:  # the head is complete: its deadline is met
                self.head_started = None
            elif self.head_started is None or requests:
                self.head_started = self.last_active
            # Not while an earlier answer owns the socket (its bytes would be split): a client
            # sends the body anyway after waiting a little (RFC 9110 §10.1.1).
            if status == _CONTINUE_STATUS and not self.continued and self.busy is None and not self.queue and self.transport is not None:
                self.continued = True
                self._write(_CONTINUE)
        else:
            self.pending_size = self.need = 0
            self.head_started = None

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
        self._flush()
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
        self._flush()
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def _close_idle(self) -> None:
        """Close a keep-alive connection idle past the timeout, unless its client's next request
        has arrived (the kernel holds it, the loop has not read it yet): closing then would
        answer the request the client already sent with a reset. It is read and served instead."""
        transport = self.transport
        if transport is not None and _unread(transport) > 0:
            return
        self._close()

    def _write(self, data: bytes) -> None:
        """Write ``data`` with the other replies of this loop iteration: one write (one system
        call) per connection and iteration, after every read the loop had ready. Written at
        once, each reply made while the loop handles its reads would wake a client (or a load
        generator) on another CPU before the next read is handled. With no other connection
        open there is no other read to handle first: written now. Order is kept: every write
        of the connection goes through here, or flushes first (``_flush``)."""
        out = self.out
        if not out:
            server = self.server
            if len(server.connections) < 2:
                if self.transport is not None and not self.closing:
                    self.transport.write(data)
                return
            server.to_flush(self)
        out.append(data)
        self.out_size += len(data)
        if self.out_size >= WRITE_BATCH:
            self._flush()

    def _flush(self) -> None:
        """Write what ``_write`` holds, now (before a write of another kind, or a close)."""
        out = self.out
        if not out:
            return
        self.out = []
        self.out_size = 0
        transport = self.transport
        if transport is not None and not self.closing:
            transport.write(out[0] if len(out) == 1 else b"".join(out))

    # -------------------------------------------------------- answering

    def _enqueue(self, item: Incoming) -> None:
        """A request pipelined behind a running answer: answered in order once that one ends."""
        self.queue.append(item)
        if len(self.queue) >= MAX_PIPELINE and not self.paused_reading and self.transport is not None:
            self.paused_reading = True
            self.transport.pause_reading()

    def _answer(self, method: str, target: bytes, headers: dict[bytes, bytes], body: bytes, keep_alive: bool) -> None:
        """Answer one request: written at once when the app answers at once, else run as a task."""
        if target[:1] != b"/":
            split = absolute_form(target)
            if split is not None:
                headers[b"host"], target = split
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
                    self._write(_render(status, reply_headers, reply, keep_alive))
                    if not keep_alive:
                        self._close()
                return
            if type(outcome) is Later:  # an answer once a future is done: a reply is written from its callback
                self.busy = outcome
                outcome.listen(functools.partial(self._later, method, target, headers, body, keep_alive))
                return
            runner = outcome
        else:
            runner = None
        request = _Request(method, target, headers, body, keep_alive)
        self.busy = asyncio.get_running_loop().create_task(self._run(request, runner))

    async def _run(
        self, request: _Request, runner: Callable[[Any, Any], Awaitable[None]] | None, done: Callable[[int], object] | None = None
    ) -> None:
        """Answer over ASGI (``done(status)`` once the answer is over: 0 when none started)."""
        self._flush()  # the answer's writes are its own (and its back-pressure): what came before goes first
        cycle = _Cycle(self, request)
        try:
            if runner is not None:
                # a receive whose future the answer may watch itself, without a task reading it
                await runner(Disconnect(self.disconnected()), cycle.send)
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
            if done is not None:
                done(cycle.status)
        if not cycle.finished:
            if not cycle.started and not self.closing and self.transport is not None:
                self.transport.write(_render(500, [(b"content-type", b"text/plain")], b"no response", False))
            self._close()
            return
        self._next(request.keep_alive)

    def _later(
        self,
        method: str,
        target: bytes,
        headers: dict[bytes, bytes],
        body: bytes,
        keep_alive: bool,
        outcome: Outcome,
        done: Callable[[int], object] | None = None,
    ) -> None:
        """A ``Later``'s answer is known: write a reply, then go on with the requests behind it;
        or run a deferred answer (the answer streams) as any other. ``done(status)`` once the
        answer is over."""
        if type(outcome) is not tuple:
            request = _Request(method, target, headers, body, keep_alive)
            self.busy = asyncio.get_running_loop().create_task(self._run(request, outcome, done))  # type: ignore[arg-type]
            return
        self.busy = None
        status, reply_headers, reply = outcome
        if done is not None:
            done(status)  # (before the write: whoever reads the reply finds it counted)
        if not self.closing and self.transport is not None:
            self._write(_render(status, reply_headers, reply, keep_alive))
        self._next(keep_alive)

    def _wait(self, answer: Outcome | Later, target: bytes) -> None:
        """The lane's call that waits (``HttpLane.feed``'s ``waiting``): its answer once known,
        as a ``Later``'s (the requests behind it wait their turn), counted by the lane then."""
        lane = self.server.lane
        assert lane is not None
        answered = functools.partial(
            self._later, "POST", target, {}, b"", True, done=functools.partial(_count_waited, lane, self.last_active)
        )
        if type(answer) is Later:
            self.busy = answer
            answer.listen(answered)
        else:
            answered(answer)  # type: ignore[arg-type]

    def _next(self, keep_alive: bool) -> None:
        """An answer ended: close if it said so, else answer the requests pipelined behind it."""
        if not keep_alive:
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


def _count_waited(lane: HttpLane, started: float, status: int) -> None:
    """Count a lane's call that waited once its answer is over, with its time from its read."""
    lane.count_waited(status, time.monotonic() - started)


class _TlsConnection(_Connection, asyncio.BufferedProtocol):
    """A connection under TLS: the TLS layer decrypts into ``buffer``, one for every connection.

    Given no buffer, the TLS layer (uvloop's and asyncio's) reads each record into a new 256 KiB
    ``bytes`` and shrinks it to what came. glibc serves a block that large with ``mmap`` until
    a block above its threshold is freed whole, which may not happen for as long as clients
    keep their connections: every read is then an ``mmap``, two page faults, an ``mremap`` and
    a ``munmap``, about twice the rest of a small call's CPU. Here a read costs a copy of
    the request. One buffer serves every connection: the TLS layer fills it and calls
    ``buffer_updated`` before it returns to the loop, and the bytes are copied out at once.
    """

    def __init__(self, server: HttpServer, buffer: memoryview) -> None:
        super().__init__(server)
        self.buffer = buffer

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self.buffer[:nbytes].tobytes())


class _Cycle:
    """One request answered over ASGI ``send`` (streamed or deferred answers, other ASGI apps)."""

    __slots__ = ("body_sent", "chunked", "conn", "finished", "head", "request", "started", "status")

    def __init__(self, conn: _Connection, request: _Request) -> None:
        self.conn = conn
        self.request = request
        self.head = b""
        """A head with a Content-Length, held back to go out with the body in one write."""
        self.started = False
        self.status = 0
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
        return DISCONNECT

    async def send(self, message: dict[str, Any]) -> None:
        conn = self.conn
        transport = conn.transport
        kind = message["type"]
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("http.response.start sent twice")
            self.started = True
            status = self.status = message["status"]
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
            if has_length:  # the body follows: one write (one syscall) for both
                self.head = bytes(out)
            elif transport is not None and not conn.closing:
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
        if self.head:
            head, self.head = self.head, b""
            transport.write(head + body)
        elif self.chunked:
            if body:
                transport.write(b"%x\r\n%s\r\n%s" % (len(body), body, b"" if more else b"0\r\n\r\n"))
            elif not more:
                transport.write(b"0\r\n\r\n")
        elif body:
            transport.write(body)
        waiter = conn.paused_writing
        if waiter is not None:
            await waiter


def tls_server_context(cert: str, key: str) -> ssl.SSLContext:
    """The server side of HTTPS: ``cert`` (PEM, the chain after the leaf) and its ``key`` (PEM).

    TLS 1.2 and up, ALPN ``http/1.1`` (the only protocol served). Raises ``ValueError`` naming
    the file when either cannot be read or the key is not the certificate's.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    for path in (cert, key):
        try:
            with open(path, "rb"):
                pass
        except OSError as e:
            raise ValueError(f"cannot read {path}: {e.strerror}") from None
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as e:
        reason = "the key does not match the certificate" if "KEY_VALUES_MISMATCH" in str(e) else f"not a PEM certificate and key ({e})"
        raise ValueError(f"certificate {cert} and key {key}: {reason}") from None
    return context


class HttpServer:
    """Serves an ``HttpTransport`` (fast path) or any ASGI application on asyncio.

    Args:
        app: the application; one with ``direct_http = True`` and a ``handle`` method
            (``HttpTransport``) is called directly, anything else over ASGI.
        max_body: the largest request body in bytes (413 above); defaults to the app's
            ``max_body`` when it has one.
        max_header_bytes: the largest request head (414/431 above), judged while it arrives.
        max_connections: open connections at most (503 and close above); the open-file limit
            may allow fewer (see the module doc).
        keepalive_timeout: seconds an idle keep-alive connection stays open.
        head_timeout: seconds from a request head's first byte to its end (408 and close after).
        tls: a server ``ssl.SSLContext`` (see ``tls_server_context``): HTTPS on the same socket.
        lane: answer what the app's lane serves (``open_lane``: sync tool calls of its sessions,
            with the compiled core) in the core, without ``handle``; ``False``: every request
            through ``handle``. The replies are the same bytes either way.
    """

    def __init__(
        self,
        app: Any,
        *,
        max_body: int | None = None,
        max_header_bytes: int = DEFAULT_MAX_HEAD,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        keepalive_timeout: float = 30.0,
        head_timeout: float = DEFAULT_HEAD_TIMEOUT,
        tls: ssl.SSLContext | None = None,
        lane: bool = True,
    ) -> None:
        self.app = app
        self.tls = tls
        self.handle: Callable[..., Any] | None = getattr(app, "handle", None) if _is_transport(app) else None
        self.max_body = max_body if max_body is not None else getattr(app, "max_body", DEFAULT_MAX_BODY)
        self.max_header_bytes = max_header_bytes
        # Looked up on the class: a wrapper that passes attributes on to the transport it wraps
        # must not lend it the lane, which would answer past the wrapper, unless it opens the
        # lane itself (metrics: a lane that counts what it answers).
        open_lane = getattr(type(app), "open_lane", None) if self.handle is not None and lane else None
        self.lane: HttpLane | None = (
            open_lane(app, max_head=max_header_bytes, max_body=self.max_body, head=_head, clock=_clock.get)
            if open_lane is not None
            else None
        )
        """The app's short way for the requests it answers most (``core.HttpLane``), if it has one."""
        self.max_connections = max_connections
        self.keepalive_timeout = keepalive_timeout
        self.head_timeout = head_timeout
        self.connections: set[_Connection] = set()
        self.fd_ceiling = 1 << 62
        """A connection whose descriptor is this or above is refused (set from the open-file limit by ``start``)."""
        self.open_files_limit: int | None = None
        self.refused: dict[str, int] = {}
        """Connections refused for lack of room, by reason (each reason logged once)."""
        self._unflushed: list[_Connection] = []
        self.bound: tuple[str, int] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._lifespan: _Lifespan | None = None

    def to_flush(self, conn: _Connection) -> None:
        """Flush ``conn``'s replies at the end of this loop iteration (one callback for every
        connection that has some)."""
        if not self._unflushed:
            running_loop().call_soon(self._flush)
        self._unflushed.append(conn)

    def _flush(self) -> None:
        unflushed, self._unflushed = self._unflushed, []
        for conn in unflushed:
            conn._flush()

    def refusal(self, fd: int) -> str:
        """Why a new connection (its descriptor ``fd``) is refused, counted (logged the first time)."""
        if len(self.connections) >= self.max_connections:
            reason = "too many connections"
            hint = f"{len(self.connections)} open, max_connections {self.max_connections}"
        else:
            reason = f"too many connections (open-file limit {self.open_files_limit})"
            hint = (
                f"{len(self.connections)} connections open, descriptor {fd} of RLIMIT_NOFILE {self.open_files_limit} "
                "(the last ones kept free); raise the limit (ulimit -n) or serve with more --workers"
            )
        count = self.refused.get(reason, 0)
        self.refused[reason] = count + 1
        if not count:
            logger.warning("refusing new connections with 503: %s (%s); logged once", reason, hint)
        return reason

    async def start(self, host: str = "127.0.0.1", port: int = 8000, *, sock: socket.socket | None = None) -> None:
        """Run the app's startup, then listen (on ``sock`` when given)."""
        loop = asyncio.get_running_loop()
        if self.handle is None:
            self._lifespan = _Lifespan(self.app)
            await self._lifespan.startup()
        else:
            startup = getattr(self.app, "startup", None)  # the transport's server lifespan
            if startup is not None:
                await startup()
        factory: Callable[[], _Connection]
        if self.tls is not None:
            buffer = memoryview(bytearray(TLS_READ_BUFFER))
            factory = functools.partial(_TlsConnection, self, buffer)
        else:
            factory = functools.partial(_Connection, self)
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if limit != resource.RLIM_INFINITY:
            self.open_files_limit = limit
            self.fd_ceiling = limit - fd_reserve(limit)
            room = self.fd_ceiling - _open_files()
            if room < self.max_connections:
                logger.warning(
                    "the open-file limit (RLIMIT_NOFILE %d) leaves room for about %d connections, fewer than "
                    "max_connections %d: the rest get 503; raise it (ulimit -n) or serve with more --workers",
                    limit,
                    max(room, 0),
                    self.max_connections,
                )
        if sock is not None:
            self._server = await loop.create_server(factory, sock=sock, backlog=BACKLOG, ssl=self.tls)
        else:
            self._server = await loop.create_server(factory, host, port, backlog=BACKLOG, reuse_address=True, ssl=self.tls)
        name = self._server.sockets[0].getsockname()
        self.bound = (name[0], name[1])
        self._sweeper = loop.create_task(self._sweep())

    async def _sweep(self) -> None:
        """Close the connections idle past ``keepalive_timeout`` and fail those whose request head
        is late, each looked at once a period, in slices of ``SWEEP_SLICE`` spread over it: a walk
        of ten thousand connections in one loop turn stops every answer for milliseconds."""
        period = max(0.05, min(self.keepalive_timeout / 2, self.head_timeout / 2, 1.0))
        while True:
            conns = list(self.connections)
            slices = max(1, -(-len(conns) // SWEEP_SLICE))
            for i in range(slices):
                await asyncio.sleep(period / slices)
                now = time.monotonic()
                cutoff = now - self.keepalive_timeout
                head_cutoff = now - self.head_timeout
                live = self.connections
                for conn in conns[i * SWEEP_SLICE : (i + 1) * SWEEP_SLICE]:
                    if conn not in live:
                        continue  # closed since this period began
                    started = conn.head_started
                    if started is not None and started < head_cutoff and not conn.closing and not conn.ended:
                        conn._fail(408, "request head not complete in time")
                    elif conn.busy is None and not conn.queue and conn.last_active < cutoff:
                        conn._close_idle()

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


def _open_files() -> int:
    """Descriptors this process holds now (0 where ``/proc`` cannot tell)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


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
    """Serve ``app`` until SIGINT/SIGTERM (see ``HttpServer`` for the options), with the soft
    open-file limit raised to the hard one (``raise_open_files_limit``).

    ``sock``: serve this bound socket instead of binding ``host:port``; ``grace``: seconds a
    SIGTERM lets answers in flight finish.

    ``freeze_gc``: for a process that does nothing but serve: keep what lives long (the app, the
    sessions) out of the garbage collector's walks (``mcpfast.transports.collector``).
    """
    raise_open_files_limit()
    server = HttpServer(app, **options)
    await server.start(host, port, sock=sock)
    collector = Collector() if freeze_gc else None
    if collector is not None:
        collector.start()
    logger.info("serving on %s://%s:%d", "https" if server.tls is not None else "http", *server.bound)  # type: ignore[misc]
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
        if collector is not None:
            collector.stop()
