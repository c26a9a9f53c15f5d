"""``ServerSession``: the sans-IO server side of one MCP connection.

Bytes go in through ``receive`` (or a decoded message through ``receive_message``); the session machine
answers what it can itself (``initialize``, ``ping``, ``server/discover``, ``logging/setLevel``,
every protocol error) and hands the rest to the application as events. Outgoing messages
collect in an outbox the transport drains, as ``Outgoing`` records that say what each message
is: the request it answers or is sent for, its kind and error code, whether it ends that
request, and the ``tag`` the transport gave with the input it belongs to. A transport routes
and frames by reading the records; it never subclasses the session or re-parses its output.
No I/O, no asyncio: the transport decides when to read and write.

Both eras are served at one endpoint: ``initialize`` starts a handshake-era session, and a
request whose ``params._meta`` names a 2026-07-28 version is served statelessly on its own terms.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

import orjson

from mcpfast import core
from mcpfast.protocol import methods as m
from mcpfast.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    URL_ELICITATION_REQUIRED,
    McpError,
    meta_required,
    unsupported_version,
)
from mcpfast.protocol.meta import (
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
)
from mcpfast.protocol.versions import (
    BATCH_VERSIONS,
    HANDSHAKE_VERSIONS,
    STATELESS_VERSIONS,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    negotiate,
    supports,
)
from mcpfast.sansio.events import (
    BATCH,
    END,
    ERROR,
    NOTIFICATION,
    REQUEST,
    RESULT,
    Event,
    Initialized,
    NotificationReceived,
    Outgoing,
    ReplyReceived,
    RequestCancelled,
    RequestReceived,
)
from mcpfast.sansio.request import InboundRequest
from mcpfast.sansio.rules import log_level_rank

__all__ = ["CapabilityError", "LifecycleError", "ServerSession", "SessionState", "State", "unencodable_result"]

logger = logging.getLogger("mcpfast.sansio")

_CACHEABLE: Final = frozenset(
    {m.SERVER_DISCOVER, m.TOOLS_LIST, m.PROMPTS_LIST, m.RESOURCES_LIST, m.RESOURCES_TEMPLATES_LIST, m.RESOURCES_READ}
)
_LISTEN_FLAGS: Final = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}
_LISTEN_METHOD: Final = {
    "toolsListChanged": m.NOTIFICATION_TOOLS_LIST_CHANGED,
    "promptsListChanged": m.NOTIFICATION_PROMPTS_LIST_CHANGED,
    "resourcesListChanged": m.NOTIFICATION_RESOURCES_LIST_CHANGED,
}


class State(enum.Enum):
    """Handshake-era lifecycle of a session."""

    NEW = "new"
    """Nothing but ``initialize`` and ``ping`` is served yet."""
    INITIALIZING = "initializing"
    """``initialize`` was answered; the client's ``notifications/initialized`` has not arrived."""
    READY = "ready"
    """The handshake is complete."""


class SessionState(NamedTuple):
    """What of a handshake-era session another process needs to serve it (``ServerSession.snapshot``,
    ``ServerSession.restore``): the negotiated handshake, and what ``logging/setLevel`` and
    ``resources/subscribe`` changed since."""

    version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None = None
    subscriptions: frozenset[str] = frozenset()


class CapabilityError(McpError):
    """The server tried to use a feature the client did not declare (or the version lacks)."""


class LifecycleError(McpError):
    """The server tried to send something the lifecycle does not allow yet."""


class _Batch:
    __slots__ = ("admitted", "owed", "pending", "replies", "tag")

    def __init__(self, tag: Any) -> None:
        self.pending = 0
        self.replies: list[bytes] = []
        self.tag = tag
        self.owed = False  # it held a request (or an invalid member), so an answer (or END) is due
        self.admitted = False  # a member went to the application (else the session machine answered it all)


_INIT_RESULTS: dict[tuple[str, int, int, str | None], tuple[dict[str, Any], dict[str, Any], bytes]] = {}
"""Encoded ``initialize`` results; an entry holds the dicts it was made from, so a reused id is caught."""
_EMPTY: Final[frozenset[str]] = frozenset()
_DECODE_ERROR: Final = core.JsonRpcError
_record: Final = tuple.__new__
"""Builds an ``Outgoing`` (or a ``RequestReceived``) without a Python-level call: one is made per message."""
_METHODS: dict[frozenset[str], frozenset[str]] = {}
"""The method set per ``extra_methods``, shared by every session of a server."""
_DIRECT: dict[tuple[frozenset[str], str, frozenset[str]], frozenset[str]] = {}
"""``_direct_methods`` per (methods, version, capability names): a handful of entries per process."""
_SELF_ANSWERED_STATELESS: Final = frozenset({m.INITIALIZE, m.SERVER_DISCOVER, m.SUBSCRIPTIONS_LISTEN})
"""2026-07-28 methods the machine answers (or refuses) itself rather than admitting them."""


