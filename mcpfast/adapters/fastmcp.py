"""Serve a FastMCP 4 app (``fastmcp.FastMCP``) on mcpfast.

FastMCP does its work (providers, transforms, its component middleware hooks, argument
validation, result shaping, error masking) inside the handlers it registers on the SDK's lowlevel
server; mcpfast calls those handlers directly, without the lowlevel server's dispatcher, runner
and root middleware, so every component a client can list or call is FastMCP's own.

``tools/call`` takes a shorter way when nothing it leaves out can act on the call (no
middleware hooks ``tools/call``, no extension, no OpenTelemetry SDK recording spans): the tool
is looked up by the steps of FastMCP's ``get_tool`` (its provider, versions, the session's
visibility rules, auth; ``get_tool`` itself when the app has server transforms or providers of
more than its own), run by its own ``_run`` (argument validation, result conversion) with a
plain ``def`` in mcpfast's worker threads rather than anyio's, and its result or error shaped
as FastMCP's ``call_tool`` and tools/call handler do.
Anything else (an unknown tool, a tool of another kind, a task) takes the handler's own way.

Private attributes of FastMCP read here, each because FastMCP has no public way to it:
``FastMCP._mcp_server`` (its lowlevel server: the handlers and the lifespan),
``._additional_http_routes``, ``._extensions``, ``._local_provider`` and a wrapped provider's
``_inner`` (to refuse what this adapter does not carry, naming it), and the SDK's ``Server._request_handlers`` /
``._notification_handlers`` for the same reason. The short ``tools/call`` reads
``._on_call_tool`` (to know the app kept FastMCP's handler), ``._mask_error_details``,
``._rebind_prefab_tool_names`` and ``._local_provider``, the tool's ``_run``, and the helpers
FastMCP's own handler and ``get_tool`` use (``fastmcp.server.dependencies``'
``_serving_client_tool_call`` / ``_dispatching_tool_call``, ``fastmcp.server.server``'
``_component_auth_allows`` / ``_validation_error_summary``,
``fastmcp.server.mixins.mcp_operations._normalize_call_tool_result``); the adapter sets
``fastmcp.server.context._current_transport`` around each handler, as FastMCP's transports do.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import mcp_types
from fastmcp import FastMCP
from fastmcp.exceptions import FastMCPError, ToolError, ValidationError
from fastmcp.server.context import Context as FastMCPContext
from fastmcp.server.context import _current_transport as fastmcp_transport
from fastmcp.server.dependencies import _dispatching_tool_call, _serving_client_tool_call, bind_request_context, extract_version_spec
from fastmcp.server.middleware import Middleware
from fastmcp.server.middleware.tool_injection import ToolInjectionMiddleware
from fastmcp.server.mixins.mcp_operations import _normalize_call_tool_result
from fastmcp.server.mixins.mcp_operations import logger as handler_logger
from fastmcp.server.server import _component_auth_allows, _validation_error_summary
from fastmcp.server.server import logger as fastmcp_logger
from fastmcp.server.transforms.visibility import apply_session_transforms, is_enabled
from fastmcp.telemetry import telemetry_mode
from fastmcp.tools.base import InputRequiredToolResult, RawStructuredToolResult, ToolResult
from fastmcp.tools.function_tool import FunctionTool
from fastmcp.utilities.exceptions import get_http_status_code, is_timeout_error
from fastmcp.utilities.versions import VersionSpec
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace
from pydantic import ValidationError as PydanticValidationError

from mcpfast.adapters._bridge import (
    HANDLED_HERE,
    FrameworkServer,
    era_capabilities,
    handshake_capabilities,
    implementation_extras,
    input_required_refused,
    mcp_error,
    refuse,
    wire_result,
)
from mcpfast.adapters._threads import WorkerThreads
from mcpfast.protocol import methods as m
from mcpfast.protocol.errors import McpError
from mcpfast.sansio import InboundRequest

__all__ = ["adapt"]

_SERVED = frozenset({
    m.TOOLS_LIST, m.TOOLS_CALL, m.RESOURCES_LIST, m.RESOURCES_TEMPLATES_LIST, m.RESOURCES_READ, m.RESOURCES_SUBSCRIBE,
    m.RESOURCES_UNSUBSCRIBE, m.PROMPTS_LIST, m.PROMPTS_GET, m.COMPLETION_COMPLETE,
}) | HANDLED_HERE  # fmt: skip

_ROOT_HOOKS = ("__call__", "on_message", "on_request", "on_notification", "on_initialize", "on_discover")
"""Middleware hooks FastMCP runs around every message at its lowlevel server's root (the
handshake, ping, notifications included), which mcpfast does not enter; the component hooks
(``on_call_tool``, ``on_list_tools``...) run inside the handlers and are carried."""


_CALL_HOOKS = ("__call__", "on_message", "on_request", "on_call_tool")
"""The middleware hooks a ``tools/call`` passes through inside FastMCP's handler."""

