"""Streamable HTTP (2025-03-26 … 2026-07-28) and HTTP+SSE (2024-11-05) as one ASGI application.

``asgi_app(server)`` returns an ASGI 3 callable written directly on the ASGI interface:

* ``POST /mcp``: ``initialize`` opens a handshake-era session (``Mcp-Session-Id``); later
  messages carry the id. A request is answered as ``application/json`` unless something is
  sent for it before its reply (progress, logs, sampling...), then as ``text/event-stream``.
  Notifications and responses get 202. A request whose ``params._meta`` (or
  ``MCP-Protocol-Version`` header) names 2026-07-28 is served statelessly on its own
  connection, with the ``Mcp-Method``/``Mcp-Name`` header checks of that revision.
* ``GET /mcp``: the session's standing SSE stream (one at a time; 409 otherwise), or a replay
  of a stream with ``Last-Event-ID``; 405 for 2026 traffic.
* ``DELETE /mcp``: ends the session; 405 for 2026 traffic.
* ``GET /sse`` + ``POST /messages?session_id=…``: the 2024-11-05 transport.
* ``/.well-known/oauth-protected-resource[/mcp]`` when an ``auth`` resource server is given.

Protocol rules stay in the engine; this module maps messages to HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs, urlsplit

from mcpfast import core
from mcpfast.protocol import methods as m
from mcpfast.protocol.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcpfast.protocol.versions import HANDSHAKE_VERSIONS, STATELESS_VERSIONS
from mcpfast.transports.event_store import EventStore, MemoryEventStore
from mcpfast.transports.http_routing import Stream, connect, reply_error_code

if TYPE_CHECKING:
    from mcpfast.auth import Principal, ResourceServer
    from mcpfast.server.app import Server
    from mcpfast.server.connection import Connection

__all__ = ["DEFAULT_MAX_BODY", "HttpTransport", "asgi_app", "run_http"]

logger = logging.getLogger("mcpfast.transports.http")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

DEFAULT_MAX_BODY: Final = 4 * 1024 * 1024
DEFAULT_LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
_NAMED: Final = {m.TOOLS_CALL: "name", m.PROMPTS_GET: "name", m.RESOURCES_READ: "uri"}
_MODERN_STATUS: Final = {-32601: 404, -32600: 400, -32700: 400, -32602: 400, -32020: 400, -32021: 400, -32022: 400}
_JSON: Final = [(b"content-type", b"application/json")]
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_HANDSHAKE: Final = frozenset(HANDSHAKE_VERSIONS)
_STATELESS: Final = frozenset(STATELESS_VERSIONS)
_SSE = core.SseEncoder()


class _Disconnected(Exception):
    pass


class _Session:
    """One handshake-era (or 2024-11-05 SSE) session."""

    __slots__ = ("conn", "get", "id", "last_seen", "legacy", "next_stream", "principal", "version")

    def __init__(self, session_id: str, conn: Connection, get: Stream, principal: str | None, legacy: bool) -> None:
        self.id = session_id
        self.conn = conn
        self.get = get
        self.principal = principal
        self.legacy = legacy
        self.last_seen = time.monotonic()
        self.next_stream = 1
        self.version: str | None = None


def _error_body(code: int, message: str, data: Any = None, rid: int | str | None = None) -> bytes:
    return core.encode_error(rid, code, message, data)


async def _send_simple(send: Send, status: int, body: bytes = b"", headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    hdrs = [(b"content-length", str(len(body)).encode()), *headers]
    if body and not any(k == b"content-type" for k, _ in hdrs):
        hdrs.extend(_JSON)
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body})


_ACCEPT_CACHE: dict[tuple[bytes, bool, bool], bool] = {}


def _accepts(accept: bytes | None, json: bool, sse: bool) -> bool:
    if accept is None:
        return False
    key = (accept, json, sse)
    known = _ACCEPT_CACHE.get(key)
    if known is None:
        known = _parse_accept(accept, json, sse)
        if len(_ACCEPT_CACHE) < 256:  # clients send a handful of distinct values
            _ACCEPT_CACHE[key] = known
    return known


def _parse_accept(accept: bytes, json: bool, sse: bool) -> bool:
    has_json = has_sse = False
    for part in accept.split(b","):
        media = part.split(b";", 1)[0].strip().lower()
        if media == b"*/*":
            return True
        if media in (b"application/json", b"application/*"):
            has_json = True
        elif media in (b"text/event-stream", b"text/*"):
            has_sse = True
    return (has_json or not json) and (has_sse or not sse)


def _header_value(raw: bytes) -> str | None:
    """A header value, with the 2026 ``=?base64?…?=`` form decoded (None if invalid)."""
    try:
        text = raw.decode("ascii").strip(" \t")
    except UnicodeDecodeError:
        return None
    if text.startswith("=?base64?") and text.endswith("?="):
        try:
            return base64.b64decode(text[9:-2], validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return None
    return text


class HttpTransport:
    """The ASGI application serving one ``Server`` over HTTP (see the module doc).

    Args:
        server: the application.
        path: the Streamable HTTP endpoint.
        sse_path, messages_path: the 2024-11-05 endpoints (``sse_path=None`` turns them off).
        allowed_origins: extra allowed ``Origin`` values (exact ``scheme://host[:port]``), on
            top of any origin whose host is localhost, 127.0.0.1 or [::1]; ``"*"`` allows all.
            A request without ``Origin`` is allowed.
        max_body: the largest request body in bytes (413 above).
        max_sessions: open sessions at most; ``initialize`` gets 503 when full.
        session_idle_timeout: seconds without traffic after which a session is closed.
        keepalive: seconds of silence after which an SSE stream gets a ``:`` comment.
        retry_ms: the ``retry`` sent with the priming event (2025-11-25 sessions).
        event_store: where SSE events are kept for ``Last-Event-ID`` replay (default: a
            ``MemoryEventStore``; ``False`` turns resumability off).
        auth: an OAuth resource server (``mcpfast.auth.ResourceServer``); ``None``: no auth.
        json_response: answer requests that emit nothing before their reply as JSON (else SSE).
    """

    def __init__(
        self,
        server: Server,
        *,
        path: str = "/mcp",
        sse_path: str | None = "/sse",
        messages_path: str = "/messages",
        allowed_origins: Iterable[str] = (),
        max_body: int = DEFAULT_MAX_BODY,
        max_sessions: int = 10_000,
        session_idle_timeout: float = 600.0,
        keepalive: float = 15.0,
        retry_ms: int = 1000,
        event_store: EventStore | None | bool = None,
        auth: ResourceServer | None = None,
        json_response: bool = True,
    ) -> None:
        self.server = server
        self.path = path
        self.sse_path = sse_path
        self.messages_path = messages_path
        origins = set(allowed_origins)
        self.allow_any_origin = "*" in origins
        self.allowed_origins = frozenset(o.rstrip("/").lower() for o in origins if o != "*")
        self.max_body = max_body
        self.max_sessions = max_sessions
        self.session_idle_timeout = session_idle_timeout
        self.keepalive = keepalive
        self.retry_ms = retry_ms
        if event_store is None or event_store is True:
            event_store = MemoryEventStore()
        self.event_store: EventStore | None = None if event_store is False else event_store  # type: ignore[assignment]
        self.auth = auth
        self.json_response = json_response
        self.sessions: dict[str, _Session] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._stateless: set[Connection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---------------------------------------------------------------- entry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path: str = scope["path"]
            root = scope.get("root_path")
            if root and path.startswith(root) and path != root:
                path = path[len(root) :]
            if path == self.path or (path.endswith("/") and path[:-1] == self.path):
                await self._mcp(scope, receive, send)
            elif self.sse_path is not None and path == self.sse_path:
                await self._legacy_sse(scope, receive, send)
            elif self.sse_path is not None and path == self.messages_path:
                await self._legacy_post(scope, receive, send)
            elif self.auth is not None and path.startswith("/.well-known/oauth-protected-resource"):
                await self.auth.serve_metadata(path, scope, send)
            else:
                await _send_simple(send, 404, b"", [(b"content-type", b"text/plain")])
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def aclose(self) -> None:
        """Close every session and stateless connection (server shutdown)."""
        for sess in list(self.sessions.values()):
            await self._end_session(sess)
        for conn in list(self._stateless):
            await conn.close()
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None

    # ------------------------------------------------------------- checks

    def _origin_ok(self, origin: bytes) -> bool:
        if self.allow_any_origin:
            return True
        try:
            text = origin.decode("ascii").strip().lower()
        except UnicodeDecodeError:
            return False
        if text.rstrip("/") in self.allowed_origins:
            return True
        try:
            host = urlsplit(text).hostname
        except ValueError:
            return False
        return host is not None and (host in DEFAULT_LOCAL_HOSTS or f"[{host}]" in DEFAULT_LOCAL_HOSTS)

    async def _authenticate(self, scope: Scope, headers: dict[bytes, bytes], send: Send) -> tuple[bool, str | None]:
        """(ok, principal). Sends the 401/403 itself when not ok."""
        auth = self.auth
        if auth is None:
            return True, None
        outcome: Principal | tuple[int, list[tuple[bytes, bytes]], bytes] = await auth.check(headers.get(b"authorization"))
        if isinstance(outcome, tuple):
            status, hdrs, body = outcome
            await _send_simple(send, status, body, hdrs)
            return False, None
        return True, outcome.subject

    # -------------------------------------------------------- /mcp endpoint

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:
            if key in headers:
                headers[key] = headers[key] + b", " + value
            else:
                headers[key] = value
        origin = headers.get(b"origin")
        if origin is not None and not self._origin_ok(origin):
            await _send_simple(send, 403, _error_body(INVALID_REQUEST, "forbidden: origin not allowed"))
            return
        ok, principal = await self._authenticate(scope, headers, send)
        if not ok:
            return
        method = scope["method"]
        raw_version = headers.get(b"mcp-protocol-version")
        version: str | None = None
        if raw_version is not None:
            version = raw_version.decode("latin-1").strip()
            if version not in _HANDSHAKE and version not in _STATELESS and method != "POST":
                await _send_simple(
                    send, 400, _error_body(INVALID_REQUEST, f"unsupported MCP-Protocol-Version: {version!r}",
                                           {"supported": [*HANDSHAKE_VERSIONS, *STATELESS_VERSIONS]})
                )
                return
        if method == "POST":
            await self._post(scope, receive, send, headers, version, principal)
        elif method == "GET":
            if version in _STATELESS:
                await _send_simple(send, 405, b"", [(b"allow", b"POST")])
            else:
                await self._get(receive, send, headers, principal)
        elif method == "DELETE":
            if version in _STATELESS:
                await _send_simple(send, 405, b"", [(b"allow", b"POST")])
            else:
                await self._delete(send, headers, principal)
        else:
            await _send_simple(send, 405, b"", [(b"allow", b"GET, POST, DELETE")])

    def _find(self, headers: dict[bytes, bytes], principal: str | None) -> _Session | None | bool:
        """The session named by the request: a ``_Session``, ``None`` (unknown) or False (no header)."""
        raw = headers.get(b"mcp-session-id")
        if raw is None:
            return False
        sess = self.sessions.get(raw.decode("latin-1"))
        if sess is None or sess.legacy or sess.principal != principal:
            return None
        sess.last_seen = time.monotonic()
        return sess

    async def _read_body(self, receive: Receive, headers: dict[bytes, bytes], send: Send) -> bytes | None:
        limit = self.max_body
        length = headers.get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await _send_simple(send, 400, _error_body(INVALID_REQUEST, "bad Content-Length"))
                return None
            if declared > limit:
                await _send_simple(send, 413, _error_body(INVALID_REQUEST, f"body exceeds {limit} bytes"))
                return None
        message = await receive()
        body = message.get("body", b"")
        if not message.get("more_body"):
            if message["type"] == "http.disconnect":
                raise _Disconnected
            return body
        chunks = [body]
        size = len(body)
        while True:
            if message["type"] == "http.disconnect":
                raise _Disconnected
            if size > limit:
                await _send_simple(send, 413, _error_body(INVALID_REQUEST, f"body exceeds {limit} bytes"))
                return None
            if not message.get("more_body"):
                return b"".join(chunks)
            message = await receive()
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)

    async def _post(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes], version: str | None, principal: str | None
    ) -> None:
        if not _accepts(headers.get(b"accept"), True, True):
            await _send_simple(
                send, 406, _error_body(INVALID_REQUEST, "Accept must list application/json and text/event-stream")
            )
            return
        ctype = headers.get(b"content-type")
        if ctype is None or ctype.split(b";", 1)[0].strip().lower() != b"application/json":
            await _send_simple(send, 415, _error_body(INVALID_REQUEST, "Content-Type must be application/json"))
            return
        modern = version is not None and version not in _HANDSHAKE  # 2026-07-28, or unknown (answered -32022)
        sess = None if modern else self._find(headers, principal)
        if sess is None and not modern:
            await _send_simple(send, 404, _error_body(INVALID_REQUEST, "session not found"))
            return
        try:
            body = await self._read_body(receive, headers, send)
        except _Disconnected:
            return
        if body is None:
            return
        if isinstance(sess, _Session):
            await self._post_session(sess, body, receive, send)
            return
        # No session: initialize, a 2026 request, or an error.
        try:
            decoded = core.decode(body)
        except core.JsonRpcError as exc:
            await _send_simple(send, 400, _error_body(exc.code, exc.message, rid=exc.id))
            return
        if isinstance(decoded, list):
            await _send_simple(send, 400, _error_body(INVALID_REQUEST, "a batch needs a session (send initialize first)"))
            return
        if decoded.kind == "request" and decoded.method == m.INITIALIZE and not modern:
            await self._initialize(decoded, body, send, principal)
            return
        if not modern and decoded.kind == "request":
            meta = _meta(decoded)
            modern = META_PROTOCOL_VERSION in meta or decoded.method == m.SERVER_DISCOVER
        if not modern:
            await _send_simple(send, 400, _error_body(INVALID_REQUEST, "bad request: missing Mcp-Session-Id header"))
            return
        await self._post_stateless(decoded, headers, version, receive, send)

    # ------------------------------------------------------ handshake era

    async def _initialize(self, decoded: Any, body: bytes, send: Send, principal: str | None) -> None:
        if len(self.sessions) >= self.max_sessions:
            await _send_simple(
                send, 503, _error_body(INTERNAL_ERROR, "server busy: too many sessions", rid=decoded.id), [(b"retry-after", b"1")]
            )
            return
        session_id = secrets.token_urlsafe(24)
        get = Stream("0", keep=True, session_id=session_id, store=self.event_store)
        get.attached = False
        get.sse = True
        conn = connect(self.server, get)
        stream = Stream()
        router = conn.session._router  # type: ignore[attr-defined]
        router.posting = stream
        try:
            conn.feed(decoded)
        finally:
            router.posting = None
        engine = conn.session
        if engine.version is None:  # refused: no session is kept
            await conn.close()
            await self._send_reply(stream, send, 200, ())
            return
        sess = _Session(session_id, conn, get, principal, legacy=False)
        sess.version = engine.version
        self.sessions[session_id] = sess
        self._ensure_reaper()
        await self._send_reply(stream, send, 200, [(b"mcp-session-id", session_id.encode())])

    async def _send_reply(self, stream: Stream, send: Send, status: int, headers: Iterable[tuple[bytes, bytes]]) -> None:
        body = stream.buf.popleft() if stream.buf else b""
        await _send_simple(send, status if body else 202, body, [*headers, *_JSON] if body else headers)

    async def _post_session(self, sess: _Session, body: bytes, receive: Receive, send: Send) -> None:
        conn = sess.conn
        router = conn.session._router  # type: ignore[attr-defined]
        stream = Stream()
        router.posting = stream
        try:
            conn.feed(body)
        except Exception:
            logger.exception("unexpected failure handling a POST")
            await _send_simple(send, 500, _error_body(INTERNAL_ERROR, "internal error"))
            return
        finally:
            router.posting = None
        if not stream.pending and not stream.closed:  # nothing admitted: answered by the engine, or 202
            buf = stream.buf
            if not buf:
                await _send_simple(send, 202)
                return
            data = buf[0] if len(buf) == 1 else b"[" + b",".join(buf) + b"]"
            is_error, _code, rid = reply_error_code(data)
            await _send_simple(send, 400 if is_error and rid is None else 200, data, _JSON)
            return
        await self._respond(stream, sess, receive, send, ())

    async def _respond(
        self, stream: Stream, sess: _Session | None, receive: Receive, send: Send, headers: Iterable[tuple[bytes, bytes]],
        conn: Connection | None = None,
    ) -> None:
        """Answer a POST from its stream: JSON when the reply comes first and alone, else SSE."""
        watch: asyncio.Task[None] | None = None
        try:
            if not stream.buf and not stream.closed:
                if conn is None:
                    await stream.wait()
                else:  # 2026: the client going away cancels the request
                    watch = asyncio.ensure_future(_wait_disconnect(receive))
                    waiter = stream.wait()
                    await asyncio.wait((waiter, watch), return_when=asyncio.FIRST_COMPLETED)
                    if watch.done():
                        return
            if self.json_response and stream.closed and len(stream.buf) == 1:
                await _send_simple(send, 200, stream.buf.popleft(), [*headers, *_JSON])
                return
            if stream.closed and not stream.buf:
                await _send_simple(send, 202, b"", headers)
                return
            if watch is None:
                watch = asyncio.ensure_future(_wait_disconnect(receive))
            await self._stream_sse(stream, sess, send, watch, headers)
        finally:
            if watch is not None:
                watch.cancel()
            if conn is not None:
                self._stateless.discard(conn)
                await conn.close()

    async def _stream_sse(
        self, stream: Stream, sess: _Session | None, send: Send, watch: asyncio.Future[None],
        headers: Iterable[tuple[bytes, bytes]], replay: list[tuple[str, bytes]] | None = None, started: bool = False,
    ) -> None:
        """Send ``stream`` as SSE until it closes or the client goes away."""
        store = self.event_store if sess is not None and not sess.legacy else None
        if store is not None and sess is not None and not stream.key:
            stream.key = str(sess.next_stream)
            sess.next_stream += 1
            stream.session_id = sess.id
            stream.store = store
        stream.sse = True
        stream.attached = True
        if not started:
            await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *headers]})
        chunk = bytearray()
        if replay:
            for eid, data in replay:
                if data:
                    chunk += _SSE.encode(data, id=eid)
        elif store is not None and sess is not None and sess.version is not None and sess.version >= "2025-11-25":
            eid = store.append(sess.id, stream.key, b"")
            chunk += _SSE.encode(b"", id=eid, retry=self.retry_ms)
        event = "message" if sess is not None and sess.legacy else None
        keepalive = self.keepalive
        try:
            while True:
                buf = stream.buf
                while buf:
                    data = buf.popleft()
                    eid = store.append(sess.id, stream.key, data) if store is not None and sess is not None else None
                    chunk += _SSE.encode(data, id=eid, event=event)
                if chunk:
                    await send({"type": "http.response.body", "body": bytes(chunk), "more_body": True})
                    chunk.clear()
                if stream.closed:
                    break
                waiter = stream.wait()
                done, _ = await asyncio.wait((waiter, watch), timeout=keepalive, return_when=asyncio.FIRST_COMPLETED)
                if watch.done():
                    return
                if not done:
                    chunk += _SSE.comment("keepalive")
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return
        finally:
            stream.attached = False
            if not stream.closed and store is not None and sess is not None:
                while stream.buf:  # not yet sent: keep it for a resuming client
                    store.append(sess.id, stream.key, stream.buf.popleft())

    async def _get(self, receive: Receive, send: Send, headers: dict[bytes, bytes], principal: str | None) -> None:
        if not _accepts(headers.get(b"accept"), False, True):
            await _send_simple(send, 406, _error_body(INVALID_REQUEST, "Accept must list text/event-stream"))
            return
        sess = self._find(headers, principal)
        if sess is False:
            await _send_simple(send, 400, _error_body(INVALID_REQUEST, "bad request: missing Mcp-Session-Id header"))
            return
        if sess is None:
            await _send_simple(send, 404, _error_body(INVALID_REQUEST, "session not found"))
            return
        assert isinstance(sess, _Session)
        last = headers.get(b"last-event-id")
        if last is not None and self.event_store is not None:
            found = self.event_store.replay(sess.id, last.decode("latin-1"))
            if found is None:
                await _send_simple(send, 404, _error_body(INVALID_REQUEST, "unknown Last-Event-ID"))
                return
            key, events = found
            router = sess.conn.session._router  # type: ignore[attr-defined]
            live = sess.get if key == sess.get.key else next((s for s in router.streams.values() if s.key == key), None)
            if live is not None and live.attached:
                await _send_simple(send, 409, _error_body(INVALID_REQUEST, "stream already has a reader"))
                return
            if live is None:
                live = Stream(key)
                live.closed = True
            watch = asyncio.ensure_future(_wait_disconnect(receive))
            try:
                await self._stream_sse(live, sess, send, watch, (), replay=events)
            finally:
                watch.cancel()
            return
        if sess.get.attached:
            await _send_simple(send, 409, _error_body(INVALID_REQUEST, "a GET stream is already open for this session"))
            return
        watch = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            await self._stream_sse(sess.get, sess, send, watch, ())
        finally:
            watch.cancel()

    async def _delete(self, send: Send, headers: dict[bytes, bytes], principal: str | None) -> None:
        sess = self._find(headers, principal)
        if sess is False:
            await _send_simple(send, 400, _error_body(INVALID_REQUEST, "bad request: missing Mcp-Session-Id header"))
            return
        if sess is None:
            await _send_simple(send, 404, _error_body(INVALID_REQUEST, "session not found"))
            return
        assert isinstance(sess, _Session)
        await self._end_session(sess)
        await _send_simple(send, 200)

    async def _end_session(self, sess: _Session) -> None:
        if self.sessions.pop(sess.id, None) is None:
            return
        router = sess.conn.session._router  # type: ignore[attr-defined]
        try:
            await sess.conn.close()
        finally:
            router.close_all()
            if self.event_store is not None:
                self.event_store.forget(sess.id)

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def _reap(self) -> None:
        """Close sessions idle longer than the timeout; ends when no session is left."""
        timeout = self.session_idle_timeout
        period = max(0.05, min(timeout / 4, 30.0))
        while self.sessions:
            await asyncio.sleep(period)
            now = time.monotonic()
            for sess in list(self.sessions.values()):
                if now - sess.last_seen < timeout:
                    continue
                router = sess.conn.session._router  # type: ignore[attr-defined]
                busy = sess.get.attached or sess.conn.in_flight or any(s.attached for s in router.streams.values())
                if busy and not sess.legacy:
                    continue
                if sess.legacy and sess.get.attached:
                    continue
                await self._end_session(sess)

    # ------------------------------------------------------------ 2024-11-05

    async def _legacy_sse(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        origin = headers.get(b"origin")
        if origin is not None and not self._origin_ok(origin):
            await _send_simple(send, 403, _error_body(INVALID_REQUEST, "forbidden: origin not allowed"))
            return
        if scope["method"] != "GET":
            await _send_simple(send, 405, b"", [(b"allow", b"GET")])
            return
        ok, principal = await self._authenticate(scope, headers, send)
        if not ok:
            return
        if len(self.sessions) >= self.max_sessions:
            await _send_simple(send, 503, _error_body(INTERNAL_ERROR, "server busy: too many sessions"))
            return
        session_id = secrets.token_urlsafe(24)
        stream = Stream("0", keep=True)
        conn = connect(self.server, stream)
        sess = _Session(session_id, conn, stream, principal, legacy=True)
        self.sessions[session_id] = sess
        self._ensure_reaper()
        root = scope.get("root_path") or ""
        endpoint = f"{root}{self.messages_path}?session_id={session_id}"
        watch = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": list(_SSE_HEADERS)})
            await send({"type": "http.response.body", "body": _SSE.encode(endpoint, event="endpoint"), "more_body": True})
            await self._stream_sse(stream, sess, send, watch, (), started=True)
        finally:
            watch.cancel()
            await self._end_session(sess)

    async def _legacy_post(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        origin = headers.get(b"origin")
        if origin is not None and not self._origin_ok(origin):
            await _send_simple(send, 403, _error_body(INVALID_REQUEST, "forbidden: origin not allowed"))
            return
        if scope["method"] != "POST":
            await _send_simple(send, 405, b"", [(b"allow", b"POST")])
            return
        ok, principal = await self._authenticate(scope, headers, send)
        if not ok:
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        session_id = (query.get("session_id") or [""])[0]
        sess = self.sessions.get(session_id)
        if not session_id:
            await _send_simple(send, 400, _error_body(INVALID_REQUEST, "missing session_id"))
            return
        if sess is None or not sess.legacy or sess.principal != principal:
            await _send_simple(send, 404, _error_body(INVALID_REQUEST, "session not found"))
            return
        ctype = headers.get(b"content-type")
        if ctype is None or ctype.split(b";", 1)[0].strip().lower() != b"application/json":
            await _send_simple(send, 415, _error_body(INVALID_REQUEST, "Content-Type must be application/json"))
            return
        try:
            body = await self._read_body(receive, headers, send)
        except _Disconnected:
            return
        if body is None:
            return
        sess.last_seen = time.monotonic()
        try:
            sess.conn.feed(body)
        except Exception:
            logger.exception("unexpected failure handling a POST")
        await _send_simple(send, 202, b"Accepted", [(b"content-type", b"text/plain")])

    # --------------------------------------------------------- 2026-07-28

    async def _post_stateless(
        self, decoded: Any, headers: dict[bytes, bytes], version: str | None, receive: Receive, send: Send
    ) -> None:
        kind = decoded.kind
        if kind != "request":
            if kind == "notification":
                await _send_simple(send, 202)
            else:
                await _send_simple(send, 400, _error_body(INVALID_REQUEST, "clients must not POST responses in 2026-07-28"))
            return
        method: str = decoded.method
        rid = decoded.id
        problem = _check_headers(decoded, method, headers)
        if problem is None and method == m.TOOLS_CALL:
            problem = _check_param_headers(self.server, decoded, headers)
        if problem is not None:
            await _send_simple(send, 400, _error_body(HEADER_MISMATCH, problem, rid=rid))
            return
        if method == m.INITIALIZE:  # a 2026-07-28 request: the method does not exist there
            await _send_simple(send, 404, _error_body(METHOD_NOT_FOUND, f"method not found: {method}", rid=rid))
            return
        meta = _meta(decoded)
        if META_PROTOCOL_VERSION not in meta:
            if version not in _STATELESS:
                data = {"supported": list(STATELESS_VERSIONS), "requested": version or ""}
                await _send_simple(send, 400, _error_body(UNSUPPORTED_PROTOCOL_VERSION, "unsupported protocol version", data, rid))
                return
            # Over HTTP the header made this a 2026 request, so its _meta is required (the
            # engine answers a bare server/discover probe, which only makes sense on stdio).
            message = f"params._meta[{META_PROTOCOL_VERSION!r}] is required"
            await _send_simple(send, 400, _error_body(INVALID_PARAMS, message, rid=rid))
            return
        if method == m.SERVER_DISCOVER and not isinstance(meta.get(META_CLIENT_CAPABILITIES), dict):
            message = f"params._meta[{META_CLIENT_CAPABILITIES!r}] is required"
            await _send_simple(send, 400, _error_body(INVALID_PARAMS, message, rid=rid))
            return
        stream = Stream()
        conn = connect(self.server, stream)
        self._stateless.add(conn)
        router = conn.session._router  # type: ignore[attr-defined]
        router.posting = stream
        try:
            conn.feed(decoded)
        finally:
            router.posting = None
        if method == m.SUBSCRIPTIONS_LISTEN and not stream.closed and stream.buf:
            if not reply_error_code(stream.buf[0])[0]:
                stream.keep = True
        if not stream.pending and not stream.keep and not stream.closed:  # answered by the engine
            self._stateless.discard(conn)
            await conn.close()
            data = stream.buf[0] if stream.buf else _error_body(INTERNAL_ERROR, "no reply", rid=rid)
            is_error, code, _rid = reply_error_code(data)
            status = _MODERN_STATUS.get(code, 200) if is_error and code is not None else 200
            await _send_simple(send, status, data, _JSON)
            return
        await self._respond(stream, None, receive, send, (), conn=conn)


def _meta(decoded: Any) -> dict[str, Any]:
    params = decoded.params if decoded.raw_params is not None else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}


def _check_headers(decoded: Any, method: str, headers: dict[bytes, bytes]) -> str | None:
    """The 2026-07-28 request-metadata header rules; a message on failure (-32020)."""
    raw = headers.get(b"mcp-protocol-version")
    body_version = _meta(decoded).get(META_PROTOCOL_VERSION)
    if raw is None:
        return "missing MCP-Protocol-Version header"
    if isinstance(body_version, str) and raw.decode("latin-1").strip() != body_version:
        return "MCP-Protocol-Version header does not match params._meta protocolVersion"
    raw_method = headers.get(b"mcp-method")
    if raw_method is None:
        return "missing Mcp-Method header"
    if _header_value(raw_method) != method:
        return "Mcp-Method header does not match the body's method"
    field = _NAMED.get(method)
    if field is not None:
        raw_name = headers.get(b"mcp-name")
        if raw_name is None:
            return "missing Mcp-Name header"
        value = decoded.param(field)
        if not isinstance(value, str) or _header_value(raw_name) != value:
            return f"Mcp-Name header does not match params.{field}"
    return None


_PARAM_CACHE: dict[int, tuple[Any, list[tuple[bytes, tuple[str, ...]]]]] = {}


def _param_annotations(schema: Any, path: tuple[str, ...] = ()) -> list[tuple[bytes, tuple[str, ...]]]:
    """``(header name, argument path)`` for every ``x-mcp-header`` reachable through ``properties``."""
    found: list[tuple[bytes, tuple[str, ...]]] = []
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return found
    for key, sub in props.items():
        if not isinstance(sub, dict):
            continue
        name = sub.get("x-mcp-header")
        if isinstance(name, str) and name:
            found.append((b"mcp-param-" + name.lower().encode("ascii", "replace"), (*path, key)))
        found.extend(_param_annotations(sub, (*path, key)))
    return found


def _check_param_headers(server: Any, decoded: Any, headers: dict[bytes, bytes]) -> str | None:
    """SEP-2243 ``Mcp-Param-*``: each annotated argument must match its header (-32020)."""
    tool = server._tools.get(decoded.param("name"))
    if tool is None:
        return None
    definition = tool.definition
    cached = _PARAM_CACHE.get(id(definition))
    if cached is None or cached[0] is not definition:
        cached = _PARAM_CACHE[id(definition)] = (definition, _param_annotations(definition.get("inputSchema")))
    annotations = cached[1]
    if not annotations:
        return None
    arguments = decoded.param("arguments")
    for header, path in annotations:
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        raw = headers.get(header)
        if value is None:
            if raw is not None:
                return f"{header.decode()} header sent for an absent argument"
            continue
        if raw is None:
            return f"missing {header.decode()} header"
        text = _header_value(raw)
        if isinstance(value, bool):
            ok = text == ("true" if value else "false")
        elif isinstance(value, int):
            try:
                ok = text is not None and int(text) == value
            except ValueError:
                ok = False
        else:
            ok = isinstance(value, str) and text == value
        if not ok:
            return f"{header.decode()} header does not match the argument"
    return None


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


def asgi_app(server: Server, **options: Any) -> HttpTransport:
    """The ASGI application serving ``server`` (options: see ``HttpTransport``)."""
    return HttpTransport(server, **options)


def run_http(
    server: Server | str,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    runner: str = "uvicorn",
    log_level: str = "warning",
    **options: Any,
) -> None:
    """Serve ``server`` over HTTP until interrupted (``runner``: ``uvicorn`` or ``granian``)."""
    from mcpfast.transports import http_runner

    http_runner.run(server, host, port, runner=runner, log_level=log_level, **options)


