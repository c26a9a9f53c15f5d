"""FastMCP 4 apps whose tools/call cases each decide something on the way to a tool and back:
versions, per-session and server-wide visibility, auth checks, injected tools, middleware on
tools/call, error masking, upstream errors, timeouts, a plain ``def`` taking the ``Context``, a
generator. Served as they are by FastMCP's own server and by mcpfast in the tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx2
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.server.middleware.tool_injection import ToolInjectionMiddleware
from fastmcp.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from pydantic import BaseModel

UPSTREAM = httpx2.Request("GET", "http://upstream.invalid/items")


class _Strict(BaseModel):
    n: int


def plain() -> FastMCP[Any]:
    """No middleware of its own, nothing disabled server-wide."""
    app = FastMCP("fastmcp-edges")

    @app.tool(name="versioned", version="1")
    def versioned_one(x: int) -> str:
        return f"v1 got {x}"

    @app.tool(name="versioned", version="2")
    def versioned_two(x: int) -> str:
        return f"v2 got {x}"

    @app.tool
    def who(ctx: Context) -> str:
        """A plain def taking the framework's Context (it runs in a worker thread)."""
        return f"request {ctx.request_id} of {ctx.fastmcp.name}"

    @app.tool
    def count_up(n: int) -> Iterator[int]:
        """A generator: its items are the result."""
        yield from range(n)

    @app.tool(timeout=5.0)
    def doubled(x: int) -> int:
        return 2 * x

    @app.tool
    def body_invalid() -> str:
        """A pydantic error raised by the body, not by the arguments."""
        _Strict.model_validate({"n": "not a number"})
        return "unreachable"

    @app.tool
    def rate_limited() -> str:
        raise httpx2.HTTPStatusError("429 from upstream", request=UPSTREAM, response=httpx2.Response(429, request=UPSTREAM))

    @app.tool
    def upstream_slow() -> str:
        raise httpx2.ReadTimeout("upstream took too long", request=UPSTREAM)

    @app.tool
    def upstream_error() -> str:
        raise MCPError(code=-32000, message="the upstream said no")

    @app.tool
    def needs_roots() -> str:
        raise MCPError(code=MISSING_REQUIRED_CLIENT_CAPABILITY, message="roots capability required")

    @app.tool
    def crash(reason: str) -> str:
        raise RuntimeError(reason)

    @app.tool
    def refused(what: str) -> str:
        raise ToolError(f"will not {what}")

    @app.tool(auth=lambda _ctx: False)
    def forbidden() -> str:
        return "never seen"

    @app.tool
    def pid() -> int:
        """The serving process (which worker answered)."""
        return os.getpid()

    @app.tool
    def secret() -> str:
        return "the secret"

    @app.prompt
    def greet(name: str, style: str = "plain") -> str:
        return f"Greet {name}, {style}."

    @app.completion
    def complete(ref: Any, argument: Any, context: Any) -> list[str] | None:
        if getattr(ref, "name", None) == "greet" and argument.name == "style":
            return [style for style in ("plain", "formal", "pirate") if style.startswith(argument.value)]
        return None

    @app.tool
    async def hide_secret(ctx: Context) -> str:
        await ctx.disable_components(names={"secret"})
        return "secret hidden for this session"

    return app


def masked() -> FastMCP[Any]:
    """Errors masked, and one tool disabled server-wide (a server transform)."""
    app = FastMCP("fastmcp-masked", mask_error_details=True)

    @app.tool
    def crash_masked(reason: str) -> str:
        raise RuntimeError(reason)

    @app.tool
    def shown(x: int) -> int:
        return x + 1

    @app.tool
    def switched_off() -> str:
        return "never seen"

    app.disable(names={"switched_off"})

    return app


class Tagging(Middleware):
    """Middleware on tools/call: what it does to a result must reach the client."""

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        result = await call_next(context)
        result.meta = {**(result.meta or {}), "tagged": True}
        return result


def _injected(x: int) -> str:
    return f"injected got {x}"


def composed() -> FastMCP[Any]:
    """An injected tool beside one of its own."""
    app = FastMCP("fastmcp-composed", middleware=[ToolInjectionMiddleware([Tool.from_function(_injected, name="injected")])])

    @app.tool
    def native(x: int) -> str:
        return f"native got {x}"

    return app


served = plain()
"""The app the tests over stdio and HTTP serve (``fastmcp_edges:served``), on both servers."""
