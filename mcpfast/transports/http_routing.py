"""Routing the engine's output to HTTP streams.

The engine keeps one outbox per session; over HTTP every message must go to exactly one
stream: a request's reply and the messages sent *for* it (progress, logs, server-to-client
requests) go to the stream of the POST that carried it; anything else goes to the session's
standing stream (the GET stream, the 2024-11-05 SSE stream, or a 2026 request's own stream).

``RoutedSession`` is a ``ServerSession`` whose public output calls drain the outbox right
after the engine wrote to it and hand each message to the right ``Stream``. No protocol rule
lives here: the engine decides *what* is sent; this only decides *where*.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from mcpfast import core
from mcpfast.engine import ReplyReceived, RequestReceived, ServerSession

if TYPE_CHECKING:
    from mcpfast.server.app import Server
    from mcpfast.server.connection import Connection
    from mcpfast.transports.event_store import EventStore

__all__ = ["RoutedSession", "Router", "Stream", "connect"]

_RAW: Final = (bytes, bytearray, memoryview, str)
BACKLOG: Final = 1024
"""Messages a detached stream without an event store keeps for the next reader."""


class Stream:
    """The messages of one HTTP response (or of a standing SSE stream), in order.

    Attributes:
        key: the stream's name inside its session (event ids start with it).
        pending: requests whose reply still belongs on this stream.
        closed: no more messages will come.
        keep: stays open after its requests are answered (GET, listen, legacy SSE).
        sse: the response became an SSE stream (else it may still be answered as JSON).
        attached: an HTTP response is currently reading this stream.
    """

    __slots__ = ("attached", "buf", "closed", "keep", "key", "pending", "session_id", "sse", "store", "waiter")

    def __init__(self, key: str = "", *, keep: bool = False, session_id: str | None = None, store: EventStore | None = None):
        self.key = key
        self.buf: list[bytes] = []  # a list, not a deque: an idle session's stream costs 56 bytes, not 600
        self.waiter: asyncio.Future[None] | None = None
        self.pending = 0
        self.closed = False
        self.keep = keep
        self.sse = False
        self.attached = True
        self.session_id = session_id
        self.store = store

    def push(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.attached:
            if self.sse and self.store is not None and self.session_id is not None:
                self.store.append(self.session_id, self.key, data)
                return
            if len(self.buf) >= BACKLOG:
                del self.buf[0]
        self.buf.append(data)
        if self.waiter is not None:
            self._wake()

    def finish(self) -> None:
        if not self.closed:
            self.closed = True
            if self.waiter is not None:
                self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def wait(self) -> asyncio.Future[None]:
        """A future resolved when a message arrives or the stream closes."""
        waiter = self.waiter
        if waiter is None or waiter.done():
            waiter = self.waiter = asyncio.get_running_loop().create_future()
        return waiter


class Router:
    """Where a session's messages go.

    Attributes:
        default: the standing stream (unrelated messages).
        posting: the stream of the POST being fed (set only while ``receive`` runs).
        streams: request id -> the stream its reply belongs on.
        outgoing: server-to-client request id -> the client request it serves.
    """

    __slots__ = ("default", "outgoing", "posting", "streams")

    def __init__(self, default: Stream) -> None:
        self.default = default
        self.posting: Stream | None = None
        self.streams: dict[int | str, Stream] = {}
        self.outgoing: dict[int | str, int | str] = {}

    def close_all(self) -> None:
        for stream in self.streams.values():
            stream.finish()
        self.streams.clear()
        self.outgoing.clear()
        self.default.finish()


class RoutedSession(ServerSession):
    """A ``ServerSession`` whose output is routed to ``Stream`` objects (see the module doc)."""

    _router: Router

    def receive(self, data: Any) -> list[Any]:
        # A transport that already decoded the message (to read headers-related fields) passes
        # the decoded value, so the bytes are parsed once.
        if isinstance(data, _RAW):
            events = super().receive(data)
        else:
            events = []
            if isinstance(data, list):
                self._receive_batch(data, events)
            else:
                self._receive_message(data, events, None)
        router = self._router
        stream = router.posting
        if stream is None:
            stream = router.default
        for event in events:
            kind = type(event)
            if kind is RequestReceived:
                router.streams[event.request.id] = stream
                stream.pending += 1
            elif kind is ReplyReceived:
                router.outgoing.pop(event.request_id, None)
        out = self._outbox
        if out:
            self._outbox = []
            for message in out:
                stream.push(message)
        return events

    def _flush(self, request_id: int | str | None) -> None:
        out = self.data_to_send()
        if out:
            router = self._router
            stream = router.streams.get(request_id, router.default) if request_id is not None else router.default
            for message in out:
                stream.push(message)

    def _settle(self, request_id: int | str) -> None:
        router = self._router
        stream = router.streams.pop(request_id, None)
        out = self._outbox
        if out:
            self._outbox = []
        if stream is None:
            stream = router.default
            for message in out:
                stream.push(message)
            return
        for message in out:
            stream.push(message)
        stream.pending -= 1
        if stream.pending <= 0 and not stream.keep:
            stream.finish()

    def respond(self, request_id: int | str, result: dict[str, Any] | bytes) -> bool:
        sent = super().respond(request_id, result)
        self._settle(request_id)
        return sent

    def respond_error(self, request_id: int | str, code: int, message: str, data: Any = None) -> bool:
        sent = super().respond_error(request_id, code, message, data)
        self._settle(request_id)
        return sent

    def progress(self, request_id: int | str, progress: float, total: float | None = None, message: str | None = None) -> bool:
        sent = super().progress(request_id, progress, total, message)
        self._flush(request_id)
        return sent

    def log(self, level: str, data: Any, logger: str | None = None, *, request_id: int | str | None = None) -> bool:
        sent = super().log(level, data, logger, request_id=request_id)
        self._flush(request_id)
        return sent

    def notify(self, method: str, params: dict[str, Any] | None = None) -> bool:
        sent = super().notify(method, params)
        self._flush(None)
        return sent

    def send_request(self, method: str, params: dict[str, Any] | None = None, *, related: int | str | None = None) -> int:
        request_id = super().send_request(method, params, related=related)
        if related is not None:
            self._router.outgoing[request_id] = related
        self._flush(related)
        return request_id

    def cancel_request(self, request_id: int | str, reason: str | None = None) -> None:
        related = self._router.outgoing.pop(request_id, None)
        super().cancel_request(request_id, reason)
        self._flush(related)

    def close_listens(self) -> None:
        # Called when the connection ends (shutdown, DELETE, a 2026 listen stream closing): the
        # final listen results go out and the standing stream ends with them.
        super().close_listens()
        self._flush(None)
        self._router.default.finish()


def connect(server: Server, default: Stream) -> Connection:
    """A ``Connection`` for ``server`` whose engine output is routed (``default``: standing stream)."""
    conn: Connection = server.connect()
    session = conn.session
    session.__class__ = RoutedSession  # same layout, routed output methods
    session._router = Router(default)  # type: ignore[attr-defined]
    return conn


def reply_error_code(data: bytes) -> tuple[bool, int | None, Any]:
    """``(is_error, code, id)`` of an encoded reply (cheap: nothing is built for a result)."""
    try:
        rid, is_error, code = core.scan_reply(data)
    except core.JsonRpcError:
        return False, None, None
    return is_error, code, rid
