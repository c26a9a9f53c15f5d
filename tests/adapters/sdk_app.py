"""A small official-SDK (``mcp.server.mcpserver.MCPServer``) app, served as it is by both servers in the tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.exceptions import MCPError
from mcp_types import Completion, PromptReference, ResourceTemplateReference, SamplingMessage, TextContent
from pydantic import BaseModel, Field

STATE: dict[str, Any] = {"entered": 0, "exited": 0}


@asynccontextmanager
async def lifespan(server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
    STATE["entered"] += 1
    try:
        yield {"greeting": "hello from the lifespan"}
    finally:
        STATE["exited"] += 1


mcp = MCPServer("sdk-sample", instructions="A sample app.", lifespan=lifespan)


class Weather(BaseModel):
    city: str
    celsius: float = Field(description="temperature")
    windy: bool


class Booking(BaseModel):
    date: str
    seats: int = 1


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def shout(text: str) -> str:
    """Upper-case a text (plain string result)."""
    return text.upper()


@mcp.tool(structured_output=False)
def unstructured(n: int) -> list[str]:
    """A list without an output schema."""
    return [str(i) for i in range(n)]


@mcp.tool()
def weather(city: str) -> Weather:
    """Structured output from a model."""
    return Weather(city=city, celsius=21.5, windy=city.startswith("W"))


@mcp.tool()
async def fail(reason: str) -> str:
    """Always raises."""
    raise ValueError(reason)


@mcp.tool()
async def slow_count(steps: int, ctx: Context) -> str:
    """Reports progress and logs."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    await ctx.info(f"counted to {steps}")
    await ctx.debug({"steps": steps})
    return f"done {steps}"


@mcp.tool()
async def paced_count(steps: int, ctx: Context) -> str:
    """Reports progress as it works (a pause between steps, where slow_count reports all at once)."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await asyncio.sleep(0.02)  # the work of the step
    return f"done {steps}"


@mcp.tool()
async def whoami(ctx: Context) -> dict[str, Any]:
    """Request and client info, and the lifespan's value."""
    params = ctx.session.client_params
    return {
        "request_id": ctx.request_id,
        "client": params.client_info.name if params is not None else None,
        "lifespan": ctx.request_context.lifespan_context["greeting"],
        "has_sampling": ctx.client_capabilities is not None and ctx.client_capabilities.sampling is not None,
    }


@mcp.tool()
async def read_config(ctx: Context) -> str:
    """Reads one of this server's resources through the context."""
    contents = list(await ctx.read_resource("config://app"))
    return str(contents[0].content)


@mcp.tool()
async def book(ctx: Context) -> str:
    """Asks the user for booking details (elicitation)."""
    result = await ctx.elicit("When?", Booking)
    if result.action == "accept":
        return f"booked {result.data.seats} on {result.data.date}"
    return result.action


@mcp.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Asks the client's model (sampling), then for its roots."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))
    sampled = await ctx.session.create_message(messages=[message], max_tokens=20, related_request_id=ctx.request_id)
    roots = await ctx.session.list_roots()
    content = sampled.content
    said = content.text if isinstance(content, TextContent) else "?"
    return f"{said} ({sampled.model}; roots: {', '.join(str(root.uri) for root in roots.roots)})"


@mcp.tool()
def refuse(what: str) -> str:
    """Raises the errors a tool means: a ToolError (an error result) or an MCPError (a JSON-RPC error)."""
    if what == "protocol":
        raise MCPError(code=-32042, message="needs a URL elicitation", data={"why": "test"})
    raise ToolError(f"cannot do {what}")


@mcp.tool()
def pixel() -> Image:
    """An image result."""
    return Image(data=b"\x89PNG fake", format="png")


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


@mcp.resource("data://bytes")
def raw_bytes() -> bytes:
    return b"\x00\x01binary"


@mcp.resource("users://{user_id}/profile", title="Profile")
def profile(user_id: str) -> str:
    """One user's profile."""
    return f"profile of {user_id}"


@mcp.prompt()
def review(code: str, language: str = "python") -> str:
    """Review some code."""
    return f"Please review this {language} code:\n{code}"


@mcp.prompt(title="Dialogue")
def dialogue(topic: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"Tell me about {topic}"},
        {"role": "assistant", "content": "Sure."},
    ]


@mcp.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
    if isinstance(ref, PromptReference) and argument.name == "language":
        values = [v for v in ("python", "perl", "rust") if v.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)
    if isinstance(ref, ResourceTemplateReference) and argument.name == "user_id":
        return Completion(values=["alice", "bob"])
    return None
