"""2026-07-28 ``tools/call`` of a plain sync tool, answered without a connection and a session
machine of its own: every reply equals the full path's (status, headers, bytes), and only the
requests the machine would admit as they are take the short way. (An async tool is not plain:
``run_plain_tool`` leaves it, as ``test_http_lane`` shows; here every request is answered at once.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from mcpfast import Context, McpError, Server
from mcpfast.transports.http import HttpTransport, asgi_app

M2026 = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": M2026, "io.modelcontextprotocol/clientCapabilities": {}}

app = Server("stateless-plain", version="3.1", logging=True)


@app.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@app.tool()
def several(n: int):  # type: ignore[no-untyped-def]  # no return annotation: no output schema, a plain tool
    """n text blocks."""
    return [str(i) for i in range(n)]


@app.tool()
def listing(n: int) -> list[str]:
    """Not plain: an output schema (the list, structured)."""
    return [str(i) for i in range(n)]


@app.tool()
def boom() -> str:
    """A tool that fails: a tool error result."""
    raise ValueError("it broke")


@app.tool()
def refuse() -> str:
    """A tool that refuses with a JSON-RPC error."""
    raise McpError(-32602, "not today", {"why": "closed"})


@app.tool()
def unencodable() -> dict[str, Any]:
    """A result JSON cannot hold: -32603."""
    return {"content": [{"type": "text", "text": "x"}], "extra": object()}


@app.tool()
def with_context(text: str, ctx: Context) -> str:
    """Not plain: a Context parameter."""
    return text


def _call(rid: int, name: str, arguments: Any = None, meta: dict[str, Any] | None = None) -> tuple[dict[bytes, bytes], bytes]:
    params: dict[str, Any] = {"name": name, "_meta": META if meta is None else meta}
    if arguments is not None:
        params["arguments"] = arguments
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()
    version = (meta or META).get("io.modelcontextprotocol/protocolVersion", M2026)
    headers = {
        b"host": b"127.0.0.1",
        b"accept": b"application/json, text/event-stream",
        b"content-type": b"application/json",
        b"mcp-protocol-version": str(version).encode(),
        b"mcp-method": b"tools/call",
        b"mcp-name": name.encode(),
    }
    return headers, body


# (request, whether the short way answers it)
CASES: list[tuple[str, tuple[dict[bytes, bytes], bytes], bool]] = [
    ("echo", _call(1, "echo", {"text": "hello"}), True),
    ("no arguments given", _call(2, "boom"), True),
    ("several blocks", _call(3, "several", {"n": 3}), True),
    ("a tool error", _call(4, "boom", {}), True),
    ("a JSON-RPC error from the tool", _call(5, "refuse", {}), True),
    ("a result JSON cannot hold", _call(6, "unencodable", {}), True),
    ("arguments of the wrong type", _call(7, "echo", {"text": 5}), True),
    ("a missing argument", _call(8, "echo", {}), True),
    ("an argument the function does not take", _call(9, "echo", {"text": "a", "other": 1}), False),
    ("arguments that are not an object", _call(10, "echo", [1]), False),
    ("an unknown tool", _call(11, "nope", {}), False),
    ("a Context tool", _call(12, "with_context", {"text": "a"}), False),
    ("a tool with an output schema", _call(13, "listing", {"n": 2}), False),
    ("a log level", _call(14, "echo", {"text": "a"}, {**META, "io.modelcontextprotocol/logLevel": "debug"}), False),
    ("a bad log level", _call(15, "echo", {"text": "a"}, {**META, "io.modelcontextprotocol/logLevel": "loud"}), False),
    ("no client capabilities", _call(16, "echo", {"text": "a"}, {"io.modelcontextprotocol/protocolVersion": M2026}), False),
    ("capabilities not an object", _call(17, "echo", {"text": "a"}, {**META, "io.modelcontextprotocol/clientCapabilities": []}), False),
]


@pytest.fixture
def transports() -> Iterator[tuple[HttpTransport, HttpTransport, list[bool]]]:
    short, full = asgi_app(app), asgi_app(app)
    answered: list[bool] = []
    plain = short._plain_stateless_call

    def spy(decoded: Any, meta: dict[str, Any]) -> Any:
        reply = plain(decoded, meta)
        answered.append(reply is not None)
        return reply

    short._plain_stateless_call = spy  # type: ignore[method-assign]
    full._plain_stateless_call = lambda decoded, meta: None  # type: ignore[method-assign]
    yield short, full, answered


@pytest.mark.parametrize(("what", "request_", "short_way"), CASES, ids=[c[0] for c in CASES])
def test_every_reply_equals_the_full_paths(
    transports: tuple[HttpTransport, HttpTransport, list[bool]], what: str, request_: tuple[dict[bytes, bytes], bytes], short_way: bool
) -> None:
    short, full, answered = transports
    headers, body = request_
    got = short.handle("POST", "/mcp", b"", headers, body)
    want = full.handle("POST", "/mcp", b"", headers, body)
    assert isinstance(got, tuple) and isinstance(want, tuple), what  # answered at once, both
    assert (got[0], list(got[1]), got[2]) == (want[0], list(want[1]), want[2])
    assert answered == [short_way]
    if short_way:
        reply = json.loads(got[2])
        if "result" in reply:  # shaped by the machine's 2026 rule
            assert reply["result"]["resultType"] == "complete"
            assert reply["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["version"] == "3.1"


def test_the_short_way_follows_a_changed_server() -> None:
    own = Server("changing", version="1")

    @own.tool()
    def echo(text: str) -> str:
        return text

    transport = asgi_app(own)
    headers, body = _call(1, "echo", {"text": "x"})
    first = json.loads(transport.handle("POST", "/mcp", b"", headers, body)[2])  # type: ignore[index]
    own.version = "2"
    second = json.loads(transport.handle("POST", "/mcp", b"", headers, body)[2])  # type: ignore[index]
    server_info = "io.modelcontextprotocol/serverInfo"
    assert (first["result"]["_meta"][server_info]["version"], second["result"]["_meta"][server_info]["version"]) == ("1", "2")


def test_json_response_off_leaves_every_call_to_the_full_path() -> None:
    transport = asgi_app(app, json_response=False)
    headers, body = _call(1, "echo", {"text": "x"})
    assert not isinstance(transport.handle("POST", "/mcp", b"", headers, body), tuple)  # an SSE stream