_CALL_PARAMS = frozenset({"name", "arguments", "_meta"})
"""The ``tools/call`` params the short way reads; others (a task, input responses, request state) take the handler's way."""


def _hooks(mw: Middleware, hooks: tuple[str, ...]) -> list[str]:
    """Which of ``hooks`` the middleware's class overrides."""
    return [hook for hook in hooks if getattr(type(mw), hook, None) is not getattr(Middleware, hook, None)]


def refusals(app: FastMCP[Any]) -> list[str]:
    """What ``app`` uses that the adapter does not carry, each with what to do instead."""
    problems: list[str] = []
    lowlevel = app._mcp_server
    if app._additional_http_routes:
        paths = ", ".join(sorted(str(getattr(route, "path", route)) for route in app._additional_http_routes))
        problems.append(f"custom HTTP routes ({paths}): mcpfast serves the MCP endpoint only; serve them from another app, or drop them")
    if app.auth is not None:
        problems.append(
            f"auth ({type(app.auth).__name__}): use mcpfast's own (serve --auth-jwks, docs/server.md), or serve the app with FastMCP"
        )
    for mw in app.middleware:
        hooks = _hooks(mw, _ROOT_HOOKS)
        if hooks:
            problems.append(
                f"middleware {type(mw).__name__} ({', '.join(hooks)}): hooks around every message do not run on mcpfast "
                "(on_call_tool, on_list_tools... do); move its work there, or serve the app with FastMCP"
            )
    mounted = [p for p in app.providers if p is not app._local_provider]
    if mounted:
        # A mount with a namespace wraps its provider (``_inner``) in a transform.
        names = ", ".join(type(getattr(p, "_inner", p)).__name__ for p in mounted)
        problems.append(
            f"mounted servers or providers ({names}): not carried; serve the app with FastMCP, or register their components directly"
        )
    if app._extensions:
        problems.append(f"extensions ({', '.join(sorted(app._extensions))}): not carried; remove them, or serve the app with FastMCP")
    if lowlevel.cache_hints:
        problems.append("cache_hints: not carried; remove them (mcpfast sets the 2026-07-28 cache fields itself)")
    custom = sorted(set(lowlevel._request_handlers) - _SERVED)
    if custom:
        problems.append(f"request handlers for {', '.join(custom)}: methods of its own are not carried")
    if lowlevel._notification_handlers:
        problems.append(f"notification handlers for {', '.join(sorted(lowlevel._notification_handlers))}: not carried")
    return problems


def adapt(app: FastMCP[Any]) -> FrameworkServer:
    """An mcpfast ``Server`` serving ``app`` as FastMCP's own server does.

    Raises:
        UnsupportedApp: ``app`` uses a feature the adapter does not carry (the message names
            each one and what to do).
    """
    refuse(f"FastMCP {app.name!r}", refusals(app))
    lowlevel = app._mcp_server
    capabilities = handshake_capabilities(lowlevel)
    # FastMCP always lists the MCP Apps UI extension; the SDK's sieve drops it from a
    # handshake-era initialize, and mcpfast declares extensions of its own only.
    capabilities.pop("extensions", None)
    server = FrameworkServer(
        lowlevel,
        capabilities,
        era_capabilities(lowlevel),  # at 2026-07-28 the UI extension is listed
        name=lowlevel.name,
        version=lowlevel.version,
        title=lowlevel.title,
        instructions=app.instructions,
    )
    server.extra_server_info = implementation_extras(lowlevel.description, lowlevel.website_url, lowlevel.icons)
    # FastMCP decides by its transport: component auth checks are skipped on stdio, and a
    # 2026-07-28 request over HTTP has no scope for per-client state (visibility rules).
    server.transport_var = (fastmcp_transport, {"stdio": "stdio", "http": "streamable-http"})
    entry = lowlevel.get_request_handler(m.TOOLS_CALL)
    if entry is not None and entry.handler == app._on_call_tool:  # not replaced by the app
        server.routes[m.TOOLS_CALL] = _tools_call(app, server.routes[m.TOOLS_CALL], server, server.worker_threads)
    return server


