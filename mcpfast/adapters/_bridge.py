"""What both adapters share: a ``Server`` answering through a framework's own request handlers,
and the framework session its handlers talk to, bridged to mcpfast's ``Context``.

Both frameworks (the official SDK's ``MCPServer`` and FastMCP 4) sit on the SDK's lowlevel
server: each method is a handler ``handler(ctx: ServerRequestContext, params: Model)`` returning
a pydantic result. The framework's own stack wraps those handlers in a dispatcher, a runner and a
middleware chain; here mcpfast's session machine does that work and calls the handler directly,
then shapes the result exactly as the framework's runner does (``model_dump`` by alias without
``None``s, then the per-version sieve of ``mcp_types.methods.serialize_server_result``).

Imported only when a framework object is adapted: it imports ``mcp``.
"""

from __future__ import annotations

import contextvars
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import mcp_types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types import methods as sdk_methods
from pydantic import BaseModel, ValidationError

from mcpfast.adapters._threads import WorkerThreads
from mcpfast.adapters.errors import UnsupportedApp
from mcpfast.protocol import methods as m
from mcpfast.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, McpError
from mcpfast.protocol.meta import META_CLIENT_INFO
from mcpfast.protocol.versions import STATELESS_VERSIONS
from mcpfast.sansio import CapabilityError, InboundRequest
from mcpfast.sansio import ServerSession as SessionMachine
from mcpfast.server import Context, Server

__all__ = [
    "HANDLED_HERE",
    "ConnectionState",
    "FrameworkServer",
    "SessionBridge",
    "era_capabilities",
    "handshake_capabilities",
    "input_required_refused",
    "mcp_error",
    "notify",
    "refuse",
    "wire_result",
]

logger = logging.getLogger("mcpfast.adapters")

Handler = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[Any]]

_ROUTED = (
    m.TOOLS_LIST, m.TOOLS_CALL, m.RESOURCES_LIST, m.RESOURCES_TEMPLATES_LIST, m.RESOURCES_READ, m.RESOURCES_SUBSCRIBE,
    m.RESOURCES_UNSUBSCRIBE, m.PROMPTS_LIST, m.PROMPTS_GET, m.COMPLETION_COMPLETE,
)  # fmt: skip
"""The methods a framework app serves through its handlers; one it has no handler for is -32601, as there."""

HANDLED_HERE = frozenset({"ping", "server/discover", "subscriptions/listen", "logging/setLevel"})
"""Methods mcpfast's session machine answers itself, whatever handler the framework registered
for them (the framework's are its defaults: the handshake, discovery and listen streams are
protocol machinery, not application code)."""


def mcp_error(exc: Exception, stateless: bool = False) -> McpError:
    """The JSON-RPC error the framework's dispatcher answers for a handler that raised ``exc``.

    An ``MCPError`` carries its own code, message and data; a pydantic ``ValidationError`` is
    -32602 "Invalid request parameters" with empty data; anything else is, on a handshake-era
    session, code 0 with the exception's text (the SDK dispatcher's catch-all, kept as it is for
    parity), and on a 2026-07-28 request -32603 "Internal server error" (the text stays in the
    server's log there).
    """
    if isinstance(exc, MCPError):
        error = exc.error
        return McpError(error.code, error.message, error.data)
    if isinstance(exc, ValidationError):
        return McpError(INVALID_PARAMS, "Invalid request parameters", "")
    if stateless:
        logger.error("handler raised", exc_info=exc)
        return McpError(INTERNAL_ERROR, "Internal server error")
    return McpError(0, str(exc))


def input_required_refused(method: str) -> McpError:
    """The error for a handler that answered with an ``InputRequiredResult``: its
    ``requestState`` must be sealed (and the retry's unsealed) by the framework's request-state
    boundary, which is part of the pipeline left out, so it is refused, not sent in the clear."""
    return McpError(INTERNAL_ERROR, f"{method}: multi-round-trip results (InputRequiredResult) are not carried by mcpfast")


def wire_result(method: str, version: str, result: Any) -> dict[str, Any]:
    """A handler's result as the framework's runner puts it on the wire for ``version``.

    Raises:
        McpError: -32603 when the result does not fit the method's result schema.
    """
    if isinstance(result, BaseModel):
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    elif result is None:
        dumped = {}
    else:
        dumped = dict(result)
    try:
        return sdk_methods.serialize_server_result(method, version, dumped)
    except ValidationError:
        logger.exception("handler for %r returned an invalid result", method)
        raise McpError(INTERNAL_ERROR, "Handler returned an invalid result") from None
    except (KeyError, ValueError):  # a method or a version the SDK's surface does not list: as it came
        return dumped


