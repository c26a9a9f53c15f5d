"""The demo app ``mcpfast serve`` runs without ``--app``: a few small tools, a resource, a prompt."""

from __future__ import annotations

from typing import Annotated, TypedDict

from mcpfast.server.app import Server
from mcpfast.server.context import Context

__all__ = ["app"]

app = Server("mcpfast-demo", title="mcpfast demo server", instructions="A small demo: echo, add, stream.")


class Sum(TypedDict):
    sum: float


@app.tool(annotations={"readOnlyHint": True, "idempotentHint": True})
def echo(text: Annotated[str, "Text to return"]) -> str:
    """Return the text unchanged."""
    return text


@app.tool(title="Add two numbers", annotations={"readOnlyHint": True, "idempotentHint": True})
def add(a: float, b: float) -> Sum:
    """Add two numbers; the sum is returned as structured content."""
    return {"sum": a + b}


@app.tool()
async def stream(n: Annotated[int, "How many progress steps"] = 3, delay: float = 0.0, ctx: Context = None) -> str:  # type: ignore[assignment]  # the server passes the Context
    """Send n progress notifications (when asked for progress), then a result."""
    for i in range(1, n + 1):
        if delay:
            await ctx.sleep(delay)
        ctx.report_progress(i, n, f"step {i} of {n}")
    return f"streamed {n} steps"


@app.resource("demo://readme", name="readme", title="About this server", mime_type="text/markdown")
def readme() -> str:
    """What the demo server offers."""
    return "# mcpfast demo\n\nTools: echo, add, stream.\n"


@app.resource("demo://greeting/{name}", name="greeting", mime_type="text/plain")
def greeting(name: str) -> str:
    """A greeting for anyone."""
    return f"Hello, {name}!"


@app.prompt(title="Summarise", arguments={"text": "The text to summarise", "style": "brief or detailed"})
def summarise(text: str, style: str = "brief") -> str:
    """Ask for a summary of a text."""
    return f"Summarise this text ({style}):\n\n{text}"


@app.completion()
def complete(ref: dict, argument: dict, context: dict | None) -> list[str]:
    if ref.get("type") == "ref/prompt" and argument["name"] == "style":
        return [s for s in ("brief", "detailed") if s.startswith(argument["value"])]
    return []
