"""The app of ``benchmarks.sdk_apps``: one MCP server written against each framework, unchanged.

``mcp`` is an official-SDK ``MCPServer`` (mcp 2.x); ``fastmcp_app`` a ``fastmcp.FastMCP``
(``None`` when fastmcp is not installed). Each has the tool the generator calls, ``echo``, and a
structured one, ``add``. ``python -m benchmarks.sdk_app --framework mcp|fastmcp --port P``
serves one on its own framework over Streamable HTTP (uvicorn, the framework's own app): the
side mcpfast is compared with, which serves the same object with
``mcpfast serve --transport http --app benchmarks.sdk_app:mcp``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

__all__ = ["fastmcp_app", "main", "mcp"]

mcp = MCPServer("bench-sdk-app")


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers (structured output)."""
    return {"sum": a + b}


def _fastmcp() -> Any:
    try:
        from fastmcp import FastMCP  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    app = FastMCP("bench-fastmcp-app")

    @app.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @app.tool()
    def add(a: int, b: int) -> dict[str, int]:
        """Add two integers (structured output)."""
        return {"sum": a + b}

    return app


fastmcp_app = _fastmcp()


def own_asgi(framework: str) -> Any:
    """The framework's own Streamable HTTP ASGI app for its object (default settings, as deployed)."""
    if framework == "mcp":
        return mcp.streamable_http_app()
    if fastmcp_app is None:
        raise SystemExit("fastmcp is not installed (pip install 'mcpfast[sdk]')")
    return fastmcp_app.http_app(path="/mcp")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sdk_app", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--framework", choices=("mcp", "fastmcp"), required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    opts = parser.parse_args(argv)
    import logging

    import uvicorn

    # Warnings only, as mcpfast serve logs: the SDK logs each new session at INFO by default.
    logging.getLogger().setLevel(logging.WARNING)
    for name in ("mcp", "fastmcp"):
        logging.getLogger(name).setLevel(logging.WARNING)

    uvicorn.run(
        own_asgi(opts.framework), host=opts.host, port=opts.port, log_level="warning", loop="uvloop", http="httptools", lifespan="on"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
