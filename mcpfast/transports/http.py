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

Protocol rules stay in the session machine; this module maps messages to HTTP. One request goes
through ``handle`` as a pipeline: the Host check and the path (the endpoint), the body decoded
once, the ``gates`` (checks added by ``mcpfast.transports.stateless_only`` and ``mcpfast.transports.metrics``),
Origin and authentication, the session table (``mcpfast.transports.sessions``), the session machine
(``Connection.feed_message``), the routing of its records to streams
(``mcpfast.transports.http_routing``), and the answer made from the stream.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs

from mcpfast import core
from mcpfast.protocol import http as wire
from mcpfast.protocol import methods as m
from mcpfast.protocol.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    meta_required,
    unsupported_version,
)
from mcpfast.protocol.host import HostRules, absolute_form
from mcpfast.protocol.http import DEFAULT_MAX_BODY, DEFAULT_MAX_HEAD
from mcpfast.protocol.meta import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from mcpfast.protocol.versions import HANDSHAKE_VERSIONS, STATELESS_VERSIONS, V2025_11_25, supports
from mcpfast.sansio import ERROR, Outgoing, ServerSession, error_reply, unencodable_result
from mcpfast.server.app import PendingCall
from mcpfast.server.content import text_result
from mcpfast.server.inline import running_loop
from mcpfast.store.base import StoreUnavailable
from mcpfast.transports.answers import OK_EMPTY, Deferred, Later, Outcome, Reply, send_reply, wait_disconnect, watch_disconnect
from mcpfast.transports.event_store import EventStore, MemoryEventStore, WritesBehind
from mcpfast.transports.http_routing import Heartbeat, Stream, connect
from mcpfast.transports.sessions import HttpSession, LocalSessions, SessionTable

if TYPE_CHECKING:
    from mcpfast.auth import ResourceServer
    from mcpfast.server.app import Server
    from mcpfast.server.connection import Connection
    from mcpfast.store import SessionStore

__all__ = ["DEFAULT_MAX_BODY", "ENDPOINT_MCP", "ENDPOINT_MESSAGES", "ENDPOINT_SSE", "SESSION_ID_BYTES", "Gate", "HttpTransport", "asgi_app"]

logger = logging.getLogger("mcpfast.transports.http")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

ENDPOINT_MCP: Final = "mcp"
"""The Streamable HTTP endpoint (``path``)."""
ENDPOINT_SSE: Final = "sse"
"""The 2024-11-05 SSE endpoint (``sse_path``)."""
ENDPOINT_MESSAGES: Final = "messages"
"""The 2024-11-05 POST endpoint (``messages_path``)."""

Gate = Callable[[str, "str | None", dict[bytes, bytes], Any], "Reply | None"]
"""A check of the request pipeline: ``gate(method, endpoint, headers, message)`` runs for every
request past the Host check, before Origin and authentication. ``endpoint`` is one of the
``ENDPOINT_*`` names (``None``: another path); ``message`` is the body of a POST to the MCP or
messages endpoint as decoded once by the transport (``core.decode``'s value, or the
``core.JsonRpcError`` it raised), else ``None``. A reply refuses the request with it."""


def _modern_status(answer: Outgoing | None) -> int:
    """The HTTP status of a 2026-07-28 JSON reply: its error code's status, 200 for a result."""
    return wire.status_for_error(answer.code) if answer is not None and answer.kind == ERROR else 200


def _json_answer(stream: Stream, modern: bool) -> Reply:
    """A stream's answer that came alone, as one JSON reply, its status by the era's rule
    (``modern``: 2026-07-28)."""
    answer = stream.hand_over()
    assert answer is not None  # as_json said so
    stream.drain()
    return (_modern_status(answer) if modern else _session_status(answer), _JSON, answer.data)


def _session_status(answer: Outgoing | None) -> int:
    """The HTTP status of a handshake-era JSON reply: 400 for an error without an id, else 200."""
    return 400 if answer is not None and answer.kind == ERROR and answer.request_id is None else 200


_JSON: Final = ((b"content-type", b"application/json"),)  # shared: a tuple, so the server renders it once
_ACCEPTED: Final[Reply] = (202, (), b"")
_LEGACY_ACCEPTED: Final[Reply] = (202, ((b"content-type", b"text/plain"),), b"Accepted")


_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_HANDSHAKE: Final = frozenset(HANDSHAKE_VERSIONS)
_KNOWN_VERSIONS: Final = {v.encode(): v for v in (*HANDSHAKE_VERSIONS, *STATELESS_VERSIONS)}
_STATELESS: Final = frozenset(STATELESS_VERSIONS)
_SSE = core.SseEncoder()
_DECODE_ERROR: Final = core.JsonRpcError
_TOOLS_CALL: Final = m.TOOLS_CALL
SESSION_ID_BYTES: Final = 24
"""Random bytes in a session id (sent base64url-encoded: 32 characters)."""
_ID_MARK: Final = b"\x00"
"""Where the lane puts a session id in an ``initialize`` reply's head (no header value holds NUL)."""


class _Disconnected(Exception):
    pass


def _error_body(code: int, message: str, data: Any = None, rid: int | str | None = None) -> bytes:
    return wire.refusal(message, code, rid, data)


def _reply(status: int, body: bytes = b"", headers: Iterable[tuple[bytes, bytes]] = ()) -> Reply:
    """``(status, headers, body)``; a non-empty body without a content type is JSON."""
    hdrs = list(headers)
    if body and not any(k == b"content-type" for k, _ in hdrs):
        hdrs.extend(_JSON)
    return (status, hdrs, body)


_NOT_FOUND: Final[Reply] = (404, _JSON, _error_body(INVALID_REQUEST, "session not found"))
_NO_SESSION_HEADER: Final[Reply] = _reply(400, _error_body(INVALID_REQUEST, "bad request: missing Mcp-Session-Id header"))
_RETRY: Final = (b"retry-after", b"1")
_UNAVAILABLE: Final[Reply] = (503, (*_JSON, _RETRY), _error_body(INTERNAL_ERROR, "session store unavailable, retry later"))
"""A session store that cannot be reached (a JSON-RPC error body, ``Retry-After``)."""