def _telemetry_acts() -> bool:
    """Whether FastMCP's span around a tool call would do anything: it records with an
    OpenTelemetry SDK set as the tracer provider (not the API's default no-op one), and attaches
    the caller's trace context in ``propagation_only`` mode; ``off`` does nothing. The mode is
    FastMCP's own reading (its setting, downgraded inside ``suppress_fastmcp_telemetry()``)."""
    mode = telemetry_mode()
    if mode == "off":
        return False
    return mode != "native" or not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def _error_result(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)], is_error=True)


def _failed(app: FastMCP[Any], name: str, exc: Exception) -> mcp_types.CallToolResult:
    """What FastMCP's ``call_tool`` and tools/call handler make of a tool that raised ``exc``: an
    error result (logged as they log it), or an exception the route answers as a JSON-RPC error."""
    if isinstance(exc, ValidationError):  # bad arguments (FastMCP's own kind)
        cause = exc.__cause__
        if isinstance(cause, PydanticValidationError):
            fastmcp_logger.warning("Invalid arguments for tool %r: %s", name, _validation_error_summary(cause))
        else:
            fastmcp_logger.warning("Invalid arguments for tool %r", name)
        return _error_result(str(exc))
    if isinstance(exc, FastMCPError):
        fastmcp_logger.log(exc.log_level, f"Error calling tool {name!r}", exc_info=False)
        return _error_result(str(exc))
    if isinstance(exc, PydanticValidationError):
        fastmcp_logger.warning("Invalid arguments for tool %r: %s", name, _validation_error_summary(exc))
        raise exc
    if isinstance(exc, MCPError) and exc.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY:
        fastmcp_logger.debug("Tool %r requires a client capability the client did not declare", name)
        raise exc
    status = get_http_status_code(exc)
    fastmcp_logger.error(f"Error calling tool {name!r}", exc_info=exc if status is None else None)
    if status == 429:
        error = ToolError("Rate limited by upstream API, please retry later")
    elif is_timeout_error(exc):
        error = ToolError("Upstream request timed out, please retry")
    elif app._mask_error_details:
        error = ToolError(f"Error calling tool {name!r}")
    else:
        error = ToolError(f"Error calling tool {name!r}: {exc}")
    return _error_result(str(error))


def _shaped(name: str, version: str, result: ToolResult) -> mcp_types.CallToolResult:
    """A ``tools/call`` result as FastMCP's handler shapes it for ``version``."""
    modern = version in MODERN_PROTOCOL_VERSIONS
    if isinstance(result, InputRequiredToolResult):
        if modern:
            raise input_required_refused(m.TOOLS_CALL)
        raise MCPError(
            code=mcp_types.INVALID_PARAMS,
            message=(
                f"Tool {name!r} returned an InputRequiredResult to request client input, but the multi-round-trip result "
                "type (SEP-2322) only exists at MCP 2026-07-28; this connection "
                f"negotiated {version!r}. Use ctx.elicit() for server-initiated input on handshake-era connections."
            ),
        )
    structured = result.structured_content
    if not modern and (isinstance(result, RawStructuredToolResult) or (structured is not None and not isinstance(structured, dict))):
        fastmcp_meta = result.meta.get("fastmcp") if result.meta else None
        if not (isinstance(fastmcp_meta, dict) and fastmcp_meta.get("wrap_result") is True):
            meta = dict(result.meta or {})
            meta["fastmcp"] = {**(fastmcp_meta if isinstance(fastmcp_meta, dict) else {}), "wrap_result": True}
            result = ToolResult(content=result.content, structured_content={"result": structured}, meta=meta, is_error=result.is_error)
    return _normalize_call_tool_result(result.to_mcp_result())


