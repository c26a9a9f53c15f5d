"""The demo app of ``mcpfast serve`` (``mcpfast/server/demo.py``) on the official Python SDK.

    python peers/python_sdk/server.py --host 127.0.0.1 --port 8001        # Streamable HTTP at /mcp
    python peers/python_sdk/server.py --host 127.0.0.1 --port 8001 --json-response
    python peers/python_sdk/server.py --transport stdio

Same tools with the same argument names, schemas and results: ``echo(text)``, ``add(a, b)``
(structured ``{"sum": ...}``), ``stream(n=3, delay=0.0)`` (one ``notifications/progress`` per step,
``"step i of n"``, when the call carries a progress token; then ``"streamed n steps"``), the
``demo://readme`` resource, the ``demo://greeting/{name}`` template and the ``summarise`` prompt.

Built on the SDK's high-level ``MCPServer`` (what the SDK's documentation recommends) with its own
Streamable HTTP app (stateful sessions) served by uvicorn, as ``MCPServer.run`` does.  The SDK
answers every POST in one mode: SSE (its default, the only mode that carries the ``stream`` tool's
progress notifications) or, with ``--json-response``, JSON (notifications scoped to a request are
then dropped).  ``--max-sessions`` lifts the SDK's default cap of 10,000 open sessions, since the
session churn benchmark abandons sessions on purpose.
"""

from __future__ import annotations

import argparse
import logging
from typing import Annotated, TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

app = MCPServer("python-sdk-demo", title="mcpfast demo app on the official Python SDK",
                instructions="A small demo: echo, add, stream.", log_level="WARNING")

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True)


class Sum(TypedDict):
    sum: float


@app.tool(annotations=READ_ONLY, structured_output=False)
def echo(text: Annotated[str, Field(description="Text to return")]) -> str:
    """Return the text unchanged."""
    return text


@app.tool(title="Add two numbers", annotations=READ_ONLY, structured_output=True)
def add(a: float, b: float) -> Sum:
    """Add two numbers; the sum is returned as structured content."""
    return {"sum": a + b}


@app.tool(structured_output=False)
async def stream(ctx: Context, n: Annotated[int, Field(description="How many progress steps")] = 3,
                 delay: float = 0.0) -> str:
    """Send n progress notifications (when asked for progress), then a result."""
    import anyio

    for i in range(1, n + 1):
        if delay:
            await anyio.sleep(delay)
        await ctx.report_progress(i, n, f"step {i} of {n}")
    return f"streamed {n} steps"


@app.resource("demo://readme", name="readme", title="About this server", mime_type="text/markdown")
def readme() -> str:
    """What the demo server offers."""
    return "# mcpfast demo\n\nTools: echo, add, stream.\n"


@app.resource("demo://greeting/{name}", name="greeting", mime_type="text/plain")
def greeting(name: str) -> str:
    """A greeting for anyone."""
    return f"Hello, {name}!"


@app.prompt(title="Summarise")
def summarise(text: Annotated[str, Field(description="The text to summarise")],
              style: Annotated[str, Field(description="brief or detailed")] = "brief") -> str:
    """Ask for a summary of a text."""
    return f"Summarise this text ({style}):\n\n{text}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=("http", "stdio"), default="http")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--json-response", action="store_true",
                        help="answer every POST as JSON (drops the stream tool's progress notifications)")
    parser.add_argument("--max-sessions", type=int, default=1_000_000, help="open stateful sessions allowed")
    args = parser.parse_args(argv)
    if args.transport == "stdio":
        app.run("stdio")
        return
    import uvicorn

    starlette_app = app.streamable_http_app(json_response=args.json_response, stateless_http=False,
                                            max_sessions=args.max_sessions, host=args.host)
    logging.getLogger("mcp").setLevel(logging.WARNING)
    uvicorn.run(starlette_app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
