"""Failure categories of the MCP client (pure Python, no gevent).

Locust groups failures by ``repr(exception)``, so every message here is low-cardinality: it names
the category and at most a status, an error code or a method, never an id, a timestamp or a
payload, and a refusal its cause as the native engine names one: what the reply said, one line of
at most :data:`MAX_CAUSE` characters.  The details (the whole body, bytes seen) ride on attributes.
"""

from __future__ import annotations

import json

__all__ = [
    "MAX_CAUSE",
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

MAX_CAUSE = 60
"""Characters of a refusal's cause kept in its name (the native engine's bound): a long message
stays one row of a failures table."""


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
        # the reason names the cause when the reply's head says it (http 401 invalid_token, http
        # 429 rate limited (Retry-After 2 s)), else the body does: each cause its own entry of the
        # failures table
        head = "HTTP" + (reason[4:] if reason and reason.startswith("http") else f" {status}")
        said = _cause(_body_cause(body)) if head == f"HTTP {status}" else ""
        super().__init__(f"{head}: {said}" if said else head)
        self.status = status
        self.body = body
        self.retry_after = retry_after


class McpError(McpClientError):
    """A JSON-RPC error reply; ``code``/``message``/``data`` from the server."""

    category = "jsonrpc-error"

    def __init__(self, code: int | None, message: str = "", data: object = None, method: str | None = None) -> None:
        said = _cause(message)
        super().__init__(f"JSON-RPC error {code}" + (f" on {method}" if method else "") + (f": {said}" if said else ""))
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


def _cause(said: str) -> str:
    """What a reply said, as a refusal's name carries it: one line of at most :data:`MAX_CAUSE`
    printable characters; nothing for markup (an HTML error page says nothing short)."""
    said = "".join(c for c in " ".join(said.split()) if c.isprintable())[:MAX_CAUSE]
    return "" if said.startswith("<") else said


def _body_cause(body: bytes) -> str:
    text = body.strip()
    if text[:1] != b"{":
        lines = text.decode("utf-8", "replace").splitlines()
        return lines[0] if lines else ""
    try:
        data = json.loads(text)
    except ValueError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    found = [error.get("message") if isinstance(error, dict) else None, *(data.get(k) for k in ("message", "error", "detail"))]
    return next((f for f in found if isinstance(f, str)), "")
