"""Serve a FastMCP 4 app (``fastmcp.FastMCP``) on mcpfast.

FastMCP does its work (providers, transforms, its component middleware hooks, argument
validation, result shaping, error masking) inside the handlers it registers on the SDK's lowlevel
server; mcpfast calls those handlers directly, without the lowlevel server's dispatcher, runner
and root middleware, so every component a client can list or call is FastMCP's own.

Private attributes of FastMCP read here, each because FastMCP has no public way to it:
``FastMCP._mcp_server`` (its lowlevel server: the handlers and the lifespan),
``._additional_http_routes``, ``._extensions``, ``._local_provider`` and a wrapped provider's
``_inner`` (to refuse what this adapter does not carry, naming it), and the SDK's ``Server._request_handlers`` /
``._notification_handlers`` for the same reason.
"""

from __future__ import annotations

from typing import Any

from fastmcp import FastMCP
from fastmcp.server.middleware import Middleware

from mcpfast.adapters._bridge import HANDLED_HERE, FrameworkServer, era_capabilities, handshake_capabilities, implementation_extras, refuse
from mcpfast.protocol import methods as m

__all__ = ["adapt"]

_SERVED = frozenset({
    m.TOOLS_LIST, m.TOOLS_CALL, m.RESOURCES_LIST, m.RESOURCES_TEMPLATES_LIST, m.RESOURCES_READ, m.RESOURCES_SUBSCRIBE,
    m.RESOURCES_UNSUBSCRIBE, m.PROMPTS_LIST, m.PROMPTS_GET, m.COMPLETION_COMPLETE,
}) | HANDLED_HERE  # fmt: skip

_ROOT_HOOKS = ("__call__", "on_message", "on_request", "on_notification", "on_initialize", "on_discover")
"""Middleware hooks FastMCP runs around every message at its lowlevel server's root (the
handshake, ping, notifications included), which mcpfast does not enter; the component hooks
(``on_call_tool``, ``on_list_tools``...) run inside the handlers and are carried."""


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
        hooks = [hook for hook in _ROOT_HOOKS if getattr(type(mw), hook, None) is not getattr(Middleware, hook, None)]
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
    return server
