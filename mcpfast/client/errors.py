"""Failure categories of the MCP client (pure Python, no gevent).

Locust groups failures by ``repr(exception)``, so every message here is low-cardinality: it names
the category and at most a status, an error code or a method, never an id, a timestamp or a
payload.  The details (server message, bytes seen) ride on attributes.
"""

from __future__ import annotations

__all__ = [
    "BadSse",
    "ConnectionFailure",
    "HttpStatusError",
    "InvalidJson",
    "McpClientError",
    "McpError",
    "RequestTimeout",
    "ToolError",
    "UnexpectedReply",
    "WrongId",
]


class McpClientError(Exception):
    """Base of every failure the client reports."""

    category = "client"


class ConnectionFailure(McpClientError):
    """Could not connect, the connection broke, or the stdio process died."""

    category = "connection"

    def __init__(self, what: str = "connection failed", detail: str = "") -> None:
        super().__init__(what)
        self.detail = detail


class HttpStatusError(McpClientError):
    """An HTTP status the request does not allow (e.g. 400, 404, 500)."""

    category = "http-status"

    def __init__(self, status: int, body: bytes = b"", reason: str | None = None, retry_after: float | None = None) -> None:
        # the reason names the cause when the reply says it (http 401 invalid_token, http 429
        # rate limited (Retry-After 2 s)): each cause is its own entry of the failures table
        super().__init__("HTTP" + (reason[4:] if reason and reason.startswith("http") else f" {status}"))
        self.status = status
        self.body = body
        self.retry_after = retry_after


class McpError(McpClientError):
    """A JSON-RPC error reply; ``code``/``message``/``data`` from the server."""

    category = "jsonrpc-error"

    def __init__(self, code: int | None, message: str = "", data: object = None, method: str | None = None) -> None:
        super().__init__(f"JSON-RPC error {code}" + (f" on {method}" if method else ""))
        self.code = code
        self.message = message
        self.data = data
        self.method = method


class ToolError(McpClientError):
    """A ``tools/call`` result with ``isError: true`` (a tool execution error, not a protocol one)."""

    category = "tool-error"

    def __init__(self, tool: str | None = None) -> None:
        super().__init__("tool returned isError" + (f" ({tool})" if tool else ""))
        self.tool = tool


class WrongId(McpClientError):
    """A reply whose id matches no request in flight (or not the one expected)."""

    category = "wrong-id"

    def __init__(self, got: object = None, expected: object = None) -> None:
        super().__init__("reply id matches no request in flight")
        self.got = got
        self.expected = expected


class InvalidJson(McpClientError):
    """Bytes that are not JSON, or JSON that is not a JSON-RPC message."""

    category = "invalid-json"

    def __init__(self, what: str = "invalid JSON", detail: str = "") -> None:
        super().__init__(what)
        self.detail = detail


class BadSse(McpClientError):
    """A malformed event stream: wrong content type, oversized event, or it ended without the reply."""

    category = "bad-sse"

    def __init__(self, what: str = "bad SSE stream", detail: str = "") -> None:
        super().__init__(what)
        self.detail = detail


class UnexpectedReply(McpClientError):
    """A reply that is well-formed but not what the protocol allows here."""

    category = "unexpected-reply"

    def __init__(self, what: str = "unexpected reply", detail: str = "") -> None:
        super().__init__(what)
        self.detail = detail


class RequestTimeout(McpClientError):
    """No reply within the request timeout."""

    category = "timeout"

    def __init__(self, method: str | None = None) -> None:
        super().__init__("timeout" + (f" on {method}" if method else ""))
        self.method = method