def _full(rid: int | str | None) -> Reply:
    """``initialize`` when the sessions are at their limit."""
    return (503, (*_JSON, _RETRY), _error_body(INTERNAL_ERROR, "server busy: too many sessions", rid=rid))


async def _answer(outcome: Reply | Deferred, receive: Receive, send: Send) -> None:
    """Send an answer ``handle`` could have returned: a reply, or a deferred one run."""
    if type(outcome) is tuple:
        await send_reply(send, *outcome)
    else:
        await outcome(receive, send)  # type: ignore[operator]


class HttpTransport:
    """The ASGI application serving one ``Server`` over HTTP (see the module doc).

    Args:
        server: the application.
        path: the Streamable HTTP endpoint.
        sse_path, messages_path: the 2024-11-05 endpoints (``sse_path=None`` turns them off).
        allowed_origins: extra allowed ``Origin`` values (exact ``scheme://host[:port]``), on
            top of any origin whose host is localhost, 127.0.0.1 or [::1]; ``"*"`` allows all.
            A request without ``Origin`` is allowed.
        allowed_hosts: the ``Host`` values served (``host``, ``host:*``, ``host:port``; ``"*"``:
            any), against DNS rebinding; ``None``: any host. Every request needs exactly one
            valid ``Host`` (400), and one outside the list gets 421 (``mcpfast.protocol.host``).
        max_body: the largest request body in bytes (413 above).
        max_sessions: open sessions at most; ``initialize`` gets 503 when full.
        session_idle_timeout: seconds without traffic after which a session is closed.
        keepalive: seconds of silence after which an SSE stream gets a ``:`` comment.
        retry_ms: the ``retry`` sent with the priming event (2025-11-25 sessions).
        event_store: where SSE events are kept for ``Last-Event-ID`` replay (default: a
            ``MemoryEventStore``; ``False`` turns resumability off).
        auth: an OAuth resource server (``mcpfast.auth.ResourceServer``); ``None``: no auth.
        json_response: answer requests that emit nothing before their reply as JSON (else SSE,
            except for the answers the session machine makes itself: those are always JSON).
        store: where handshake-era sessions are kept (``mcpfast.store``): ``None`` or a
            ``MemoryStore``, this process (``LocalSessions``); a ``RedisStore``, every process
            that shares it (``SharedSessions``).

    Attributes:
        table: the session table (``mcpfast.transports.sessions``).
        gates: the pipeline's checks before Origin and authentication (see ``Gate``), in order.
        observers: gates among ``gates`` that refuse nothing (they watch: a label to count a
            request by), past which the native server's lane may answer if it counts what they
            would (``open_lane``'s ``counted``).
    """

    direct_http: Final = True
    """The native server may call ``handle`` directly instead of going through ASGI."""

    def __init__(
        self,
        server: Server,
        *,
        path: str = "/mcp",
        sse_path: str | None = "/sse",
        messages_path: str = "/messages",
        allowed_origins: Iterable[str] = (),
        allowed_hosts: Iterable[str] | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        max_sessions: int = 10_000,
        session_idle_timeout: float = 600.0,
        keepalive: float = 15.0,
        retry_ms: int = 1000,
        event_store: EventStore | bool | None = None,
        auth: ResourceServer | None = None,
        json_response: bool = True,
        store: SessionStore | None = None,
    ) -> None:
        self.server = server
        self.path = path
        self.sse_path = sse_path
        self.messages_path = messages_path
        origins = set(allowed_origins)
        self.allow_any_origin = "*" in origins
        self.allowed_origins = frozenset(o.rstrip("/").lower() for o in origins if o != "*")
        self.host_rules = HostRules(allowed_hosts)
        self.max_body = max_body
        self.max_sessions = max_sessions
        self.session_idle_timeout = session_idle_timeout
        self.keepalive = keepalive
        self.heartbeat = Heartbeat(keepalive)
        """When each SSE stream served is due a keep-alive comment (one timer for them all)."""
        self.retry_ms = retry_ms
        events: EventStore | None = None
        if event_store is None or event_store is True:
            events = MemoryEventStore()
        elif event_store is not False:
            events = event_store
        self.auth = auth
        self.json_response = json_response
        self.gates: list[Gate] = []
        self.stateless_gates: set[Gate] = set()
        """Gates that let every 2026-07-28 POST through unchanged (``stateless_only``'s): with
        only those, the native server's lane still answers stateless calls (and nothing else)."""
        self.observers: set[Gate] = set()
        self._stateless: set[Connection] = set()
        self._template: tuple[object, ServerSession] | None = None  # (the server's defaults, a machine made from them)
        self._lane_head: Callable[[int, Any], bytes] | None = None  # the native server's head renderer, with the lane
        self._lane_heads: dict[int, bytes] = {}
        self.table: SessionTable
        if store is not None and store.shared:
            from mcpfast.transports.shared_sessions import SharedSessions

            self.table = SharedSessions(server, store, event_store=events, max_sessions=max_sessions, idle_timeout=session_idle_timeout)
        else:
            self.table = LocalSessions(server, event_store=events, max_sessions=max_sessions, idle_timeout=session_idle_timeout)
        self.lane: core.HttpLane | None = None
        """The native server's lane, once it opened one (``open_lane``)."""
        self.event_store: EventStore | None = self.table.event_store
        """Where SSE events are kept (the shared store's, when the table has one)."""
        self._behind: WritesBehind | None = self.event_store if isinstance(self.event_store, WritesBehind) else None
        """The event store, when its writes land after ``append`` returns (sends wait for them)."""

    def open_lane(
        self,
        *,
        max_head: int,
        max_body: int,
        head: Callable[[int, Any], bytes],
        clock: Callable[[], bytes],
        counted: Callable[[core.HttpLane], None] | None = None,
    ) -> core.HttpLane | None:
        """The native server's lane for this transport (``core.HttpLane``: plain tool calls of
        sessions held here, and 2026-07-28 calls of plain tools, answered without the full
        path; an ``async def`` tool that waits is handed to the full path's machinery from its
        first wait, ``_lane_adopt``), or ``None`` when some request it would answer could be answered otherwise: the
        pure-Python core, gates (but for ``stateless_gates`` only: then it answers stateless
        calls, nothing else; and ``observers``, when ``counted`` makes the lane count what they
        watch) or SSE replies (``json_response=False``). With authentication the lane answers
        only requests whose bearer token the resource server verified (``ResourceServer.lend``)
        and opens no session itself (the full path binds each to its subject). Asked once, by
        the server, before it serves (``head(status, headers)`` renders a reply's head as the
        server writes it, ``clock()`` its current ``date`` line; ``counted(lane)`` sets the
        lane's counting up before it answers anything); gates added after that are not
        consulted by the lane."""
        if not core.HAS_LANE or not self.json_response:
            return None
        judging = [gate for gate in self.gates if gate not in self.observers]
        if counted is None and len(judging) < len(self.gates):
            return None  # nobody would count what the observers watch
        gated = bool(judging)
        if gated and not all(gate in self.stateless_gates for gate in judging):
            return None
        lane = core.HttpLane(
            self.path,
            list(HANDSHAKE_VERSIONS),
            head(200, _JSON),
            self.server.run_tool_inline,
            unencodable_result,
            error_reply,
            clock,
            max_head,
            max_body,
        )
        lane.allow_stateless(list(STATELESS_VERSIONS), self._lane_stateless)
        lane.allow_waiting(PendingCall, self._lane_adopt)
        if counted is not None:
            counted(lane)
        self._lane_head = head
        self.lane = lane
        if self.auth is not None:
            lane.require_tokens()
            self.auth.lend(lane)
        if gated:  # the gates judge the handshake era's requests: the lane serves stateless calls only
            return lane
        table = self.table
        if table.store is None and self.auth is None:  # sessions other processes must see, or bound to a subject, are made by the full path
            lane.allow_births(
                self.server.session_defaults,
                table.sessions,
                self.max_sessions,
                self.session_idle_timeout,
                SESSION_ID_BYTES,
                head(200, [(b"mcp-session-id", _ID_MARK), *_JSON]),
                _ID_MARK,
                head(*_ACCEPTED[:2]),
                head(*OK_EMPTY[:2]),
            )
            self.server.add_session_source(table.bring_in)
        table.attach(lane)
        return lane

    @property
    def sessions(self) -> dict[str, HttpSession]:
        """The handshake-era sessions this process serves, by id (the table's, with those the lane opened)."""
        self.table.bring_in()
        return self.table.sessions

    # ---------------------------------------------------------------- entry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.asgi(scope, receive, send, self.handle)

    async def asgi(self, scope: Scope, receive: Receive, send: Send, handle: Callable[..., Reply | Deferred]) -> None:
        """The ASGI interface answering through ``handle`` (this transport's, or a wrapper's with
        the same signature): the body read under ``max_body``, lifespan events, the head limit."""
        kind = scope["type"]
        if kind == "http":
            path: str = scope["path"]
            root = scope.get("root_path") or ""
            if root and path.startswith(root) and path != root:
                path = path[len(root) :]
            headers: dict[bytes, bytes] = {}
            size = 0
            for key, value in scope["headers"]:
                size += len(key) + len(value) + 4
                if key in headers:
                    headers[key] = headers[key] + b", " + value
                else:
                    headers[key] = value
            if size > DEFAULT_MAX_HEAD:  # the native server refuses these while they arrive; others may not
                await send_reply(send, *_reply(431, _error_body(INVALID_REQUEST, "request head too large")))
                return
            if path[:1] != "/":  # an absolute-form target, as an ASGI server may pass it on
                split = absolute_form(path.encode("latin-1"))
                if split is not None:
                    headers[b"host"], origin = split
                    path = origin.decode("latin-1")
            method: str = scope["method"]
            body = b""
            if method == "POST":
                try:
                    read = await self._read_body(receive, headers)
                except _Disconnected:
                    return
                if type(read) is tuple:
                    await send_reply(send, *read)
                    return
                body = read  # type: ignore[assignment]
            await _answer(handle(method, path, scope.get("query_string", b""), headers, body, root), receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    def handle(self, method: str, path: str, query: bytes, headers: dict[bytes, bytes], body: bytes, root: str = "") -> Reply | Deferred:
        """Serve one HTTP request whose body has been read (``headers``: lower-case names, repeats joined).

        Returns ``(status, headers, body)`` when the answer is known at once (most requests: a
        sync handler's JSON reply, 202, every error), or an async callable ``(receive, send)``
        that streams the answer over ASGI (SSE replies, GET streams, handlers that wait). Both
        the ASGI entry point and the native HTTP server (``mcpfast.transports.http_server``)
        come through here, so every rule is in one place.
        """
        refused = self.host_rules.check(headers.get(b"host"))
        if refused is not None:
            return _reply(refused[0], _error_body(INVALID_REQUEST, refused[1]))
        if path == self.path or (path.endswith("/") and path[:-1] == self.path):
            endpoint: str | None = ENDPOINT_MCP
        elif self.sse_path is not None and path == self.sse_path:
            endpoint = ENDPOINT_SSE
        elif self.sse_path is not None and path == self.messages_path:
            endpoint = ENDPOINT_MESSAGES
        else:
            endpoint = None
        message: Any = None
        if method == "POST" and (endpoint is ENDPOINT_MCP or endpoint is ENDPOINT_MESSAGES):
            try:  # the body is decoded here, once: every later step reads this
                message = core.decode(body)
            except core.JsonRpcError as exc:
                message = exc
        if self.gates:
            for gate in self.gates:
                answer = gate(method, endpoint, headers, message)
                if answer is not None:
                    return answer
        if endpoint is ENDPOINT_MCP:
            origin = headers.get(b"origin")
            if origin is not None and not self._origin_ok(origin):
                return _reply(403, _error_body(INVALID_REQUEST, "forbidden: origin not allowed"))
            if self.auth is not None:
                return self._authenticated(headers, functools.partial(self._mcp, method, headers, message))
            return self._mcp(method, headers, message, None)
        if endpoint is ENDPOINT_SSE:
            if method != "GET":
                return _reply(405, b"", [(b"allow", b"GET")])
            return self._checked(headers, functools.partial(self._legacy_open, root))
        if endpoint is ENDPOINT_MESSAGES:
            if method != "POST":
                return _reply(405, b"", [(b"allow", b"POST")])
            return self._checked(headers, functools.partial(self._legacy_post, query, headers, body, message))
        auth = self.auth
        if auth is not None and path.startswith("/.well-known/oauth-protected-resource"):
            return lambda receive, send: auth.serve_metadata(path, {"method": method}, send)
        return (404, [(b"content-type", b"text/plain")], b"")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:  # the ASGI server reports it and does not serve
                    await send({"type": "lifespan.startup.failed", "message": f"the server's lifespan failed: {exc!r}"})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def startup(self) -> None:
        """Start the server (enter its lifespan) before the first request: the ASGI lifespan's
        startup, or the native server's ``start``."""
        await self.server.start(transport="http")

    async def aclose(self) -> None:
        """Close every session and stateless connection, then stop the server (server shutdown)."""
        try:
            await self.table.aclose()  # a shared table's sessions stay in the store for the other processes
            for conn in list(self._stateless):
                await conn.close()
        finally:
            await self.server.stop()

    # ------------------------------------------------------------- checks

    def _origin_ok(self, origin: bytes) -> bool:
        return wire.origin_allowed(origin, self.allowed_origins, self.allow_any_origin)

    def _checked(self, headers: dict[bytes, bytes], then: Callable[[str | None], Reply | Deferred]) -> Reply | Deferred:
        """The Origin check, then authentication (when configured), then ``then(principal)``."""
        origin = headers.get(b"origin")
        if origin is not None and not self._origin_ok(origin):
            return _reply(403, _error_body(INVALID_REQUEST, "forbidden: origin not allowed"))
        if self.auth is None:
            return then(None)
        return self._authenticated(headers, then)

    def _authenticated(self, headers: dict[bytes, bytes], then: Callable[[str | None], Reply | Deferred]) -> Deferred:
        """Checking the token may wait (a JWKS fetch), so the rest runs deferred."""
        auth = self.auth
        assert auth is not None

        async def deferred(receive: Receive, send: Send) -> None:
            outcome = await auth.check(headers.get(b"authorization"))
            if isinstance(outcome, tuple):
                await send_reply(send, *outcome)
                return
            await _answer(then(outcome.subject), receive, send)

        return deferred

    # -------------------------------------------------------- /mcp endpoint

    def _mcp(self, method: str, headers: dict[bytes, bytes], message: Any, principal: str | None) -> Reply | Deferred:
        raw_version = headers.get(b"mcp-protocol-version")
        version: str | None = None
        if raw_version is not None:
            version = _KNOWN_VERSIONS.get(raw_version) or raw_version.decode("latin-1").strip()
            if version not in _HANDSHAKE and version not in _STATELESS and method != "POST":
                return _reply(
                    400,
                    _error_body(
                        INVALID_REQUEST,
                        f"unsupported MCP-Protocol-Version: {version!r}",
                        {"supported": [*HANDSHAKE_VERSIONS, *STATELESS_VERSIONS]},
                    ),
                )
        # The session table: the session the request names (2026 requests name none).
        raw = headers.get(b"mcp-session-id") if version is None or version in _HANDSHAKE else None
        if raw is None:
            return self._serve(method, headers, message, version, principal, False, None)
        session_id = raw.decode("latin-1")
        sess = self.table.lookup(session_id, principal)
        if sess is not None and method == "POST":  # the usual case, straight to its step
            return self._post(headers, message, version, principal, True, sess)
        if sess is None or method == "GET":  # made by another process, or a stream to resume: the table may load it first
            resume = headers.get(b"last-event-id") if method == "GET" else None
            loading = self.table.load(session_id, principal, None if resume is None else resume.decode("latin-1"))
            if loading is not None:
                return self._loaded(
                    loading, functools.partial(self._serve_loaded, method, headers, message, version, principal, session_id)
                )
        return self._serve(method, headers, message, version, principal, True, sess)

    def _serve_loaded(
        self, method: str, headers: dict[bytes, bytes], message: Any, version: str | None, principal: str | None, session_id: str
    ) -> Reply | Deferred:
        return self._serve(method, headers, message, version, principal, True, self.table.lookup(session_id, principal))

    def _loaded(self, loading: Awaitable[None], then: Callable[[], Reply | Deferred]) -> Deferred:
        """``then()``'s answer once the table has what the request needs (503 if the store cannot be reached)."""

        async def deferred(receive: Receive, send: Send) -> None:
            try:
                await loading
            except StoreUnavailable:
                await send_reply(send, *_UNAVAILABLE)
                return
            await _answer(then(), receive, send)

        return deferred

    def _serve(
        self,
        method: str,
        headers: dict[bytes, bytes],
        message: Any,
        version: str | None,
        principal: str | None,
        named: bool,
        sess: HttpSession | None,
    ) -> Reply | Deferred:
        """One request to the endpoint, its session looked up (``named``: it carried a session id; ``sess``: held here)."""
        if method == "POST":
            return self._post(headers, message, version, principal, named, sess)
        if method == "GET":
            if version in _STATELESS:
                return (405, [(b"allow", b"POST")], b"")
            return self._get(headers, named, sess)
        if method == "DELETE":
            if version in _STATELESS:
                return (405, [(b"allow", b"POST")], b"")
            return self._delete(named, sess)
        return (405, [(b"allow", b"GET, POST, DELETE")], b"")

    async def _read_body(self, receive: Receive, headers: dict[bytes, bytes]) -> bytes | Reply:
        """The whole request body over ASGI, or the 400/413 reply (raises _Disconnected)."""
        limit = self.max_body
        length = headers.get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                return _reply(400, _error_body(INVALID_REQUEST, "bad Content-Length"))
            if declared > limit:
                return _reply(*wire.too_large(limit))
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        body = message.get("body", b"")
        if not message.get("more_body"):
            return body
        chunks = [body]
        size = len(body)
        while True:
            if message["type"] == "http.disconnect":
                raise _Disconnected
            if size > limit:
                return _reply(*wire.too_large(limit))
            if not message.get("more_body"):
                return b"".join(chunks)
            message = await receive()
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)

    def _post(
        self, headers: dict[bytes, bytes], message: Any, version: str | None, principal: str | None, named: bool, sess: HttpSession | None
    ) -> Reply | Deferred:
        if not wire.accepts(headers.get(b"accept"), True, True):
            return _reply(406, _error_body(INVALID_REQUEST, "Accept must list application/json and text/event-stream"))
        if not wire.is_json(headers.get(b"content-type")):
            return _reply(415, _error_body(INVALID_REQUEST, "Content-Type must be application/json"))
        if sess is not None:
            if self.lane is not None and type(message) is not list and type(message) is not _DECODE_ERROR and message.method == _TOOLS_CALL:
                self.lane.learn(headers)  # every check the lane cannot make passed for these values
            return self._post_session(sess, message)
        modern = version is not None and version not in _HANDSHAKE  # 2026-07-28, or unknown (answered -32022)
        if named and not modern:
            return _NOT_FOUND
        # No session: initialize, a 2026 request, or an error.
        if type(message) is _DECODE_ERROR:
            return _reply(400, _error_body(message.code, message.message, rid=message.id))
        if type(message) is list:
            return _reply(400, _error_body(INVALID_REQUEST, "a batch needs a session (send initialize first)"))
        if message.kind == "request" and message.method == m.INITIALIZE and not modern:
            return self._initialize(message, principal, headers)
        if not modern and message.kind == "request":
            modern = META_PROTOCOL_VERSION in _meta(message) or message.method == m.SERVER_DISCOVER
        if not modern:
            return _NO_SESSION_HEADER
        return self._post_stateless(message, headers, version, principal)

    # ------------------------------------------------------ handshake era

    def _initialize(self, decoded: Any, principal: str | None, headers: dict[bytes, bytes]) -> Reply | Deferred:
        table = self.table
        if not table.has_room():
            return _full(decoded.id)
        sess = table.new_session(secrets.token_urlsafe(SESSION_ID_BYTES), principal)
        stream = Stream()
        sess.conn.feed_message(decoded, stream)
        answer = stream.hand_over()
        body = answer.data if answer is not None else b""
        session = sess.conn.session
        version = session.version
        if version is None:  # refused: no session is kept
            table.discard(sess)
            return (200 if body else 202, _JSON if body else (), body)
        sess.version = version
        opened: Reply = (200, [(b"mcp-session-id", sess.id.encode()), *_JSON], body)
        kept = table.open(sess)
        if kept is None:
            lane = self.lane
            if lane is not None:  # every check of this request passed: the lane may answer the next ones like it
                lane.learn(headers)
                lane.learn_initialize(
                    decoded.params["protocolVersion"],
                    version,
                    session.initialize_result(),
                    session.serves_directly(_TOOLS_CALL),
                    self.server.session_defaults(),
                )
            return opened
        return Later(kept, functools.partial(_opened, opened, decoded.id))  # answered once the table kept it

    def _post_session(self, sess: HttpSession, message: Any) -> Reply | Deferred:
        stream = Stream()
        try:
            sess.conn.feed_message(message, stream)
        except Exception:
            logger.exception("unexpected failure handling a POST")
            return _reply(500, _error_body(INTERNAL_ERROR, "internal error"))
        answer = self._post_answer(sess, stream)
        pending = sess.pending
        if pending is None:
            return answer
        sess.pending = None  # a change other processes must see before the client does
        return self._after(pending, answer)

    def _lane_adopt(self, pending: PendingCall, session: HttpSession | str | None, body: bytes) -> Reply | Deferred:
        """The lane's call of an ``async def`` tool that waits (``HttpLane.allow_waiting``),
        served from its first wait as ``_post_session`` serves a handler that waits: held in
        flight by its session's machine (``Connection.adopt``), answered from its stream. The
        session is ``session``, or the one the lane opened with that id (taken over here).
        A session that ended while the tool ran has nobody to answer: the call is cancelled."""
        sess = self.table.lookup(session, None) if type(session) is str else session
        if type(sess) is not HttpSession or self.table.sessions.get(sess.id) is not sess:
            pending.cancel()
            return _NOT_FOUND
        stream = Stream()
        sess.conn.adopt(core.decode(body), stream, pending)  # type: ignore[arg-type]  # one message: the lane read it
        return self._post_answer(sess, stream)

    @staticmethod
    def _after(pending: Awaitable[None], answer: Reply | Deferred) -> Deferred:
        async def deferred(receive: Receive, send: Send) -> None:
            await pending
            await _answer(answer, receive, send)

        return deferred

    def _post_answer(self, sess: HttpSession, stream: Stream) -> Reply | Deferred:
        """The answer to a session's POST once the session machine took it: JSON, 202, or its stream."""
        if stream.closed:
            if stream.as_json(self.json_response):  # answered alone: inline or by the session machine
                return _json_answer(stream, False)
        elif stream.empty and not sess.conn.session.answering(stream):
            return _ACCEPTED  # a notification or a response: nothing is owed
        if not stream.closed:
            sess.keep_stream(stream)
            if stream.empty and self.json_response:
                # A handler still running: the first thing it sends decides, a reply alone
                # (written from the future's callback, no task) or a stream.
                return Later(stream.wait(), functools.partial(self._first_output, stream, sess))
        return functools.partial(self._respond, stream, sess, (), None)

    def _first_output(self, stream: Stream, sess: HttpSession, _: object) -> Reply | Deferred:
        """A session POST's answer once its stream had its first output: JSON if it is the reply alone, else SSE."""
        if stream.as_json(True):
            return _json_answer(stream, False)
        return functools.partial(self._respond, stream, sess, (), None)

    async def _respond(
        self,
        stream: Stream,
        sess: HttpSession | None,
        headers: Iterable[tuple[bytes, bytes]],
        conn: Connection | None,
        receive: Receive,
        send: Send,
    ) -> None:
        """Answer a POST from its stream: JSON when the reply comes first and alone, else SSE."""
        watch: asyncio.Future[Any] | None = None
        owned = False
        try:
            if stream.empty and not stream.closed:
                if conn is None:
                    await stream.wait()
                else:  # 2026: the client going away cancels the request
                    watch, owned = watch_disconnect(receive)
                    watch.add_done_callback(stream.nudge)
                    try:
                        await stream.wait()
                    finally:
                        watch.remove_done_callback(stream.nudge)
                    if watch.done():
                        return
            if stream.as_json(self.json_response):
                # a 2026 reply's status follows its error code, whether it came at once or later
                status, json_headers, body = _json_answer(stream, conn is not None)
                await send_reply(send, status, [*headers, *json_headers], body)
                return
            # Otherwise SSE, also for a request that ends without an answer (cancelled: the
            # server sends none, and a request is answered with JSON or a stream, never 202).
            if watch is None:
                watch, owned = watch_disconnect(receive)
            await self._stream_sse(stream, sess, send, watch, headers)
        finally:
            if watch is not None and owned:
                watch.cancel()
            if conn is not None:
                self._stateless.discard(conn)
                await conn.close()

    async def _stream_sse(
        self,
        stream: Stream,
        sess: HttpSession | None,
        send: Send,
        watch: asyncio.Future[None],
        headers: Iterable[tuple[bytes, bytes]],
        replay: list[tuple[str, bytes]] | None = None,
        started: bool = False,
    ) -> None:
        """Send ``stream`` as SSE until it closes or the client goes away (``watch`` done). It
        waits on the stream alone: the client's going and a keep-alive comment due
        (``heartbeat``) wake it (``Stream.nudge``), so an idle stream holds no timer and no
        second future of its own."""
        store = self.event_store if sess is not None and not sess.legacy else None
        if store is not None and sess is not None and not stream.key:
            stream.key = sess.stream_key()
            stream.session_id = sess.id
            stream.store = store
        stream.sse = True
        stream.attached = True
        if not started:
            await send({"type": "http.response.start", "status": 200, "headers": [*_SSE_HEADERS, *headers]})
        chunk = bytearray()
        if replay:
            for replayed_id, data in replay:
                if data:
                    chunk += _SSE.encode(data, id=replayed_id)
        elif store is not None and sess is not None and sess.version is not None and supports(sess.version, V2025_11_25):
            chunk += _SSE.encode(b"", id=store.append(sess.id, stream.key, b""), retry=self.retry_ms)
        event = "message" if sess is not None and sess.legacy else None
        behind = self._behind if store is not None else None
        beat = self.heartbeat
        beat.add(stream)
        watch.add_done_callback(stream.nudge)
        try:
            while True:
                for data in stream.drain():
                    eid = store.append(sess.id, stream.key, data) if store is not None and sess is not None else None
                    chunk += _SSE.encode(data, id=eid, event=event)
                if stream.closed:  # the last events go out with the end of the body, in one write
                    break
                if not chunk and beat.take_due(stream):
                    chunk += _SSE.comment("keepalive")
                if chunk:
                    if behind is not None and (landed := behind.landed()) is not None:
                        await landed
                    await send({"type": "http.response.body", "body": bytes(chunk), "more_body": True})
                    chunk.clear()
                    beat.sent(stream)
                    continue  # more may have arrived while the write waited
                if watch.done():  # (gone while the write waited: its nudge found no reader)
                    return
                await stream.wait()
                if watch.done():
                    return
            if behind is not None and (landed := behind.landed()) is not None:
                await landed
            await send({"type": "http.response.body", "body": bytes(chunk), "more_body": False})
        except OSError:
            return
        finally:
            beat.discard(stream)
            watch.remove_done_callback(stream.nudge)
            stream.attached = False
            if store is not None and sess is not None:
                # Not yet sent, the stream's last events included when they arrived with the
                # client's going: kept for a resuming client.
                for data in stream.drain():
                    store.append(sess.id, stream.key, data)

    def _get(self, headers: dict[bytes, bytes], named: bool, sess: HttpSession | None) -> Reply | Deferred:
        if not wire.accepts(headers.get(b"accept"), False, True):
            return _reply(406, _error_body(INVALID_REQUEST, "Accept must list text/event-stream"))
        if not named:
            return _NO_SESSION_HEADER
        if sess is None:
            return _NOT_FOUND
        last = headers.get(b"last-event-id")
        if last is not None and self.event_store is not None:
            last_id = last.decode("latin-1")
            found = self.event_store.replay(sess.id, last_id)
            if found is None:
                return _reply(404, _error_body(INVALID_REQUEST, "unknown Last-Event-ID"))
            key, events = found
            live = sess.find_stream(key)
            if live is not None and live.attached:
                return _reply(409, _error_body(INVALID_REQUEST, "stream already has a reader"))
            if live is None:  # live in another process: followed through the store (a shared table)
                live = self.table.follow(sess, key, last_id, events)
            if live is None:
                live = Stream(key)
                live.finish()
            return functools.partial(self._serve_stream, live, sess, events)
        if sess.get.attached:
            return _reply(409, _error_body(INVALID_REQUEST, "a GET stream is already open for this session"))
        return functools.partial(self._serve_stream, sess.get, sess, None)

    async def _serve_stream(
        self, stream: Stream, sess: HttpSession, replay: list[tuple[str, bytes]] | None, receive: Receive, send: Send
    ) -> None:
        watch, owned = watch_disconnect(receive)
        try:
            await self._stream_sse(stream, sess, send, watch, (), replay=replay)
        finally:
            if owned:
                watch.cancel()

    def _delete(self, named: bool, sess: HttpSession | None) -> Reply | Deferred:
        if not named:
            return _NO_SESSION_HEADER
        if sess is None:
            return _NOT_FOUND
        ended = self.table.end(sess)
        if ended is None:
            return OK_EMPTY
        return Later(ended, _ended)  # answered once it ended everywhere and its handlers here wound down

    # ------------------------------------------------------------ 2024-11-05

    def _legacy_open(self, root: str, principal: str | None) -> Reply | Deferred:
        if not self.table.has_room():
            return _reply(503, _error_body(INTERNAL_ERROR, "server busy: too many sessions"))
        return functools.partial(self._legacy_sse, root, principal)

    async def _legacy_sse(self, root: str, principal: str | None, receive: Receive, send: Send) -> None:
        sess = self.table.new_session(secrets.token_urlsafe(SESSION_ID_BYTES), principal, legacy=True)
        endpoint = f"{root}{self.messages_path}?session_id={sess.id}"
        watch, owned = watch_disconnect(receive)
        try:
            await self.table.open_legacy(sess)  # before the endpoint is sent: POSTs may come then
            await send({"type": "http.response.start", "status": 200, "headers": list(_SSE_HEADERS)})
            await send({"type": "http.response.body", "body": _SSE.encode(endpoint, event="endpoint"), "more_body": True})
            await self._stream_sse(sess.get, sess, send, watch, (), started=True)
        finally:
            if owned:
                watch.cancel()
            await self.table.close_legacy(sess)

    def _legacy_post(self, query: bytes, headers: dict[bytes, bytes], body: bytes, message: Any, principal: str | None) -> Reply | Deferred:
        parsed = parse_qs(query.decode("latin-1"))
        session_id = (parsed.get("session_id") or [""])[0]
        if not session_id:
            return _reply(400, _error_body(INVALID_REQUEST, "missing session_id"))
        sess = self.table.lookup(session_id, principal, legacy=True)
        if not wire.is_json(headers.get(b"content-type")):
            return _reply(415, _error_body(INVALID_REQUEST, "Content-Type must be application/json"))
        if sess is None:  # its /sse stream may be open in another process: passed on there
            passing = self.table.pass_on(session_id, principal, body)
            return _NOT_FOUND if passing is None else _passed_on(passing)
        try:
            sess.conn.feed_message(message)
        except Exception:
            logger.exception("unexpected failure handling a POST")
        return _LEGACY_ACCEPTED

    # --------------------------------------------------------- 2026-07-28

    def _post_stateless(
        self, decoded: Any, headers: dict[bytes, bytes], version: str | None, principal: str | None = None
    ) -> Reply | Deferred:
        kind = decoded.kind
        if kind != "request":
            if kind == "notification":
                return _ACCEPTED
            return _reply(400, _error_body(INVALID_REQUEST, "clients must not POST responses in 2026-07-28"))
        method: str = decoded.method
        rid = decoded.id
        meta = _meta(decoded)
        problem = wire.check_request_headers(headers, method, decoded.param, meta.get(META_PROTOCOL_VERSION))
        if problem is None and method == m.TOOLS_CALL:
            problem = _check_param_headers(self.server, decoded, headers)
        if problem is not None:
            return _reply(400, _error_body(HEADER_MISMATCH, problem, rid=rid))
        if method == m.INITIALIZE:  # a 2026-07-28 request: the method does not exist there
            return _reply(404, _error_body(METHOD_NOT_FOUND, f"method not found: {method}", rid=rid))
        if META_PROTOCOL_VERSION not in meta:
            # Over HTTP the header made this a 2026 request, so its _meta is required (the
            # session machine answers a bare server/discover probe, which only makes sense on stdio).
            refused = meta_required(META_PROTOCOL_VERSION) if version in _STATELESS else unsupported_version(STATELESS_VERSIONS, version)
            return _reply(400, _error_body(refused.code, refused.message, refused.data, rid))
        if method == m.SERVER_DISCOVER and not isinstance(meta.get(META_CLIENT_CAPABILITIES), dict):
            refused = meta_required(META_CLIENT_CAPABILITIES)
            return _reply(400, _error_body(refused.code, refused.message, rid=rid))
        if method == m.TOOLS_CALL and self.json_response:  # (else a handler's answer is an SSE stream)
            if self.lane is not None:
                self.lane.learn(headers)  # every check the lane cannot make passed for these values
            answered = self._plain_stateless_call(decoded, meta)
            if answered is not None:
                return answered
        stream = Stream()
        conn = connect(self.server, stream)
        # Every POST is a connection of its own: tasks belong to the caller (one owner for all anonymous ones).
        conn.task_owner = f"principal:{principal}" if principal is not None else "anonymous"
        self._stateless.add(conn)
        conn.feed_message(decoded, stream)
        if stream.as_json(self.json_response):  # answered by the session machine or a sync handler
            self._stateless.discard(conn)
            self.table.finish(conn.close_now())
            return _json_answer(stream, True)
        return functools.partial(self._respond, stream, None, (), conn)

    def _plain_stateless_call(self, decoded: Any, meta: dict[str, Any]) -> Reply | None:
        """A 2026-07-28 ``tools/call`` of a plain sync tool, answered without a connection and a
        session machine of its own: one the machine would admit as it is
        (``ServerSession.admits_stateless``), run by ``Server.run_plain_tool``, its result shaped
        by the machine's rule (``stateless_result``). ``None``: nothing ran, the full path serves it."""
        answer = self._stateless_answer(decoded.param("name"), decoded.param("arguments"), meta, decoded.id, False)
        assert not isinstance(answer, Later)  # (the full path's handlers that wait run on a connection)
        return None if answer is None else (answer[0], _JSON, answer[1])

    def _lane_stateless(self, name: str, arguments: Any, version: str, rid: int | str) -> tuple[int, bytes, bytes] | Later | None:
        """The lane's ``serve`` (``HttpLane.allow_stateless``): a 2026-07-28 call whose headers and
        ``_meta`` the lane found plain, as ``_plain_stateless_call`` answers it; ``(status, head, body)``,
        or for an ``async def`` tool that waits a ``Later`` of its reply (the tool is cancelled
        when the client goes away first, as the full path cancels it).
        ``None`` (nothing ran) for a tool with ``Mcp-Param-*`` annotations: the lane saw no such
        header, and the full path says what is missing."""
        if _param_annotations(self.server, name):
            return None
        answer = self._stateless_answer(name, arguments, _plain_meta(version), rid, True)
        if answer is None or type(answer) is Later:
            return answer
        status, body = answer  # type: ignore[misc]
        return status, self._lane_reply_head(status), body

    def _lane_reply_head(self, status: int) -> bytes:
        """The head of the lane's JSON reply of ``status``, up to its length."""
        head = self._lane_heads.get(status)
        if head is None:
            assert self._lane_head is not None  # set with the lane
            head = self._lane_heads[status] = self._lane_head(status, _JSON)
        return head

    def _stateless_answer(
        self, name: Any, arguments: Any, meta: dict[str, Any], rid: int | str, inline: bool
    ) -> tuple[int, bytes] | Later | None:
        """A 2026-07-28 call of a plain tool run without a connection (``run_plain_tool``; with
        ``inline``, ``run_tool_inline``, whose call that waits is answered by a ``Later``):
        ``(status, body)``, or ``None`` when nothing ran."""
        defaults = self.server.session_defaults()
        template = self._template
        if template is None or template[0] is not defaults:
            template = self._template = (defaults, self.server.new_session())
        session = template[1]
        version = session.admits_stateless(m.TOOLS_CALL, meta)
        if version is None:
            return None
        if type(name) is not str:
            return None
        outcome = self.server.run_tool_inline(name, arguments, version) if inline else self.server.run_plain_tool(name, arguments, version)
        if outcome is None:
            return None
        if type(outcome) is PendingCall:
            done: asyncio.Future[PendingCall] = running_loop().create_future()
            outcome.listen(done.set_result)
            return Later(done, functools.partial(self._stateless_waited, session, name, rid), outcome.cancel)
        return self._stateless_reply(session, name, rid, outcome)

    def _stateless_waited(self, session: ServerSession, name: str, rid: int | str, done: asyncio.Future[PendingCall]) -> Outcome:
        """The reply of a 2026-07-28 call that waited (``_stateless_answer``). Cancelled (its
        client went away, or the tool raised ``CancelledError`` itself) it has none: as the
        full path, the answer waits for the client to go."""
        pending = done.result()
        if pending.cancelled():
            return _until_gone
        status, body = self._stateless_reply(session, name, rid, pending.outcome())
        return (status, _JSON, body)

    @staticmethod
    def _stateless_reply(session: ServerSession, name: str, rid: int | str, outcome: Any) -> tuple[int, bytes]:
        """``(status, body)`` of a 2026-07-28 call's outcome (``run_plain_tool``'s shapes)."""
        if isinstance(outcome, tuple):
            code, message, data = outcome
            return (wire.status_for_error(code), error_reply(rid, code, message, data, f"{m.TOOLS_CALL} {name!r}"))
        result = session.stateless_result(m.TOOLS_CALL, text_result(outcome) if isinstance(outcome, str) else outcome)
        try:
            return (200, core.encode_result(rid, result))
        except (TypeError, ValueError, OverflowError) as exc:  # the tool's bug, answered as one
            return (wire.status_for_error(INTERNAL_ERROR), unencodable_result(rid, exc, f"{m.TOOLS_CALL} {name!r}"))


