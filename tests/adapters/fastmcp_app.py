"""A small FastMCP 4 app, served as it is by both servers in the tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ResourceError, ToolError
from fastmcp.tools.base import ToolResult
from mcp_types import TextContent
from pydantic import BaseModel

STATE: dict[str, Any] = {"entered": 0, "exited": 0}


@asynccontextmanager
async def lifespan(server: FastMCP) -> AsyncIterator[dict[str, Any]]:
    STATE["entered"] += 1
    try:
        yield {"greeting": "hello from the lifespan"}
    finally:
        STATE["exited"] += 1


mcp = FastMCP("fastmcp-sample", version="1.2.3", instructions="A sample FastMCP app.", lifespan=lifespan)


@dataclass
class Point:
    x: float
    y: float


class Booking(BaseModel):
    date: str
    seats: int = 1


@mcp.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@mcp.tool(output_schema=None)
def listing(n: int) -> list[str]:
    """A list without an output schema."""
    return [str(i) for i in range(n)]


@mcp.tool
def midpoint(a: Point, b: Point) -> Point:
    """Structured output from a dataclass."""
    return Point((a.x + b.x) / 2, (a.y + b.y) / 2)


@mcp.tool
async def fail(reason: str) -> str:
    """Always raises."""
    raise ValueError(reason)


@mcp.tool
async def slow_count(steps: int, ctx: Context) -> str:
    """Reports progress and logs."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    await ctx.info(f"counted to {steps}")
    await ctx.warning("careful", extra={"steps": steps})
    return f"done {steps}"


@mcp.tool
async def paced_count(steps: int, ctx: Context) -> str:
    """Reports progress as it works (a pause between steps, where slow_count reports all at once)."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await asyncio.sleep(0.02)  # the work of the step
    return f"done {steps}"


@mcp.tool
async def whoami(ctx: Context) -> dict[str, Any]:
    """Request and client info, and the lifespan's value."""
    params = ctx.session.client_params
    return {
        "request_id": ctx.request_id,
        "client": params.client_info.name if params is not None else None,
        "lifespan": ctx.lifespan_context["greeting"],
    }


@mcp.tool
async def read_config(ctx: Context) -> str:
    """Reads one of this server's resources through the context."""
    result = await ctx.read_resource("config://app")
    return str(result.contents[0].content)


@mcp.tool
async def book(ctx: Context) -> str:
    """Asks the user for booking details (elicitation)."""
    result = await ctx.elicit("When?", Booking)
    if result.action == "accept":
        return f"booked {result.data.seats} on {result.data.date}"
    return result.action


@mcp.tool
def refuse(what: str) -> str:
    """Raises a ToolError (an error result)."""
    raise ToolError(f"cannot do {what}")


@mcp.tool
def detailed() -> ToolResult:
    """A ToolResult with content, structured content and _meta of its own."""
    return ToolResult(content=[TextContent(type="text", text="see meta")], structured_content={"n": 1}, meta={"source": "test"})


@mcp.resource("items://{item_id}")
def item(item_id: str) -> str:
    if item_id == "missing":
        raise ResourceError(f"no item {item_id}")
    if item_id == "broken":
        raise RuntimeError("disk on fire")
    return f"item {item_id}"


@mcp.resource("config://app", mime_type="application/json", description="The configuration.")
def config() -> str:
    return '{"debug": false}'


@mcp.resource("users://{user_id}/profile", title="Profile")
def profile(user_id: str) -> str:
    """One user's profile."""
    return f"profile of {user_id}"


@mcp.prompt
def review(code: str, language: str = "python") -> str:
    """Review some code."""
    return f"Please review this {language} code:\n{code}"
