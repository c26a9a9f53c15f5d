"""The swarm's MCP client.

* :mod:`mcpfast.client.session` - sans-IO :class:`ClientSession` (both eras, no I/O, no gevent).
* :mod:`mcpfast.client.errors` - failure categories (low-cardinality messages for Locust).
* :mod:`mcpfast.client.validate` - sampled MCP JSON Schema checks of the replies.
* :mod:`mcpfast.client.stdio` - gevent adapter over a server subprocess (imports gevent).
* :mod:`mcpfast.client.http` - gevent adapter over geventhttpclient (imports gevent).

This ``__init__`` imports only the pure modules, so it is safe without gevent.
"""

from mcpfast.client.errors import (
    BadSse,
    ConnectionFailure,
    HttpStatusError,
    InvalidJson,
    McpClientError,
    McpError,
    RequestTimeout,
    ToolError,
    UnexpectedReply,
    WrongId,
)
from mcpfast.client.session import AUTO, CallResult, ClientSession, Event, Pending, ProgressUpdate

__all__ = [
    "AUTO",
    "BadSse",
    "CallResult",
    "ClientSession",
    "ConnectionFailure",
    "Event",
    "HttpStatusError",
    "InvalidJson",
    "McpClientError",
    "McpError",
    "Pending",
    "ProgressUpdate",
    "RequestTimeout",
    "ToolError",
    "UnexpectedReply",
    "WrongId",
]