def _opened(opened: Reply, rid: int | str | None, kept: asyncio.Future[bool]) -> Reply:
    """The answer to an ``initialize`` once the table kept its session (or could not)."""
    try:
        ok = kept.result()
    except (StoreUnavailable, asyncio.CancelledError):
        return _UNAVAILABLE
    return opened if ok else _full(rid)


def _ended(ended: asyncio.Future[None]) -> Reply:
    """The answer to a DELETE once the table ended its session (or could not)."""
    try:
        ended.result()
    except (StoreUnavailable, asyncio.CancelledError):
        return _UNAVAILABLE
    return OK_EMPTY


def _passed_on(passing: Awaitable[bool]) -> Deferred:
    """A 2024-11-05 POST passed on to the process holding its session: 202 once delivered, 404 when nobody holds it."""

    async def deferred(receive: Receive, send: Send) -> None:
        try:
            delivered = await passing
        except StoreUnavailable:
            await send_reply(send, *_UNAVAILABLE)
            return
        await send_reply(send, *(_LEGACY_ACCEPTED if delivered else _NOT_FOUND))

    return deferred


async def _until_gone(receive: Receive, send: Send) -> None:
    """No answer: wait until the client goes away."""
    await wait_disconnect(receive)


def _meta(decoded: Any) -> dict[str, Any]:
    params = decoded.params if decoded.raw_params is not None else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}