def _tools_call(app: FastMCP[Any], generic: Any, server: FrameworkServer, threads: WorkerThreads) -> Any:
    """``tools/call`` as FastMCP's handler answers it, minus what can not act on the call here
    (the module's docstring says when); the rest takes ``generic``, the handler's own way."""
    decided: dict[str, tuple[Any, Any]] = {}  # name -> (the app's tool, what runs for it); the app's own is left as it is
    passing: list[tuple[Middleware, ...]] = [()]  # the last middleware list seen to leave tools/call alone (no injected tools either)

    local = app._local_provider

    def middleware_passes() -> bool:
        current = tuple(app.middleware)
        if current == passing[0]:
            return True
        if any(isinstance(mw, ToolInjectionMiddleware) or _hooks(mw, _CALL_HOOKS) for mw in current):
            return False
        passing[0] = current
        return True

    def runnable(tool: Any) -> Any:
        """The tool to run for ``tool`` (itself, or a copy whose plain function runs in
        ``threads``), or ``None`` when the call takes the handler's way; decided once a tool."""
        known = decided.get(tool.name)
        if known is not None and known[0] is tool:
            return known[1]
        if type(tool) is not FunctionTool or tool.task_config.mode != "forbidden":
            run = None
        elif (
            tool.run_in_thread
            and tool.timeout is None
            and inspect.isfunction(tool.fn)
            and not inspect.iscoroutinefunction(tool.fn)
            and not inspect.isgeneratorfunction(tool.fn)
        ):
            run = tool.model_copy(update={"fn": threads.caller(tool.fn)})
        else:
            run = tool  # as FastMCP runs it: on the loop if it asks, a coroutine, a generator, under a timeout
        decided[tool.name] = (tool, run)  # a tool replaced since is decided anew
        return run

    async def call(request: InboundRequest, conn: Any) -> dict[str, Any]:
        params = request.params
        name = params.get("name")
        args = params.get("arguments")
        if args is None:
            args = {}
        if (
            not isinstance(name, str)
            or type(args) is not dict
            or not _CALL_PARAMS.issuperset(params)
            or app._extensions
            or not middleware_passes()
            or _telemetry_acts()
        ):
            result: dict[str, Any] = await generic(request, conn)
            return result
        server.lifespan_context_vars()
        context = server.request_context(request, conn)
        spec = extract_version_spec(params.get("_meta"))
        version = VersionSpec(eq=spec) if spec else None
        if handler_logger.isEnabledFor(logging.DEBUG):
            handler_logger.debug(f"[{app.name}] Handler called: call_tool %s with %s", name, args)
        try:
            with bind_request_context(context), _serving_client_tool_call():
                async with FastMCPContext(fastmcp=app):
                    with _dispatching_tool_call():
                        shaped = await run(name, version, args, request.version)
        except McpError:
            raise
        except Exception as exc:
            raise mcp_error(exc, request.stateless) from None
        if shaped is None:  # unknown, disabled, or a tool of another kind: FastMCP's handler says what
            result = await generic(request, conn)
            return result
        return wire_result(m.TOOLS_CALL, request.version, shaped)

    async def lookup(name: str, version: VersionSpec | None) -> Any:
        """FastMCP's ``get_tool``; with the app's own provider alone and no server transforms,
        its steps without the fan-out over providers: the provider's lookup (its transforms
        included), the tool's auth check, the session's visibility rules, the enabled mark and the
        auth check again. ``None`` where ``get_tool`` would look further (other versions)."""
        providers = app.providers
        if app.transforms or len(providers) != 1 or providers[0] is not local:
            return await app.get_tool(name, version=version)
        tool = await local.get_tool(name, version)
        if tool is None or not await allowed(tool):
            return None
        seen = await apply_session_transforms([tool])
        if seen and is_enabled(seen[0]) and await allowed(seen[0]):
            return seen[0]
        return None

    async def allowed(tool: Any) -> bool:
        # FastMCP's check admits a tool without ``auth`` whoever asks; it reads the request's
        # token first, which such a tool does not need.
        return tool.auth is None or await _component_auth_allows(tool)

    async def run(name: str, version: VersionSpec | None, args: dict[str, Any], protocol: str) -> mcp_types.CallToolResult | None:
        try:
            tool = runnable(await lookup(name, version))
        except Exception:  # the handler's way looks it up again, and says what went wrong as FastMCP does
            return None
        if tool is None:
            return None
        try:
            outcome = await app._rebind_prefab_tool_names(await tool._run(args))
        except Exception as exc:
            return _failed(app, name, exc)
        return _shaped(name, protocol, outcome)

    return call