class ServerSession:
    """The server half of one MCP connection, without I/O.

    Args:
        server_info: ``Implementation`` object (``name``, ``version``, optional ``title``...).
        capabilities: the server capabilities to declare; every feature the server serves
            must be listed here, and methods of undeclared features are answered -32601.
        instructions: optional ``instructions`` for ``initialize``/``server/discover``.
        handshake_versions: handshake-era versions accepted by ``initialize``, oldest first.
        stateless_versions: 2026-era versions served per request, oldest first (empty to turn
            the stateless era off).
        cache_ttl_ms: ``ttlMs`` put on cacheable 2026 results that do not set one.
        cache_scope: ``cacheScope`` put on cacheable 2026 results that do not set one.
        extra_methods: non-MCP request methods the application serves (admitted as events;
            any other unknown method is answered -32601 here).
        records: keep an ``Outgoing`` record per message (``records_to_send``). ``False`` for a
            transport that only writes bytes in order (stdio): the outbox then holds the
            encoded messages themselves and ``data_to_send`` hands them over as they are.
        stateless_capabilities: the capabilities of the 2026 era (``server/discover``, the
            ``subscriptions/listen`` filter), when they differ from the handshake's (``None``:
            the same): change notifications reach 2026 listeners only, never a handshake
            session, by the flags that era declares.
        serves_listen: whether ``subscriptions/listen`` is served (else -32601).
        not_found_message: the ``message`` of every -32601 for a method this session does not
            serve, which then carries the method's name as ``data`` (an adapted framework's
            wording); ``None``: this session's own wording, naming the method and why.

    Attributes:
        state: the handshake-era lifecycle state.
        version: the negotiated version (``None`` until ``initialize``).
        client_capabilities: what the client declared in ``initialize``.
        client_info: the client's ``Implementation`` from ``initialize``.
        log_level: the level set by ``logging/setLevel`` (``None``: never set).
        on_output: called (with no arguments) whenever a record lands in an empty outbox, so a
            transport can wake its writer or take the records at once (``records_to_send``);
            it must not feed the session from there.
        on_change: called (with no arguments) when what ``snapshot`` holds beyond the handshake
            changes (the log level, the subscriptions) through this session's own input or
            calls, never through ``restore`` (see ``share``).
        on_stray: called with each reply (a decoded result or error) to a request this session
            did not send; ``None``: such replies are dropped (see ``share``).
    """

    def __init__(
        self,
        server_info: dict[str, Any],
        capabilities: dict[str, Any],
        *,
        instructions: str | None = None,
        handshake_versions: tuple[str, ...] = HANDSHAKE_VERSIONS,
        stateless_versions: tuple[str, ...] = STATELESS_VERSIONS,
        cache_ttl_ms: int = 0,
        cache_scope: str = "public",
        extra_methods: frozenset[str] = frozenset(),
        records: bool = True,
        stateless_capabilities: dict[str, Any] | None = None,
        serves_listen: bool = True,
        not_found_message: str | None = None,
    ) -> None:
        self.records = records
        self.not_found_message = not_found_message
        self.server_info = server_info
        self.capabilities = capabilities
        self.stateless_capabilities = capabilities if stateless_capabilities is None else stateless_capabilities
        self.serves_listen = serves_listen
        self.instructions = instructions
        self.handshake_versions = handshake_versions
        self.stateless_versions = stateless_versions
        self.cache_ttl_ms = cache_ttl_ms
        self.cache_scope = cache_scope
        methods = _METHODS.get(extra_methods)
        if methods is None:
            methods = _METHODS[extra_methods] = m.CLIENT_REQUESTS | extra_methods
        self._methods = methods  # shared: an idle session holds no set of its own
        self.state = State.NEW
        self.version: str | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.client_info: dict[str, Any] | None = None
        self.log_level: str | None = None
        self.on_output: Callable[[], None] | None = None
        self.subscriptions: set[str] | frozenset[str] = _EMPTY  # a set of its own from the first subscribe
        self.on_change: Callable[[], None] | None = None
        self.on_stray: Callable[[Any], None] | None = None
        self._outbox: list[Any] = []  # Outgoing records, or (records=False) their bytes
        self._inflight: dict[int | str, InboundRequest] = {}  # the request is its own in-flight entry
        self._outgoing: dict[int | str, tuple[str, int | str | None]] = {}  # id -> (method, related request)
        self._next_id = 0
        self._batches: dict[int, _Batch] = {}
        self._next_batch = 0
        self._listens: dict[int | str, dict[str, Any]] = {}
        self._direct: frozenset[str] = frozenset()
        self._held: dict[tuple[str, Any], dict[str, Any] | None] = {}
        self._url_elicitations: set[str] | frozenset[str] = _EMPTY

    # ------------------------------------------------------------------ output

    def records_to_send(self) -> list[Outgoing]:
        """Take every record waiting to be written, in order (``Outgoing``: what each message is).

        Raises:
            RuntimeError: the session was made with ``records=False`` (it keeps bytes only).
        """
        if not self.records:
            raise RuntimeError("this session keeps no records (records=False): use data_to_send")
        out, self._outbox = self._outbox, []
        return out

    def data_to_send(self) -> list[bytes]:
        """Take every message waiting to be written, in order (each without a newline)."""
        out, self._outbox = self._outbox, []
        if not self.records:
            return out  # the outbox holds the bytes themselves
        if len(out) == 1:  # the usual case: one reply (a list display is cheaper than a comprehension)
            data = out[0][0]
            return [data] if data else []
        return [record.data for record in out if record.data]

    def serves_directly(self, method: str) -> bool:
        """Whether a request for ``method`` is admitted with no check but a free id (known at
        ``initialize``: available in the version, its capability declared)."""
        return method in self._direct

    @property
    def requests_in_flight(self) -> Mapping[int | str, InboundRequest]:
        """The requests received and not answered yet, by id (the live table, not a copy)."""
        return self._inflight

    def answering(self, tag: Any) -> bool:
        """Whether a request (or batch) received with ``tag`` is still to be answered.

        Read from the in-flight table rather than kept per request, so a request answered inline
        costs no bookkeeping; the newest entries are read first, so a transport that asks right
        after ``receive`` about the request it just handed over gets its answer at once.
        """
        inflight = self._inflight
        if inflight:
            for request in reversed(inflight.values()):
                if request._tag is tag and request.batch is None:
                    return True
        batches = self._batches
        if batches:  # a batch is held until every member is settled
            for group in batches.values():
                if group.tag is tag:
                    return True
        return False

    def _emit(
        self, data: bytes, kind: str, request_id: int | str | None, code: int | None, final: bool, tag: Any, by_engine: bool = False
    ) -> None:
        """Queue one message and what it is (an ``Outgoing``; only its bytes when ``records`` is off)."""
        outbox = self._outbox
        if self.records:
            outbox.append(_record(Outgoing, (data, kind, request_id, code, final, tag, by_engine)))
        elif data:
            outbox.append(data)
        else:
            return  # an END record: no bytes, and nobody reads records
        if len(outbox) == 1 and self.on_output is not None:
            self.on_output()

    def _notify_out(self, method: str, params: dict[str, Any] | None, related: int | str | None = None, tag: Any = None) -> None:
        self._emit(core.encode_notification(method, params), NOTIFICATION, related, None, False, tag)

    def _reply(self, rid: int | str | None, data: bytes, code: int | None, batch: int | None, tag: Any, by_engine: bool = True) -> None:
        """Emit a reply (``code``: an error's; ``by_engine``: no handler saw the request), or keep it for its batch."""
        if batch is None:
            self._emit(data, RESULT if code is None else ERROR, rid, code, True, tag, by_engine)
            return
        # A batch is answered by one array once every member is settled (JSON-RPC 2.0 §6).
        group = self._batches[batch]
        group.replies.append(data)
        self._settle_batch_member(batch)

    def _settle_batch_member(self, batch: int) -> None:
        group = self._batches[batch]
        group.pending -= 1
        if group.pending == 0:
            del self._batches[batch]
            tag = group.tag
            if group.replies:
                self._emit(b"[" + b",".join(group.replies) + b"]", BATCH, None, None, True, tag, not group.admitted)
            elif group.owed:
                self._emit(b"", END, None, None, True, tag)

    # ------------------------------------------------------------------ input

    def receive(self, data: bytes | bytearray | memoryview, tag: Any = None) -> list[Event]:
        """Read one framed message (or batch) and return what the application must act on.

        Protocol errors are answered here (into the outbox) and produce no event. ``tag`` comes
        back on every record answering this input or sent for a request it carried.
        """
        decoded: core.Message | list[core.Message | core.JsonRpcError] | core.JsonRpcError
        try:
            decoded = core.decode(data)
        except core.JsonRpcError as exc:
            decoded = exc
        return self.receive_message(decoded, tag)

    def receive_message(self, decoded: Any, tag: Any = None) -> list[Event]:
        """``receive`` for a message the transport already decoded: ``core.decode``'s value, or
        the ``core.JsonRpcError`` it raised (answered here as ``receive`` answers bad bytes)."""
        events: list[Event] = []
        shape = type(decoded)
        if shape is list:
            self._receive_batch(decoded, events, tag)
        elif shape is _DECODE_ERROR:
            self._reply(decoded.id, core.encode_error(decoded.id, decoded.code, decoded.message), decoded.code, None, tag)
        else:
            kind = decoded.kind
            if kind == "request":
                self._receive_request(decoded, events, None, tag)
            elif kind == "notification":
                self._receive_notification(decoded, events)
            else:
                self._receive_reply(decoded, events)
        return events

    def receive_oversized(self, size: int, limit: int, tag: Any = None) -> None:
        """Answer a message the transport dropped for exceeding its size limit (id unknown)."""
        message = f"message of {size} bytes exceeds the limit of {limit} bytes"
        self._reply(None, core.encode_error(None, INVALID_REQUEST, message), INVALID_REQUEST, None, tag)

    def _receive_batch(self, items: list[Any], events: list[Event], tag: Any) -> None:
        if self.version not in BATCH_VERSIONS:
            message = "batches are not supported in this protocol version"
            self._reply(None, core.encode_error(None, INVALID_REQUEST, message), INVALID_REQUEST, None, tag)
            return
        batch = self._next_batch
        self._next_batch += 1
        group = self._batches[batch] = _Batch(tag)
        group.pending = 1  # held until every element was read, so an early reply cannot flush it
        for item in items:
            group.pending += 1
            if isinstance(item, core.JsonRpcError):
                group.owed = True
                self._reply(item.id, core.encode_error(item.id, item.code, item.message), item.code, batch, tag)
                continue
            kind = item.kind
            if kind == "request":
                group.owed = True
                if item.method == m.INITIALIZE:
                    self._error(item.id, INVALID_REQUEST, "initialize must not be part of a batch", batch, tag)
                else:
                    admitted = len(events)
                    self._receive_request(item, events, batch, tag)  # settles its slot when answered
                    if len(events) > admitted:
                        group.admitted = True
                continue
            if kind == "notification":
                self._receive_notification(item, events)
            else:
                self._receive_reply(item, events)
            self._settle_batch_member(batch)
        self._settle_batch_member(batch)

    def _error(self, request_id: int | str, code: int, message: str, batch: int | None, tag: Any, data: Any = None) -> None:
        self._reply(request_id, core.encode_error(request_id, code, message, data), code, batch, tag)

    def _not_found(self, request_id: int | str, method: str, why: str, batch: int | None, tag: Any) -> None:
        """-32601 for ``method``, which this session does not serve (``why``: what is missing, or empty)."""
        if self.not_found_message is not None:
            self._error(request_id, METHOD_NOT_FOUND, self.not_found_message, batch, tag, method)
        else:
            self._error(request_id, METHOD_NOT_FOUND, f"method not found: {method}{why}", batch, tag)

    def _receive_request(self, msg: Any, events: list[Event], batch: int | None, tag: Any) -> None:
        method: str = msg.method
        rid = msg.id
        # The hot path: a handshake-era session, a method it serves as an application request
        # (precomputed at initialize: available in the version, capability declared), a free id.
        if method in self._direct and rid not in self._inflight:
            params = msg.params  # parsed once here, cached for the application
            meta = params.get("_meta") if type(params) is dict else None
            if meta is None or type(meta) is not dict or META_PROTOCOL_VERSION not in meta:
                request = InboundRequest(msg, self.version, False, self.client_capabilities, self.log_level, batch, tag)  # type: ignore[arg-type]
                self._inflight[rid] = request  # admitted (``_admit``, without the call)
                events.append(_record(RequestReceived, (request,)))
                return
        if rid in self._inflight:
            self._error(rid, INVALID_REQUEST, "request id already in use by a request in flight", batch, tag)
            return
        if method == m.INITIALIZE:
            self._initialize(msg, batch, tag)
            return
        if method not in self._methods:
            self._not_found(rid, method, "", batch, tag)
            return
        meta = _meta_of(msg)
        if META_PROTOCOL_VERSION in meta:
            # A request in the 2026 envelope is served statelessly, on its own terms, whether or
            # not this process also serves a handshake-era session (2026-07-28 lifecycle: dual-era servers).
            self._stateless_request(msg, meta, events, batch, tag)
            return
        if self.state is State.NEW:
            if method == m.PING:
                self._reply(rid, core.encode_result(rid, {}), None, batch, tag)
                return
            if method == m.SERVER_DISCOVER and self.stateless_versions:
                # A probe without _meta: answer so that a dual-era client sees a modern server.
                self._stateless_request(msg, meta, events, batch, tag)
                return
            self._error(rid, INVALID_REQUEST, "the session is not initialized: send initialize first", batch, tag)
            return
        # After the initialize reply the client may send anything (lifecycle spec, initialization: it only had to
        # hold back until it had the reply), so INITIALIZING serves requests like READY.
        version = self.version
        assert version is not None
        if not m.available(method, version) or method == m.SERVER_DISCOVER:
            self._not_found(rid, method, "", batch, tag)
            return
        if method == m.PING:
            self._reply(rid, core.encode_result(rid, {}), None, batch, tag)
            return
        needed = m.SERVER_CAPABILITY_FOR.get(method)
        if needed is not None and needed not in self.capabilities:
            self._not_found(rid, method, f" (capability {needed!r} not offered)", batch, tag)
            return
        if method == m.LOGGING_SET_LEVEL:
            self._set_level(msg, batch, tag)
            return
        if method in (m.RESOURCES_SUBSCRIBE, m.RESOURCES_UNSUBSCRIBE) and not self.capabilities["resources"].get("subscribe"):
            self._not_found(rid, method, " (resource subscriptions not offered)", batch, tag)
            return
        request = InboundRequest(msg, version, False, self.client_capabilities, self.log_level, batch, tag)
        self._admit(request, events)

    def _direct_methods(self, version: str) -> frozenset[str]:
        """Methods a handshake session of ``version`` admits with no further check (shared, cached)."""
        key = (self._methods, version, frozenset(self.capabilities))
        known = _DIRECT.get(key)
        if known is None:
            known = _DIRECT[key] = self._compute_direct(version)
        return known

    def _compute_direct(self, version: str) -> frozenset[str]:
        special = {m.INITIALIZE, m.PING, m.SERVER_DISCOVER, m.LOGGING_SET_LEVEL, m.RESOURCES_SUBSCRIBE, m.RESOURCES_UNSUBSCRIBE}
        direct = set()
        for method in self._methods - special:
            needed = m.SERVER_CAPABILITY_FOR.get(method)
            if m.available(method, version) and (needed is None or needed in self.capabilities):
                direct.add(method)
        return frozenset(direct)

    def _admit(self, request: InboundRequest, events: list[Event]) -> None:
        self._inflight[request.id] = request
        events.append(_record(RequestReceived, (request,)))

    def adopt(self, msg: Any, tag: Any = None) -> InboundRequest:
        """Hold in flight a request a transport's short path started itself, as ``receive``
        would have admitted it: ``msg`` (decoded) of a method this session serves directly
        (``serves_directly``), with a free id and no 2026 ``_meta``. From now on it is a
        request like any other: a reused id is refused, the client's cancel is a
        ``RequestCancelled``, and it is answered with ``respond``/``respond_error`` (``tag``
        on its records).

        Raises:
            ValueError: the session would not have admitted it so (its id in flight, another
                method, a 2026 request).
        """
        rid = msg.id
        if msg.method not in self._direct or rid in self._inflight or META_PROTOCOL_VERSION in _meta_of(msg):
            raise ValueError(f"request {rid!r} cannot be adopted: the session would not admit it directly")
        request = InboundRequest(msg, self.version, False, self.client_capabilities, self.log_level, None, tag)  # type: ignore[arg-type]
        self._inflight[rid] = request
        return request

    def _initialize(self, msg: Any, batch: int | None, tag: Any) -> None:
        rid = msg.id
        if self.state is not State.NEW:
            self._error(rid, INVALID_REQUEST, "initialize was already received", batch, tag)
            return
        params = msg.params
        if not isinstance(params, dict):
            self._error(rid, INVALID_PARAMS, "initialize needs params", batch, tag)
            return
        requested = params.get("protocolVersion")
        caps = params.get("capabilities")
        info = params.get("clientInfo")
        if not isinstance(requested, str) or not isinstance(caps, dict) or not isinstance(info, dict):
            self._error(rid, INVALID_PARAMS, "initialize needs protocolVersion (string), capabilities and clientInfo (objects)", batch, tag)
            return
        version = negotiate(requested, self.handshake_versions)
        self.version = version
        self.client_capabilities = caps
        self.client_info = info
        self.state = State.INITIALIZING
        self._direct = self._direct_methods(version)
        self._reply(rid, core.encode_result(rid, self.initialize_result()), None, batch, tag)

    def initialize_result(self) -> bytes:
        """The encoded result of this session's ``initialize`` reply.

        It depends only on the server's configuration and the negotiated version: encoded once
        per (configuration, version) and spliced into each reply.

        Raises:
            LifecycleError: no ``initialize`` was accepted yet.
        """
        version = self.version
        if version is None:
            raise LifecycleError(INVALID_REQUEST, "the session is not initialized")
        key = (version, id(self.capabilities), id(self.server_info), self.instructions)
        known = _INIT_RESULTS.get(key)
        if known is None or known[0] is not self.capabilities or known[1] is not self.server_info:
            result: dict[str, Any] = {
                "protocolVersion": version,
                "capabilities": self._capabilities_for(version),
                "serverInfo": self._server_info_for(version),
            }
            if self.instructions is not None:
                result["instructions"] = self.instructions
            if len(_INIT_RESULTS) >= 64:
                _INIT_RESULTS.clear()
            known = _INIT_RESULTS[key] = (self.capabilities, self.server_info, orjson.dumps(result))
        return known[2]

    def _capabilities_for(self, version: str) -> dict[str, Any]:
        caps = dict(self.capabilities)
        if not supports(version, V2025_03_26):
            caps.pop("completions", None)  # the capability did not exist yet; the method did
        return caps

    def _server_info_for(self, version: str) -> dict[str, Any]:
        if supports(version, V2025_11_25):
            return self.server_info
        # title (2025-06-18) and icons/description/websiteUrl (2025-11-25) are later fields.
        allowed = {"name", "version", "title"} if supports(version, V2025_06_18) else {"name", "version"}
        return {k: v for k, v in self.server_info.items() if k in allowed}

    def _set_level(self, msg: Any, batch: int | None, tag: Any) -> None:
        params = msg.params
        level = params.get("level") if isinstance(params, dict) else None
        try:
            log_level_rank(level)
        except McpError as exc:
            self._error(msg.id, exc.code, exc.message, batch, tag, exc.data)
            return
        self.log_level = level
        if self.on_change is not None:
            self.on_change()
        self._reply(msg.id, core.encode_result(msg.id, {}), None, batch, tag)

    # ------------------------------------------------------------ stateless era

    def admits_stateless(self, method: str, meta: Any) -> str | None:
        """The version a 2026-07-28 request of ``method`` with params ``_meta`` ``meta`` is served
        in, when this machine would admit it as it is: a method it serves as an application
        request, a version it serves, client capabilities, no log level, the capability the
        method needs offered. ``None`` for anything else (refused, answered by the machine
        itself, or not a stateless request): only ``receive`` says what then.

        For a transport that serves the plain case without a machine of its own per request
        (``respond_stateless`` shapes the result): nothing here changes the machine."""
        if type(meta) is not dict or method not in self._methods or method in _SELF_ANSWERED_STATELESS:
            return None
        requested = meta.get(META_PROTOCOL_VERSION)
        if type(requested) is not str or requested not in self.stateless_versions:
            return None
        if type(meta.get(META_CLIENT_CAPABILITIES)) is not dict or META_LOG_LEVEL in meta or not m.available(method, requested):
            return None
        needed = m.SERVER_CAPABILITY_FOR.get(method)
        if needed is not None and needed not in self.stateless_capabilities:
            return None
        return requested

    def stateless_result(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        """A 2026-07-28 result of ``method`` as ``respond`` sends it (``resultType``, the cache
        fields, ``serverInfo``): for the transport that ran an ``admits_stateless`` request."""
        return self._decorate(method, result)

    def _stateless_request(self, msg: Any, meta: dict[str, Any], events: list[Event], batch: int | None, tag: Any) -> None:
        rid = msg.id
        method: str = msg.method
        requested = meta.get(META_PROTOCOL_VERSION)
        if method == m.SERVER_DISCOVER and requested is None:
            requested = self.stateless_versions[-1] if self.stateless_versions else None
        if not isinstance(requested, str) or requested not in self.stateless_versions:
            exc = unsupported_version(self.stateless_versions, requested)
            self._error(rid, exc.code, exc.message, batch, tag, exc.data)
            return
        caps = meta.get(META_CLIENT_CAPABILITIES, {} if method == m.SERVER_DISCOVER else None)
        if not isinstance(caps, dict):
            exc = meta_required(META_CLIENT_CAPABILITIES)
            self._error(rid, exc.code, exc.message, batch, tag)
            return
        level = meta.get(META_LOG_LEVEL)
        if level is not None:
            try:
                log_level_rank(level)
            except McpError as exc:
                self._error(rid, exc.code, exc.message, batch, tag, exc.data)
                return
        if not m.available(method, requested):
            self._not_found(rid, method, "", batch, tag)
            return
        caps_now = self.stateless_capabilities
        if method == m.SERVER_DISCOVER:
            result: dict[str, Any] = {
                "supportedVersions": list(self.stateless_versions),
                "capabilities": caps_now,
            }
            if self.instructions is not None:
                result["instructions"] = self.instructions
            self._reply(rid, core.encode_result(rid, self._decorate(method, result)), None, batch, tag)
            return
        needed = m.SERVER_CAPABILITY_FOR.get(method)
        if needed is not None and needed not in caps_now:
            self._not_found(rid, method, f" (capability {needed!r} not offered)", batch, tag)
            return
        if method == m.SUBSCRIPTIONS_LISTEN:
            if not self.serves_listen:
                self._not_found(rid, method, "", batch, tag)
                return
            self._listen(msg, requested, caps, batch, tag)
            return
        request = InboundRequest(msg, requested, True, caps, level, batch, tag)
        self._admit(request, events)

    def _listen(self, msg: Any, version: str, caps: dict[str, Any], batch: int | None, tag: Any) -> None:
        params = msg.params if isinstance(msg.params, dict) else {}
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            self._error(msg.id, INVALID_PARAMS, "subscriptions/listen needs a notifications filter", batch, tag)
            return
        # Honour only what was asked for AND what this server declared it can send.
        honoured: dict[str, Any] = {}
        declared = self.stateless_capabilities
        for flag, capability in _LISTEN_FLAGS.items():
            if wanted.get(flag) is True and declared.get(capability, {}).get("listChanged"):
                honoured[flag] = True
        uris = wanted.get("resourceSubscriptions")
        if isinstance(uris, list) and declared.get("resources", {}).get("subscribe"):
            honoured["resourceSubscriptions"] = [u for u in uris if isinstance(u, str)]
        request = InboundRequest(msg, version, True, caps, None, batch, tag)
        self._inflight[msg.id] = request
        self._listens[msg.id] = honoured
        ack = {"notifications": honoured, "_meta": {META_SUBSCRIPTION_ID: msg.id}}
        self._notify_out(m.NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED, ack, msg.id, tag)

    def close_listens(self) -> None:
        """End every ``subscriptions/listen`` stream gracefully (final result), e.g. at shutdown."""
        for listen_id in list(self._listens):
            del self._listens[listen_id]
            entry = self._inflight.pop(listen_id)
            result = self._decorate(m.SUBSCRIPTIONS_LISTEN, {"_meta": {META_SUBSCRIPTION_ID: listen_id}})
            self._reply(listen_id, core.encode_result(listen_id, result), None, entry.batch, entry._tag)

    def _decorate(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        out = dict(result)
        out.setdefault("resultType", "complete")
        if method in _CACHEABLE and out["resultType"] == "complete":
            out.setdefault("ttlMs", self.cache_ttl_ms)
            out.setdefault("cacheScope", self.cache_scope)
        meta = dict(out.get("_meta") or {})
        meta.setdefault(META_SERVER_INFO, self.server_info)
        out["_meta"] = meta
        return out

    # --------------------------------------------------------- notifications in

    def _receive_notification(self, msg: Any, events: list[Event]) -> None:
        method = msg.method
        if method == m.NOTIFICATION_CANCELLED:
            self._cancelled(msg, events)
        elif method == m.NOTIFICATION_INITIALIZED:
            if self.state is State.INITIALIZING:
                self.state = State.READY
                held, self._held = self._held, {}
                for (held_method, held_uri), params in held.items():
                    if held_method != m.NOTIFICATION_RESOURCES_UPDATED or held_uri in self.subscriptions:
                        self._notify_out(held_method, params)
                events.append(Initialized())
        elif method == m.NOTIFICATION_PROGRESS:
            pass  # the server sends no progress-enabled requests, so no token is live
        elif self.state is not State.NEW:
            events.append(NotificationReceived(method, msg.params))

    def _cancelled(self, msg: Any, events: list[Event]) -> None:
        params = msg.params
        if not isinstance(params, dict):
            return  # malformed cancels are ignored, per spec
        rid = params.get("requestId")
        if isinstance(rid, bool) or not isinstance(rid, int | str):
            return
        if rid in self._listens:
            # Closing a listen stream: no reply is owed and the application never saw it.
            del self._listens[rid]
            self._end(rid, self._inflight.pop(rid))
            return
        entry = self._inflight.get(rid)
        if entry is None or entry._cancelled:
            return  # unknown, finished or already cancelled: the race the spec tolerates
        entry._cancelled = True
        reason = params.get("reason")
        events.append(RequestCancelled(rid, reason if isinstance(reason, str) else None))

    def _receive_reply(self, msg: Any, events: list[Event]) -> None:
        sent = self._outgoing.pop(msg.id, None)
        if sent is None:  # a late reply to a request we cancelled, garbage, or another process's
            if self.on_stray is not None:
                self.on_stray(msg)
            return
        method = sent[0]
        if msg.kind == "result":
            events.append(ReplyReceived(msg.id, method, msg.result, None))
        else:
            events.append(ReplyReceived(msg.id, method, None, msg.error))

    # ------------------------------------------------------------ replies out

    def is_cancelled(self, request_id: int | str) -> bool:
        """Whether the client cancelled this request (its reply will be dropped)."""
        entry = self._inflight.get(request_id)
        return entry is not None and entry._cancelled

    def in_flight(self) -> list[int | str]:
        """Ids of the requests not answered yet."""
        return list(self._inflight)

    def respond(self, request_id: int | str, result: dict[str, Any] | bytes) -> bool:
        """Answer a request with a result.

        A stateless (2026) result gets ``resultType``, the cache fields and ``serverInfo``
        added when missing; pass a dict for those (bytes are spliced as they are). A result
        JSON cannot hold (an ``object()``, an integer beyond 64 bits: the handler's bug) is
        answered as -32603 with the request's id, and logged with the tool's name.

        Returns:
            False when nothing was sent: the request was cancelled (never answered, per spec).

        Raises:
            KeyError: the request is not in flight (answered already, or never received).
        """
        request = self._inflight.pop(request_id)
        if request._cancelled:
            self._end(request_id, request)
            return False
        code = None
        try:
            if request.stateless and isinstance(result, dict):
                result = self._decorate(request.method, result)
            data = core.encode_result(request_id, result)
        except (TypeError, ValueError, OverflowError) as exc:  # the handler's bug, answered as one
            code = INTERNAL_ERROR
            data = unencodable_result(request_id, exc, _describe(request))
        except BaseException:
            self._inflight[request_id] = request  # not answered: it stays in flight
            raise
        self._reply(request_id, data, code, request.batch, request._tag, False)
        return True

    def respond_error(self, request_id: int | str, code: int, message: str, data: Any = None) -> bool:
        """Answer a request with a JSON-RPC error; the same rules as ``respond`` (error ``data``
        JSON cannot hold is dropped, the error still sent)."""
        request = self._inflight[request_id]  # removed only once the reply is encoded
        if request._cancelled:
            del self._inflight[request_id]
            self._end(request_id, request)
            return False
        reply = error_reply(request_id, code, message, data, _describe(request))
        del self._inflight[request_id]
        self._reply(request_id, reply, code, request.batch, request._tag, False)
        return True

    def _end(self, request_id: int | str, entry: InboundRequest) -> None:
        """A request left the in-flight table unanswered (cancelled): say so with an ``END`` record."""
        if entry.batch is not None:
            self._settle_batch_member(entry.batch)
            return
        self._emit(b"", END, request_id, None, True, entry._tag)

    # --------------------------------------------------- notifications out

    def request_of(self, request_id: int | str) -> InboundRequest | None:
        """The in-flight request with this id, or ``None``."""
        return self._inflight.get(request_id)

    def progress(self, request_id: int | str, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """Send ``notifications/progress`` for a request in flight.

        Returns:
            False when nothing was sent: the request has no progress token, was answered or
            cancelled (progress only ever goes out for a live token).

        Raises:
            ValueError: ``progress`` does not strictly increase over the last one sent.
        """
        entry = self._inflight.get(request_id)
        if entry is None or entry._cancelled:
            return False
        token = entry.progress_token
        if token is None:
            return False
        if entry._last_progress is not None and not progress > entry._last_progress:
            raise ValueError(f"progress must strictly increase ({progress} after {entry._last_progress})")
        entry._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and supports(entry.version, V2025_03_26):
            params["message"] = message
        self._notify_out(m.NOTIFICATION_PROGRESS, params, request_id, entry._tag)
        return True

    def log(self, level: str, data: Any, logger: str | None = None, *, request_id: int | str | None = None) -> bool:
        """Send ``notifications/message`` if the level passes the filter.

        Handshake era: the session level from ``logging/setLevel`` (everything while unset).
        Stateless era: the request's ``_meta`` level; a request without one gets no logs.

        Returns:
            False when filtered out (or the related request is no longer live).

        Raises:
            CapabilityError: the server did not declare ``logging``.
            McpError: -32602 for an unknown level.
        """
        if "logging" not in self.capabilities:
            raise CapabilityError(INTERNAL_ERROR, "the server did not declare the logging capability")
        rank = log_level_rank(level)
        threshold = self.log_level
        tag = None
        if request_id is not None:
            entry = self._inflight.get(request_id)
            if entry is None or entry._cancelled:
                return False
            tag = entry._tag
            if entry.stateless:
                threshold = entry.log_level
                if threshold is None:
                    return False
        elif self.state is State.NEW:
            return False
        if threshold is not None and rank < log_level_rank(threshold):
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._notify_out(m.NOTIFICATION_MESSAGE, params, request_id, tag)
        return True

    def notify(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Send a change notification of a declared feature to whoever asked for it.

        A handshake-era session gets it once the handshake is done (``resources/updated`` only
        for URIs it subscribed to); each 2026 ``subscriptions/listen`` stream gets it when its
        filter opted in, tagged with the stream's ``subscriptionId``.

        Between the ``initialize`` reply and ``notifications/initialized`` the server may send
        only responses, pings and log messages (lifecycle spec, initialization), so a change notification is held
        (once per method and URI) and goes out when ``initialized`` arrives.

        Returns:
            Whether it was sent (or held for the end of the handshake) at least once.

        Raises:
            CapabilityError: the server did not declare the feature, or the list-changed flag.
        """
        needed = m.SERVER_CAPABILITY_FOR.get(method)
        problem = _undeclared(self.capabilities, method, needed)
        if problem is not None and (
            self.stateless_capabilities is self.capabilities or _undeclared(self.stateless_capabilities, method, needed)
        ):
            raise CapabilityError(INTERNAL_ERROR, problem)
        sent = False
        uri = (params or {}).get("uri")
        if (
            problem is None  # declared at the handshake (else only the 2026 era declared it)
            and self.state is not State.NEW
            and self.version is not None
            and m.available(method, self.version)
            and (method != m.NOTIFICATION_RESOURCES_UPDATED or uri in self.subscriptions)
        ):
            if self.state is State.READY:
                self._notify_out(method, params)
            else:
                self._held[(method, uri)] = params
            sent = True
        for listen_id, honoured in self._listens.items():
            if method == m.NOTIFICATION_RESOURCES_UPDATED:
                wanted = uri in honoured.get("resourceSubscriptions", ())
            else:
                wanted = any(honoured.get(flag) and method == _LISTEN_METHOD[flag] for flag in _LISTEN_FLAGS)
            if wanted:
                meta = {**((params or {}).get("_meta") or {}), META_SUBSCRIPTION_ID: listen_id}
                self._notify_out(method, {**(params or {}), "_meta": meta}, listen_id, self._inflight[listen_id]._tag)
                sent = True
        return sent

    def subscribe(self, uri: str) -> None:
        """Record a ``resources/subscribe`` (the server layer validates the URI first)."""
        if self.subscriptions is _EMPTY:
            self.subscriptions = set()
        self.subscriptions.add(uri)  # type: ignore[union-attr]
        if self.on_change is not None:
            self.on_change()

    def unsubscribe(self, uri: str) -> None:
        """Record a ``resources/unsubscribe``."""
        if self.subscriptions is not _EMPTY:
            self.subscriptions.discard(uri)  # type: ignore[union-attr]
        if self.on_change is not None:
            self.on_change()

    # ------------------------------------------------- server-to-client requests

    def send_request(self, method: str, params: dict[str, Any] | None = None, *, related: int | str | None = None) -> int:
        """Send a server-to-client request (sampling, elicitation, roots, ping).

        Args:
            method: the method.
            params: its params.
            related: the id of the client request this one serves, if any.

        Returns:
            The id; the answer arrives as a ``ReplyReceived`` event.

        Raises:
            LifecycleError: no complete handshake yet, or the related request is a stateless one
                (2026-07-28 has no server-to-client requests; use an input-required result).
            CapabilityError: the client did not declare the capability the method needs, or the
                negotiated version does not have the method.
        """
        if related is not None:
            entry = self._inflight.get(related)
            if entry is not None and entry.stateless:
                raise LifecycleError(
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "protocol 2026-07-28 has no server-to-client requests",
                    {"requiredCapabilities": {m.CLIENT_CAPABILITY_FOR.get(method, method): {}}},
                )
        if self.state is not State.READY or self.version is None:
            if method != m.PING:
                raise LifecycleError(INVALID_REQUEST, f"cannot send {method} before the client sent initialized")
            if self.version is None:
                raise LifecycleError(INVALID_REQUEST, "cannot ping before initialize")
        version = self.version
        if not m.available(method, version):
            raise CapabilityError(METHOD_NOT_FOUND, f"{method} does not exist in protocol {version}")
        needed = m.CLIENT_CAPABILITY_FOR.get(method)
        if needed is not None and needed not in self.client_capabilities:
            raise CapabilityError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"the client did not declare the {needed!r} capability",
                {"requiredCapabilities": {needed: {}}},
            )
        elicitation_id = None
        if method == m.ELICITATION_CREATE:
            elicitation_id = self._check_elicitation_mode(params or {})
        request_id = self._next_id
        self._next_id += 1
        self._outgoing[request_id] = (method, related)
        if elicitation_id is not None:
            if self._url_elicitations is _EMPTY:
                self._url_elicitations = set()
            self._url_elicitations.add(elicitation_id)  # type: ignore[union-attr]
        entry = self._inflight.get(related) if related is not None else None
        tag = entry._tag if entry is not None else None
        self._emit(core.encode_request(request_id, method, params), REQUEST, related, None, False, tag)
        return request_id

    # ------------------------------------------------- URL-mode elicitation

    def _check_elicitation_mode(self, params: dict[str, Any]) -> str | None:
        """Check an ``elicitation/create`` against the client's modes; the URL mode's id, if any."""
        mode = params.get("mode", "form")
        declared = self.client_capabilities.get("elicitation")
        declared = declared if isinstance(declared, dict) else {}
        if mode == "form":
            # ``elicitation: {}`` means form only; a 2025-11-25 client listing modes must list form.
            if declared and "form" not in declared and self.version is not None and supports(self.version, V2025_11_25):
                raise CapabilityError(
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "the client did not declare form-mode elicitation",
                    {"requiredCapabilities": {"elicitation": {"form": {}}}},
                )
            return None
        if mode != "url":
            raise ValueError(f"unknown elicitation mode {mode!r}")
        self._require_url_mode()
        elicitation_id = params.get("elicitationId")
        if not isinstance(elicitation_id, str) or not isinstance(params.get("url"), str):
            raise ValueError("a URL-mode elicitation needs a string url and elicitationId")
        return elicitation_id

    def _require_url_mode(self) -> None:
        if (
            self.version is None
            or not supports(self.version, V2025_11_25)
            or not m.available(m.NOTIFICATION_ELICITATION_COMPLETE, self.version)
        ):
            raise CapabilityError(METHOD_NOT_FOUND, f"URL-mode elicitation does not exist in protocol {self.version}")
        declared = self.client_capabilities.get("elicitation")
        if not isinstance(declared, dict) or "url" not in declared:
            raise CapabilityError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                "the client did not declare URL-mode elicitation",
                {"requiredCapabilities": {"elicitation": {"url": {}}}},
            )

    def url_elicitation_required(self, elicitations: list[dict[str, Any]]) -> McpError:
        """The -32042 error to answer a request with, asking the client to open URL elicitations.

        Each item is an ``ElicitRequestURLParams`` (``mode`` "url", ``message``, ``url``,
        ``elicitationId``); their ids are remembered so ``elicitation_complete`` may be sent.
        Only 2025-11-25 sessions whose client declared ``elicitation.url`` (-32042 is retired in
        2026-07-28).

        Raises:
            CapabilityError: the version or the client does not support URL-mode elicitation.
            ValueError: an item without a string ``url`` and ``elicitationId``.
        """
        self._require_url_mode()
        items = []
        for item in elicitations:
            if not isinstance(item.get("url"), str) or not isinstance(item.get("elicitationId"), str):
                raise ValueError("a URL-mode elicitation needs a string url and elicitationId")
            items.append({**item, "mode": "url"})
        if self._url_elicitations is _EMPTY:
            self._url_elicitations = set()
        self._url_elicitations.update(item["elicitationId"] for item in items)  # type: ignore[union-attr]
        return McpError(
            URL_ELICITATION_REQUIRED, "this request needs the user to complete an elicitation at a URL", {"elicitations": items}
        )

    def elicitation_complete(self, elicitation_id: str) -> bool:
        """Send ``notifications/elicitation/complete`` for a URL elicitation this session started.

        Returns:
            False (nothing sent) for an id the session did not start or already completed.
        """
        if elicitation_id not in self._url_elicitations or self.state is not State.READY:
            return False
        self._url_elicitations.discard(elicitation_id)  # type: ignore[union-attr]
        self._notify_out(m.NOTIFICATION_ELICITATION_COMPLETE, {"elicitationId": elicitation_id})
        return True

    def cancel_request(self, request_id: int | str, reason: str | None = None) -> None:
        """Cancel a server-to-client request: send ``notifications/cancelled``; a late reply is ignored."""
        sent = self._outgoing.pop(request_id, None)
        if sent is None:
            return
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        related = sent[1]
        entry = self._inflight.get(related) if related is not None else None
        self._notify_out(m.NOTIFICATION_CANCELLED, params, related, entry._tag if entry is not None else None)

    def pending_requests(self) -> list[int | str]:
        """Ids of the server-to-client requests still awaiting an answer."""
        return list(self._outgoing)

    # ------------------------------------------------- sessions several processes serve

    def snapshot(self) -> SessionState:
        """What another process needs to serve this session (``restore`` there).

        Raises:
            LifecycleError: no ``initialize`` was answered yet (there is nothing to share).
        """
        if self.version is None:
            raise LifecycleError(INVALID_REQUEST, "the session is not initialized")
        return SessionState(self.version, self.client_capabilities, self.client_info, self.log_level, frozenset(self.subscriptions))

    def restore(self, state: SessionState) -> None:
        """Become the session ``state`` describes (a ``snapshot`` another process took).

        A new session takes the handshake (as if ``initialize`` and ``notifications/initialized``
        had come, with nothing answered) and is ready; an initialized one, which must have
        ``state``'s version, takes its log level and subscriptions (changes another process
        made). ``on_change`` is not called: the change is not this session's news.

        Raises:
            ValueError: a version this session does not serve, or another than its own.
        """
        if self.version is None:
            if state.version not in self.handshake_versions:
                raise ValueError(f"protocol version {state.version!r} is not served here")
            self.version = state.version
            self.client_capabilities = state.client_capabilities
            self.client_info = state.client_info
            self.state = State.READY
            self._direct = self._direct_methods(state.version)
        elif state.version != self.version:
            raise ValueError(f"the session runs {self.version!r}, not {state.version!r}")
        self.log_level = state.log_level
        if state.subscriptions != self.subscriptions:
            self.subscriptions = set(state.subscriptions) if state.subscriptions else _EMPTY

    def share(self, *, first_request_id: int, on_change: Callable[[], None], on_stray: Callable[[Any], None]) -> None:
        """Serve this session together with other processes: number the server-to-client
        requests sent from now on ``first_request_id``, ``first_request_id + 1``, ... (each
        process its own range, so a reply names the one request it answers), call
        ``on_change`` when what the others must learn changes, and ``on_stray`` with each reply
        to a request another process sent."""
        self._next_id = first_request_id
        self.on_change = on_change
        self.on_stray = on_stray


def _undeclared(capabilities: dict[str, Any], method: str, needed: str | None) -> str | None:
    """Why ``capabilities`` do not let the server send change notification ``method`` (``None``: they do)."""
    if needed is None:
        return None
    if needed not in capabilities:
        return f"the server did not declare the {needed!r} capability"
    if method.endswith("/list_changed") and not capabilities[needed].get("listChanged"):
        return f"the server did not declare {needed}.listChanged"
    return None


def error_reply(request_id: int | str, code: int, message: str, data: Any, what: str) -> bytes:
    """The reply to a request answered with a JSON-RPC error; ``data`` JSON cannot hold is
    dropped, and logged (``what``: the request), the error still sent."""
    try:
        return core.encode_error(request_id, code, message, data)
    except (TypeError, ValueError, OverflowError) as exc:
        logger.error("the error data of %s cannot be encoded: %s", what, exc)
        return core.encode_error(request_id, code, message)


def unencodable_result(request_id: int | str, exc: BaseException, what: str) -> bytes:
    """The reply to a request whose result JSON cannot hold (``what``: the request, for the log)."""
    logger.error("the result of %s cannot be encoded: %s", what, exc)
    return core.encode_error(request_id, INTERNAL_ERROR, f"result cannot be encoded: {exc}")


def _describe(request: InboundRequest) -> str:
    """``tools/call 'name'`` (the tool, prompt or resource asked for), for a log line."""
    try:
        params = request.params
    except McpError:
        params = {}
    name = params.get("name", params.get("uri"))
    return f"{request.method} {name!r}" if isinstance(name, str) else request.method


def _meta_of(msg: Any) -> dict[str, Any]:
    if msg.raw_params is None:
        return {}
    params = msg.params
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}