_PARAM_CACHE: dict[int, tuple[dict[str, Any], list[tuple[bytes, tuple[str, ...]]]]] = {}


def _check_param_headers(server: Server, decoded: Any, headers: dict[bytes, bytes]) -> str | None:
    """SEP-2243 ``Mcp-Param-*``: each annotated argument must match its header (-32020)."""
    annotations = _param_annotations(server, decoded.param("name"))
    if not annotations:
        return None
    return wire.check_param_headers(annotations, decoded.param("arguments"), headers)


def _param_annotations(server: Server, name: object) -> list[tuple[bytes, tuple[str, ...]]]:
    """The tool's ``Mcp-Param-*`` annotations (none for a tool the server does not define)."""
    definition = server.tool_definition(name)
    if definition is None:
        return []
    cached = _PARAM_CACHE.get(id(definition))
    if cached is None or cached[0] is not definition:
        cached = _PARAM_CACHE[id(definition)] = (definition, wire.param_annotations(definition.get("inputSchema")))
    return cached[1]


_PLAIN_META: dict[str, dict[str, Any]] = {}


def _plain_meta(version: str) -> dict[str, Any]:
    """The ``_meta`` the lane found plain, for ``admits_stateless`` (the client's capabilities
    and info are not read for a plain tool): one per version."""
    meta = _PLAIN_META.get(version)
    if meta is None:
        meta = _PLAIN_META[version] = {META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {}}
    return meta


def asgi_app(server: object, **options: Any) -> HttpTransport:
    """The ASGI application serving ``server`` (options: see ``HttpTransport``): an mcpfast
    ``Server``, or an official-SDK ``MCPServer`` or FastMCP app as ``mcpfast serve --app``
    serves it (``mcpfast.adapters.servable``).

    Raises:
        UnsupportedApp: ``server`` is none of those, or uses what the adapter does not carry.
    """
    from mcpfast.adapters import servable

    return HttpTransport(servable(server), **options)
