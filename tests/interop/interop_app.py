"""A small app for the interop tests: paginated lists, a roots tool, a slow tool, a template."""

from __future__ import annotations

import asyncio
from typing import Any

from mcpfast import Context, Server

app = Server("interop", page_size=2)


@app.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@app.tool()
def add(a: float, b: float) -> float:
    """Add two numbers (structured output)."""
    return a + b


@app.tool()
def touch(uri: str) -> int:
    """Announce that a resource changed; returns how many sessions were told."""
    return app.notify_resource_updated(uri)


@app.tool()
def t3() -> str:
    """Filler for pagination."""
    return "3"


@app.tool()
def t4() -> str:
    """Filler for pagination."""
    return "4"


@app.tool()
def t5() -> str:
    """Filler for pagination."""
    return "5"


@app.tool()
async def roots(ctx: Context) -> list[str]:
    """The client's root URIs."""
    return [r["uri"] for r in await ctx.list_roots()]


@app.on_roots_changed()
async def roots_changed(conn: Any) -> None:
    """Fetch the new roots and report them as a log message (what the interop test watches)."""
    roots = await conn.list_roots()
    conn.session.log("info", {"rootsChanged": [r["uri"] for r in roots]}, "roots")


@app.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Sleep, logging when cancelled."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        ctx.info("slow was cancelled")
        raise
    return "done"


@app.tool()
async def ask(ctx: Context) -> dict[str, Any]:
    """Sample, then elicit, then list roots: every server-to-client request in one call."""
    sampled = await ctx.sample("hello", max_tokens=5)
    elicited = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    roots_ = await ctx.list_roots()
    return {"sampled": sampled["content"]["text"], "elicited": elicited, "roots": len(roots_)}


@app.tool()
async def login(ctx: Context) -> str:
    """URL-mode elicitation; the out-of-band interaction 'completes' right after the answer."""
    answer = await ctx.elicit_url("Sign in", "https://example.com/login", elicitation_id="login-1")
    app.notify_elicitation_complete("login-1")
    return answer["action"]


@app.tool()
def pay(ctx: Context) -> str:
    """Always needs a URL elicitation first (-32042)."""
    ctx.url_elicitation_required("Pay first", "https://example.com/pay", elicitation_id="pay-1")


for _i in range(3):

    @app.resource(f"mem://r{_i}", name=f"r{_i}", mime_type="text/plain")
    def _res(i: int = _i) -> str:
        return f"resource {i}"


@app.resource("mem://items/{id}", name="item")
def item(id: str) -> str:
    return f"item {id}"


@app.prompt()
def p1(topic: str) -> str:
    """First prompt."""
    return f"Talk about {topic}"


@app.prompt()
def p2() -> str:
    """Second prompt."""
    return "hi"


@app.prompt()
def p3() -> str:
    """Third prompt."""
    return "hi"


@app.completion()
def complete(ref: dict[str, Any], argument: dict[str, Any], context: dict[str, Any] | None) -> list[str]:
    return [f"{argument['value']}{i}" for i in range(150)]