class ConnectionState:
    """Per-connection facts the framework reads off its session's ``_connection``: a ``state``
    dict (FastMCP keeps its state-key prefix and the client's log level there), ``session_id``,
    and the client's ``initialize`` params, built once."""

    __slots__ = ("__weakref__", "_client_params", "session_id", "state")

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}
        self.session_id: str | None = None
        self._client_params: tuple[Any, mcp_types.InitializeRequestParams | None] | None = None

    def client_params(self, conn: Any, request: InboundRequest) -> mcp_types.InitializeRequestParams | None:
        if request.stateless:  # 2026-07-28: the client tells who it is in each request's _meta
            meta = request.params.get("_meta")
            info = meta.get(META_CLIENT_INFO) if isinstance(meta, dict) else None
            return _initialize_params(request.version, request.client_capabilities, info)
        info = conn.session.client_info
        cached = self._client_params
        if cached is not None and cached[0] is info:
            return cached[1]
        params = _initialize_params(request.version, conn.session.client_capabilities, info)
        self._client_params = (info, params)
        return params


def _initialize_params(version: str, capabilities: Any, info: Any) -> mcp_types.InitializeRequestParams | None:
    if not isinstance(info, dict):
        return None
    raw = {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": info}
    try:
        return mcp_types.InitializeRequestParams.model_validate(raw, by_name=False)
    except ValidationError:
        return None


class SessionBridge(ServerSession):
    """The SDK's ``ServerSession`` for one request, speaking through mcpfast's ``Context``.

    Everything the SDK's session offers (``create_message``, ``elicit_form``, ``list_roots``,
    ``send_ping``, the list-changed notifications...) goes through ``send_request`` or
    ``send_notification``, which this class reimplements; progress and logs go to the
    ``Context`` as they are. The parent's ``__init__`` is not called: it wants the SDK's
    dispatcher, which is not there.
    """

    def __init__(self, ctx: Context, request: InboundRequest, conn: Any, connection: ConnectionState) -> None:
        self._ctx = ctx
        self._request = request
        self._conn = conn
        self._facts = connection
        # The SDK's own attribute name, which FastMCP reads (``session._connection.state``).
        self._connection = connection  # type: ignore[assignment]
        self._caps: tuple[Any, mcp_types.ClientCapabilities | None] | None = None

    @property
    def client_params(self) -> mcp_types.InitializeRequestParams | None:
        return self._facts.client_params(self._conn, self._request)

    @property
    def client_capabilities(self) -> mcp_types.ClientCapabilities | None:
        caps = self._request.client_capabilities
        if self._caps is None or self._caps[0] is not caps:
            self._caps = (caps, mcp_types.ClientCapabilities.model_validate(caps, by_name=False) if caps else None)
        return self._caps[1]

    @property
    def can_send_request(self) -> bool:
        return not self._request.stateless

    @property
    def protocol_version(self) -> str:
        return self._request.version

    def check_client_capability(self, capability: mcp_types.ClientCapabilities) -> bool:
        """Whether the client declared every capability (and sub-capability) in ``capability``."""
        wanted = capability.model_dump(by_alias=True, mode="json", exclude_none=True)
        declared = self._request.client_capabilities
        return _covers(declared, wanted)

    async def send_request(
        self,
        request: Any,
        result_type: type[Any],
        request_read_timeout_seconds: float | None = None,
        metadata: Any = None,
        progress_callback: Any = None,
    ) -> Any:
        data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        method = data["method"]
        if self._request.stateless:
            # 2026-07-28 has no server-to-client requests; the framework raises the same.
            raise NoBackChannelError(method)
        try:
            result = await self._ctx.send_request(method, data.get("params"), request_read_timeout_seconds)
        except McpError as exc:
            raise MCPError(code=exc.code, message=exc.message, data=exc.data) from None
        return result_type.model_validate(result, by_name=False)

    async def send_notification(self, notification: Any, related_request_id: Any = None) -> None:
        data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
        method: str = data["method"]
        params: dict[str, Any] = data.get("params") or {}
        if method == m.NOTIFICATION_MESSAGE:
            self._ctx.log(params["level"], params.get("data"), params.get("logger"))  # already dumped above
        elif method == m.NOTIFICATION_PROGRESS:
            self._progress(params["progress"], params.get("total"), params.get("message"))
        elif method == m.NOTIFICATION_ELICITATION_COMPLETE:
            self._conn.session.elicitation_complete(params["elicitationId"])
        else:  # list_changed, resources/updated: to whoever the session machine says wants them
            notify(self._conn.session, method, params or None)

    async def send_log_message(self, level: Any, data: Any, logger: str | None = None, related_request_id: Any = None) -> None:
        # ``data`` may hold models (FastMCP's LogData): dumped as the SDK's own notification model does.
        params = mcp_types.LoggingMessageNotificationParams(level=level, data=data, logger=logger)
        self._ctx.log(level, params.model_dump(by_alias=True, mode="json", exclude_none=True)["data"], logger)

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        self._progress(progress, total, message)

    async def send_progress_notification(
        self, progress_token: str | int, progress: float, total: float | None = None, message: str | None = None,
        related_request_id: str | None = None,
    ) -> None:  # fmt: skip
        self._progress(progress, total, message)

    def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        try:
            self._ctx.report_progress(progress, total, message)
        except ValueError:
            # The spec wants progress to increase; the session machine drops a value that does not.
            logger.debug("progress %s dropped: not above the last one sent", progress)


def implementation_extras(description: str | None, website_url: str | None, icons: Any) -> dict[str, Any]:
    """The ``serverInfo`` fields a framework app may set beyond name, version and title."""
    info: dict[str, Any] = {}
    if description is not None:
        info["description"] = description
    if website_url is not None:
        info["websiteUrl"] = website_url
    if icons:
        info["icons"] = [icon.model_dump(by_alias=True, mode="json", exclude_none=True) for icon in icons]
    return info


def refuse(app: str, problems: list[str]) -> None:
    """Refuse an app that uses what the adapter does not carry (``app``: how to name it), naming each."""
    if problems:
        raise UnsupportedApp(f"{app} uses what mcpfast does not carry:\n  - " + "\n  - ".join(problems))


def handshake_capabilities(lowlevel: Any) -> dict[str, Any]:
    """The capabilities the framework declares in a handshake-era ``initialize``, as on the wire."""
    declared = lowlevel.create_initialization_options().capabilities
    return dict(declared.model_dump(by_alias=True, mode="json", exclude_none=True))


def era_capabilities(lowlevel: Any) -> dict[str, Any] | None:
    """The capabilities the framework declares at 2026-07-28 (its ``server/discover``): change
    notifications there go over ``subscriptions/listen`` only, so it derives the flags from
    whether it serves that method. ``None`` when the framework has no such derivation."""
    try:
        declared = lowlevel.get_capabilities(protocol_version=STATELESS_VERSIONS[-1])
    except TypeError:
        return None
    return dict(declared.model_dump(by_alias=True, mode="json", exclude_none=True))


def notify(session: Any, method: str, params: dict[str, Any] | None) -> bool:
    """A change notification through mcpfast's session machine; one for a feature the server did
    not declare (the framework's ``listChanged: false``) is dropped, as the spec wants, where the
    framework would send it anyway."""
    try:
        return bool(session.notify(method, params))
    except CapabilityError:
        logger.debug("%s dropped: the server did not declare it", method)
        return False


def _covers(declared: Any, wanted: Any) -> bool:
    if not isinstance(wanted, dict) or not wanted:
        return True
    if not isinstance(declared, dict):
        return False
    return all(key in declared and _covers(declared[key], value) for key, value in wanted.items())


class FrameworkServer(Server):
    """A ``Server`` whose methods are answered by a framework app's lowlevel handlers.

    Args:
        lowlevel: the framework's lowlevel ``mcp.server.lowlevel.Server``: its request handlers
            serve the methods, its lifespan is this server's (entered by ``start``; what it yields
            is the handlers' ``ctx.request_context.lifespan_context``).
        capabilities: what ``initialize`` declares.
        **options: ``Server`` options (name, version, title, instructions).
    """

    def __init__(
        self, lowlevel: Any, capabilities: dict[str, Any], stateless_capabilities: dict[str, Any] | None = None, **options: Any
    ) -> None:
        super().__init__(lifespan=lambda _server: lowlevel.lifespan(lowlevel), **options)
        self.lowlevel = lowlevel
        self._declared = capabilities
        self._declared_stateless = stateless_capabilities
        self.serves_listen = lowlevel.get_request_handler(m.SUBSCRIPTIONS_LISTEN) is not None
        self.extra_server_info: dict[str, Any] = {}
        """``Implementation`` fields beyond name, version and title (description, websiteUrl, icons)."""
        self._states: weakref.WeakKeyDictionary[Any, ConnectionState] = weakref.WeakKeyDictionary()
        self._lifespan_vars: tuple[tuple[contextvars.ContextVar[Any], Any], ...] = ()
        self._entered_vars: tuple[tuple[contextvars.ContextVar[Any], Any], ...] = ()
        self.transport_var: tuple[contextvars.ContextVar[Any], Mapping[str, Any]] | None = None
        """A context variable of the framework naming the transport that serves it, with its
        value for each of mcpfast's (``stdio``, ``http``): set around each handler with the
        lifespan's variables when one transport serves the server (the framework decides
        things by it, such as FastMCP's auth checks, skipped on stdio)."""
        self.worker_threads = WorkerThreads()
        """Where the app's plain ``def`` handlers run, when the adapter routes them here."""
        self.input_schema: Callable[[str], Mapping[str, Any] | None] | None = getattr(lowlevel, "get_tool_input_schema", None)
        for method in _ROUTED:
            entry = lowlevel.get_request_handler(method)
            if entry is None:
                self.routes.pop(method, None)  # -32601, as the framework answers it
            else:
                self.routes[method] = self.route(method, entry.handler, entry.params_type)

    async def start(self, *, transport: Literal["stdio", "http"] | None = None) -> None:
        # A framework's lifespan may set context variables its handlers read (FastMCP: the
        # current server, its shared dependency context). Handlers run in tasks that do not
        # always descend from the one that started the server (the HTTP transport's), so the
        # variables the lifespan set are kept and set again around each handler. A nested start
        # enters no lifespan: what the first one kept stays.
        before = contextvars.copy_context()
        await super().start(transport=transport)
        after = contextvars.copy_context()
        entered = tuple((var, value) for var, value in after.items() if var not in before or before[var] is not value)
        if entered:
            self._entered_vars = entered
        kept = self._entered_vars
        if self.transport_var is not None and len(self.transports) == 1:
            var, names = self.transport_var
            kept += ((var, names[next(iter(self.transports))]),)
        self._lifespan_vars = kept

    async def stop(self) -> None:
        await super().stop()
        self.worker_threads.stop()
        if self.lifespan_state is None:
            self._lifespan_vars = self._entered_vars = ()

    def lifespan_context_vars(self) -> None:
        """Set the context variables the lifespan set, in the calling task's own context."""
        for var, value in self._lifespan_vars:
            var.set(value)

    def capabilities(self) -> dict[str, Any]:
        return self._declared

    def stateless_capabilities(self) -> dict[str, Any] | None:
        return self._declared_stateless

    def new_session(self, *, records: bool = True) -> SessionMachine:
        session = super().new_session(records=records)
        # The frameworks stamp a 2026-07-28 cacheable result without a cache hint of its own
        # (server/discover: the session machine's) as "private", the SDK's CacheHint default;
        # mcpfast's own default is "public".
        session.cache_scope = "private"
        # Both frameworks word a -32601 the same way (their runner's), with the method as data.
        session.not_found_message = "Method not found"
        return session

    def server_info(self) -> dict[str, Any]:
        return {**super().server_info(), **self.extra_server_info}

    def tool_definition(self, name: object) -> dict[str, Any] | None:
        """The tool's ``inputSchema`` for the transport's ``Mcp-Param-*`` checks (the rest of the
        definition is the framework's, served by its ``tools/list``)."""
        if not isinstance(name, str) or self.input_schema is None:
            return None
        schema = self.input_schema(name)
        return {"name": name, "inputSchema": dict(schema)} if schema is not None else None

    def connection_state(self, conn: Any) -> ConnectionState:
        state = self._states.get(conn)
        if state is None:
            state = self._states[conn] = ConnectionState()
        return state

    def request_context(self, request: InboundRequest, conn: Any) -> ServerRequestContext[Any, Any]:
        """The framework's per-request context for ``request``, its session bridged to ours."""
        params = request.params if request.raw_params is not None else None
        meta = None
        if isinstance(params, dict) and "_meta" in params:
            try:
                meta = mcp_types.RequestParams.model_validate({"_meta": params["_meta"]}, by_name=False).meta
            except ValidationError:
                meta = None
        session = SessionBridge(Context(conn, request), request, conn, self.connection_state(conn))
        return ServerRequestContext(
            session=session,
            lifespan_context=self.lifespan_state if self.lifespan_state is not None else {},
            protocol_version=request.version,
            method=request.method,
            params=params,
            request_id=request.id,
            meta=meta,
        )

    def route(self, method: str, handler: Handler, params_type: type[BaseModel]) -> Callable[[InboundRequest, Any], Any]:
        """A route calling ``handler`` as the framework's runner does, minus its pipeline."""

        async def serve(request: InboundRequest, conn: Any) -> dict[str, Any]:
            raw = request.params if request.raw_params is not None else {}
            self.lifespan_context_vars()
            try:
                typed = params_type.model_validate(raw, by_name=False)
                result = await handler(self.request_context(request, conn), typed)
            except McpError:
                raise
            except Exception as exc:
                raise mcp_error(exc, request.stateless) from None
            if isinstance(result, mcp_types.ErrorData):
                raise McpError(result.code, result.message, result.data)
            if isinstance(result, mcp_types.InputRequiredResult):
                raise input_required_refused(method)
            return wire_result(method, request.version, result)

        return serve
