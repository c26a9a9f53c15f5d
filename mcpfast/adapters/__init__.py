"""Existing MCP apps served as they are: an official-SDK ``MCPServer`` (mcp 2.x) or a FastMCP 4
``FastMCP`` object becomes an mcpfast ``Server`` (docs/sdk-apps.md).

A framework is imported only when an object of it is given (``pip install 'mcpfast[sdk]'`` pins
the versions that work); anything else that is not an mcpfast ``Server`` is refused, naming its
type.
"""

from __future__ import annotations

import importlib.metadata
import re
from typing import Any, Final

from mcpfast.adapters.errors import UnsupportedApp
from mcpfast.server import Server
from mcpfast.server.loader import load_app

__all__ = ["SUPPORTED", "UnsupportedApp", "check_version", "load_server", "servable", "supported_range"]

SUPPORTED: Final = {"mcp": ((2, 3), (3, 0)), "fastmcp": ((4, 2), (5, 0))}
"""Distribution -> (lowest supported version, first unsupported one); the ``sdk`` extra pins the same."""

_KINDS: Final = {
    ("mcp.server.mcpserver.server", "MCPServer"): "mcp",
    ("mcp.server.fastmcp.server", "FastMCP"): "mcp1",  # mcp 1.x's: recognised, to be refused by name
    ("fastmcp.server.server", "FastMCP"): "fastmcp",
}
"""(module, class) of each framework's app class -> its distribution (matched on the class and its
bases, so no framework is imported to recognise it)."""


def _kind(obj: object) -> str | None:
    for cls in type(obj).__mro__:
        kind = _KINDS.get((cls.__module__, cls.__qualname__))
        if kind is not None:
            return kind
    return None


def _release(version: str) -> tuple[int, ...]:
    numbers = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(n) for n in numbers.group(0).split(".")) if numbers else ()


def supported_range(dist: str) -> str:
    """The versions of ``dist`` the adapter works with, as a requirement (``>=2.3,<3``)."""
    low, high = SUPPORTED[dist]
    return f">={'.'.join(map(str, low))},<{high[0]}"


def check_version(dist: str) -> None:
    """Refuse an installed ``dist`` outside the supported range.

    Raises:
        UnsupportedApp: naming the installed version and the ones that work.
    """
    try:
        installed = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        raise UnsupportedApp(f"{dist} is not installed: pip install 'mcpfast[sdk]' ({dist}{supported_range(dist)})") from None
    low, high = SUPPORTED[dist]
    if not low <= _release(installed)[:2] < high:
        raise UnsupportedApp(
            f"{dist} {installed} is not supported: mcpfast serves apps of {dist}{supported_range(dist)} (pip install 'mcpfast[sdk]')"
        )


def servable(obj: Any, *, inline_sync_tools: bool = False) -> Server:
    """``obj`` as an mcpfast ``Server``: itself, or a framework app adapted.

    Args:
        obj: an mcpfast ``Server``, an official-SDK ``MCPServer`` or a FastMCP ``FastMCP``.
        inline_sync_tools: (``MCPServer``) run its plain ``def`` tools on the event loop instead
            of in a worker thread, as mcpfast runs its own plain sync handlers: two to three
            times faster a call, for tools that never block (no I/O, no sleeps, no long
            computation: a blocking one stalls every other request meanwhile). Everything else
            of the call is the SDK's as usual. Off by default, as the SDK promises a sync tool
            its own thread.

    Raises:
        UnsupportedApp: ``obj`` is none of those, its framework's version is not supported, or
            it uses a feature the adapter does not carry.
    """
    if isinstance(obj, Server):
        return obj
    kind = _kind(obj)
    if kind == "mcp":
        check_version("mcp")
        from mcpfast.adapters import mcp_sdk

        return mcp_sdk.adapt(obj, inline_sync_tools=inline_sync_tools)
    if kind == "mcp1":
        raise UnsupportedApp(
            f"an mcp 1.x FastMCP app: mcpfast serves official-SDK apps of mcp{supported_range('mcp')} "
            "(MCPServer; the SDK's migration guide says how to move)"
        )
    if kind == "fastmcp":
        check_version("fastmcp")
        check_version("mcp")
        from mcpfast.adapters import fastmcp

        return fastmcp.adapt(obj)
    what = type(obj)
    raise UnsupportedApp(
        f"{what.__module__}.{what.__qualname__} is not a server mcpfast can serve: give an mcpfast Server, "
        "an official-SDK MCPServer (mcp 2.x) or a FastMCP 4 FastMCP"
    )


def load_server(spec: str, *, inline_sync_tools: bool = False) -> Server:
    """Import ``module:attribute`` (``load_app``) and return it as a ``Server`` (``servable``,
    with ``inline_sync_tools``).

    Raises:
        SystemExit: the object cannot be imported or served (the message says why).
    """
    try:
        return servable(load_app(spec), inline_sync_tools=inline_sync_tools)
    except UnsupportedApp as exc:
        raise SystemExit(f"mcpfast: {spec}: {exc}") from None
