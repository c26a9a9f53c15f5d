"""An MCP server built on the official Python SDK (``mcp`` 2.x, ``MCPServer``), for the swarm tests.

    python _sdk_server.py stdio
    python _sdk_server.py http PORTFILE [--json] [--stateless] [--lifetime S]

Tools: ``echo(text)``, ``add(a, b)``, ``stream(n)`` (``n`` progress notifications, then a
result); a resource ``mem://hello``, a prompt ``greet(name)``.  HTTP binds 127.0.0.1 on a free port
written to PORTFILE, and the server exits by itself after ``--lifetime`` seconds.
"""

from __future__ import annotations

import argparse
import socket
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sdk-test-server")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def stream(ctx: Context, n: int = 10) -> str:
    """Send ``n`` progress notifications, then return."""
    for i in range(n):
        await ctx.report_progress(i + 1, n)
    return f"streamed {n}"


@server.resource("mem://hello")
def hello() -> str:
    return "hello"


@server.completion()
async def complete(ref, argument, context):  # SDK callback signature
    from mcp_types import Completion

    return Completion(values=[argument.value + "-1", argument.value + "-2"], hasMore=False)


@server.prompt()
def greet(name: str = "world") -> str:
    return f"Hello {name}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("transport", choices=["stdio", "http"])
    p.add_argument("portfile", nargs="?")
    p.add_argument("--json", action="store_true", help="JSON replies instead of SSE")
    p.add_argument("--stateless", action="store_true")
    p.add_argument("--lifetime", type=float, default=120.0)
    args = p.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
        return
    import os
    import threading

    import uvicorn

    app = server.streamable_http_app(json_response=args.json, stateless_http=args.stateless)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)

    def announce() -> None:
        import time

        while not userver.started:
            time.sleep(0.02)
        with open(args.portfile + ".tmp", "w") as fh:
            fh.write(str(port))
        os.replace(args.portfile + ".tmp", args.portfile)

    threading.Thread(target=announce, daemon=True).start()
    threading.Timer(args.lifetime, lambda: setattr(userver, "should_exit", True)).start()
    userver.run(sockets=[sock])
    sys.exit(0)


if __name__ == "__main__":
    main()
