"""Serve an official-SDK app (``mcp.server.mcpserver.MCPServer``, mcp 2.x) on mcpfast.

The app's tools, resources, templates, prompts and completion handler are served by the
framework's own code (argument validation, output schemas, structured content, error results
are its own), without its request pipeline: ``tools/call`` calls the tool object's ``run``
directly; the other methods call the handler the app registered on its lowlevel server.

Private attributes of the SDK read here, each because the SDK has no public way to it:
``MCPServer._lowlevel_server`` (the handlers and the lifespan), ``mcp.server._otel``'s
``OpenTelemetryMiddleware`` (a default middleware, told apart from the app's own), ``._tool_manager`` (the tool
objects ``tools/call`` runs), ``._subscriptions`` (the bus its ``Context`` publishes to, which the adapter listens to),
``._custom_starlette_routes``, ``._extensions`` and ``._lowlevel_server._request_handlers`` /
``._notification_handlers`` (to refuse what this adapter does not carry).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import mcp_types
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.mcpserver import Context as SdkContext
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, ToolsListChanged

from mcpfast.adapters._bridge import (
    HANDLED_HERE,
    FrameworkServer,
    era_capabilities,
    handshake_capabilities,
    implementation_extras,
    input_required_refused,
    mcp_error,
    notify,
    refuse,
    wire_result,
)
from mcpfast.adapters._threads import WorkerThreads
from mcpfast.protocol import methods as m
from mcpfast.sansio import InboundRequest

__all__ = ["adapt"]

logger = logging.getLogger("mcpfast.adapters")

_SERVED = frozenset({
    m.TOOLS_LIST, m.TOOLS_CALL, m.RESOURCES_LIST, m.RESOURCES_TEMPLATES_LIST, m.RESOURCES_READ, m.RESOURCES_SUBSCRIBE,
    m.RESOURCES_UNSUBSCRIBE, m.PROMPTS_LIST, m.PROMPTS_GET, m.COMPLETION_COMPLETE,
}) | HANDLED_HERE  # fmt: skip


def refusals(app: MCPServer[Any]) -> list[str]:
    """What ``app`` uses that the adapter does not carry, each with what to do instead."""
    problems: list[str] = []
    lowlevel = app._lowlevel_server
    if app._custom_starlette_routes:
        paths = ", ".join(sorted(route.path for route in app._custom_starlette_routes))
        problems.append(f"custom HTTP routes ({paths}): mcpfast serves the MCP endpoint only; serve them from another app, or drop them")
    if app.settings.auth is not None or app._token_verifier is not None or app._auth_server_provider is not None:
        problems.append("auth (auth=, token_verifier=, auth_server_provider=): use mcpfast's own (serve --auth-jwks, docs/server.md)")
    extra = [mw for mw in lowlevel.middleware if not isinstance(mw, OpenTelemetryMiddleware | RequestStateBoundary)]
    if extra:
        names = ", ".join(type(mw).__name__ for mw in extra)
        problems.append(f"middleware ({names}): it would not run on mcpfast; remove it, or serve the app with its own server")
    if app._extensions:
        names = ", ".join(e.identifier for e in app._extensions)
        problems.append(f"extensions ({names}): not carried; remove them, or serve the app with its own server")
    if lowlevel.cache_hints:
        problems.append("cache_hints: not carried; remove them (mcpfast sets the 2026-07-28 cache fields itself)")
    custom = sorted(set(lowlevel._request_handlers) - _SERVED)
    if custom:
        problems.append(f"request handlers for {', '.join(custom)}: methods of its own are not carried")
    if lowlevel._notification_handlers:
        names = ", ".join(sorted(lowlevel._notification_handlers))
        problems.append(f"notification handlers for {names}: not carried")
    return problems


def adapt(app: MCPServer[Any], *, inline_sync_tools: bool = False) -> FrameworkServer:
    """An mcpfast ``Server`` serving ``app`` as the SDK's own server does.

    ``inline_sync_tools``: run plain ``def`` tools on the event loop rather than in the SDK's
    worker thread (``mcpfast.adapters.servable`` says when that is right).

    Raises:
        UnsupportedApp: ``app`` uses a feature the adapter does not carry (the message names
            each one and what to do).
    """
    refuse(f"{type(app).__name__} {app.name!r}", refusals(app))
    lowlevel = app._lowlevel_server
    capabilities = handshake_capabilities(lowlevel)
    # The SDK's handlers send notifications/message without declaring logging; mcpfast declares
    # it, as the spec wants of a server that logs (logging/setLevel then works too).
    capabilities.setdefault("logging", {})
    if not capabilities.get("extensions"):
        capabilities.pop("extensions", None)  # the SDK's sieve drops an empty one from initialize
    stateless = era_capabilities(lowlevel)
    if stateless is not None:
        stateless.setdefault("logging", {})  # as at the handshake: the handlers log
    server = FrameworkServer(
        lowlevel, capabilities, stateless, name=app.name, version=app.version, title=app.title, instructions=app.instructions
    )
    server.extra_server_info = implementation_extras(app.description, app.website_url, app.icons)
    app._subscriptions.subscribe(functools.partial(_forward_event, server))
    entry = lowlevel.get_request_handler(m.TOOLS_CALL)
    if entry is not None and entry.handler == app._handle_call_tool:  # not replaced by the app
        server.routes[m.TOOLS_CALL] = _tools_call(app, server, server.routes[m.TOOLS_CALL], inline_sync_tools)
    return server


def _forward_event(server: FrameworkServer, event: Any) -> None:
    """An event a handler published with ``ctx.notify_*`` (the 2026 ``subscriptions/listen``
    bus), sent to mcpfast's sessions that want it (its session machine decides who)."""
    if isinstance(event, ResourceUpdated):
        method, params = m.NOTIFICATION_RESOURCES_UPDATED, {"uri": event.uri}
    elif isinstance(event, ToolsListChanged | PromptsListChanged | ResourcesListChanged):
        kind = "tools" if isinstance(event, ToolsListChanged) else "prompts" if isinstance(event, PromptsListChanged) else "resources"
        method, params = f"notifications/{kind}/list_changed", None
    else:
        return
    for conn in server.connections():
        notify(conn.session, method, params)


