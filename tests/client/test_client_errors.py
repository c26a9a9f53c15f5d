"""A refusal is named by its cause, as the native engine names one: Locust's failures table then
has one row per cause, not one per status."""

from __future__ import annotations

from mcpfast.client.errors import MAX_CAUSE, HttpStatusError, McpError, ToolError


def test_a_refusal_is_named_by_what_its_reply_says() -> None:
    assert str(McpError(-32602, "unknown tool: echo", method="tools/call")) == "JSON-RPC error -32602 on tools/call: unknown tool: echo"
    assert str(McpError(-32601, method="nope")) == "JSON-RPC error -32601 on nope"
    body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"too   many\\ntasks"}}'
    assert str(HttpStatusError(400, body, "http 400")) == "HTTP 400: too many tasks"
    assert str(HttpStatusError(503, b'{"detail": "Service Unavailable"}', "http 503")) == "HTTP 503: Service Unavailable"
    assert str(HttpStatusError(503, b"overloaded\r\nretry later", "http 503")) == "HTTP 503: overloaded"
    assert str(HttpStatusError(502, b"<html><body>bad gateway</body></html>", "http 502")) == "HTTP 502"  # no markup
    assert str(HttpStatusError(400, b"{}", "http 400")) == "HTTP 400"
    assert str(HttpStatusError(404)) == "HTTP 404"
    # a head that names the cause itself keeps it, the body is not read for another
    assert str(HttpStatusError(401, b'{"error": "x"}', "http 401 invalid_token")) == "HTTP 401 invalid_token"
    long = McpError(-32000, "x" * 500, method="tools/call")
    assert str(long) == "JSON-RPC error -32000 on tools/call: " + "x" * MAX_CAUSE  # one row per cause, however long
    assert long.message == "x" * 500  # the whole message stays on the error
    assert str(ToolError("echo")) == "tool returned isError (echo)"
