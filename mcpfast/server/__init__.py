"""The MCP server: decorator API, Context, and the connection runner."""

from __future__ import annotations

from mcpfast.protocol.errors import McpError
from mcpfast.server.app import Server
from mcpfast.server.connection import Connection
from mcpfast.server.content import ToolResult, audio, embedded_resource, image, resource_link, text
from mcpfast.server.context import Context

__all__ = [
    "Connection",
    "Context",
    "McpError",
    "Server",
    "ToolResult",
    "audio",
    "embedded_resource",
    "image",
    "resource_link",
    "text",
]