def _on_the_loop(tool: Any) -> Any:
    """A copy of the SDK ``Tool`` whose sync function is called on the event loop: the SDK's
    ``run`` awaits an async function where it would hand a sync one to a worker thread, and
    does everything else (validation, result conversion, error wrapping) as for the original."""
    fn = tool.fn

    async def call_inline(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return _as_async(tool, call_inline)


def _in_worker_threads(tool: Any, threads: WorkerThreads) -> Any:
    """A copy of the SDK ``Tool`` whose sync function runs in a thread of ``threads``, as the SDK
    runs it in one of anyio's, for less per call; the rest of ``run`` is as for the original."""
    return _as_async(tool, threads.caller(tool.fn))


def _as_async(tool: Any, call: Any) -> Any:
    return tool.model_copy(update={"fn": call, "is_async": True})


def _tools_call(app: MCPServer[Any], server: FrameworkServer, generic: Any, inline_sync_tools: bool) -> Any:
    """``tools/call`` through the tool object's ``run``: what ``MCPServer``'s handler does, minus
    the look-ups and wrappers between them, in both eras (an unknown tool or odd params take the
    handler's own way)."""
    manager = app._tool_manager
    bus = app._subscriptions
    copies: dict[str, tuple[Any, Any]] = {}  # name -> (the app's sync tool, the copy that runs it); the app's own is left as it is
    threads = server.worker_threads

    async def call(request: InboundRequest, conn: Any) -> dict[str, Any]:
        params = request.params
        name = params.get("name")
        tool = manager.get_tool(name) if isinstance(name, str) else None
        args = params.get("arguments")
        if args is None:
            args = {}
        if tool is None or type(args) is not dict:
            result: dict[str, Any] = await generic(request, conn)
            return result
        # At 2026-07-28 the tool's Context answers an elicitation from the request's own params
        # (input responses), as the SDK's handler gives them; before, nothing reads them.
        typed = mcp_types.CallToolRequestParams.model_validate(params, by_name=False) if request.stateless else None
        if not tool.is_async:
            known = copies.get(tool.name)
            if known is None or known[0] is not tool:  # a tool replaced since: copy the new one
                known = copies[tool.name] = (tool, _on_the_loop(tool) if inline_sync_tools else _in_worker_threads(tool, threads))
            tool = known[1]
        server.lifespan_context_vars()
        context = SdkContext(request_context=server.request_context(request, conn), mcp_server=app, input_params=typed, subscriptions=bus)
        try:
            value = await tool.run(args, context, convert_result=True)
        except MCPError as exc:
            raise mcp_error(exc, request.stateless) from None  # the JSON-RPC error, as the SDK answers it
        except Exception as exc:
            logger.info("tool %r failed: %r", name, exc)
            value = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=str(exc))], is_error=True)
        if isinstance(value, mcp_types.InputRequiredResult):
            raise input_required_refused(m.TOOLS_CALL)
        return wire_result(m.TOOLS_CALL, request.version, value)

    return call
