"""JSON or SSE per request (Streamable HTTP: the server chooses): with ``json_response=False``
handlers' answers stream as SSE, while the answers the engine makes itself (parse and protocol
errors, ``ping``, ``logging/setLevel``...) are one JSON body, like any answer that came alone."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import pytest

from mcpfast import Server
from mcpfast.transports.http import HttpTransport, asgi_app

pytestmark = [pytest.mark.timeout(30)]

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
M2026 = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": M2026, "io.modelcontextprotocol/clientCapabilities": {}}

app = Server("json-choice", logging=True)


@app.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=[True, False], ids=["json", "sse"])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[HttpTransport]:
    t = asgi_app(app, json_response=request.param)
    yield t
    await t.aclose()


async def session_headers(client: httpx.AsyncClient) -> dict[str, str]:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    r = await client.post("/mcp", json=init, headers=HEADERS)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    h = {**HEADERS, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    r = await client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h)
    assert r.status_code == 202
    return h


def messages(r: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a JSON or SSE response body."""
    if r.headers["content-type"].startswith("application/json"):
        return [r.json()]
    return [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]


ENGINE_ANSWERS = [
    pytest.param(b'{"jsonrpc":"2.0","id":5,"method":"nope/x"}', 200, -32601, id="unknown-method"),
    pytest.param(b'{"jsonrpc":"2.0","id":6,"method":"logging/setLevel","params":{"level":"loud"}}', 200, -32602, id="bad-level"),
    pytest.param(b'{"jsonrpc":"2.0","id":7,', 400, -32700, id="parse-error"),
    pytest.param(b'{"jsonrpc":"2.0","id":8,"method":"ping"}', 200, None, id="ping"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("body", "status", "code"), ENGINE_ANSWERS)
async def test_engine_answers_are_json_whatever_the_setting(client: httpx.AsyncClient, body: bytes, status: int, code: int | None) -> None:
    h = await session_headers(client)
    r = await client.post("/mcp", content=body, headers=h)
    assert r.status_code == status and r.headers["content-type"] == "application/json", r.text
    reply = r.json()
    assert (reply["error"]["code"] if code is not None else "result" in reply) == (code if code is not None else True)


@pytest.mark.anyio
async def test_handler_answers_follow_the_setting(client: httpx.AsyncClient, transport: HttpTransport) -> None:
    h = await session_headers(client)
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}
    r = await client.post("/mcp", json=call, headers=h)
    assert r.status_code == 200
    expected = "application/json" if transport.json_response else "text/event-stream"
    assert r.headers["content-type"] == expected
    (reply,) = [m for m in messages(r) if m.get("id") == 9]
    assert reply["result"]["content"] == [{"type": "text", "text": "hi"}]


@pytest.mark.anyio
async def test_stateless_engine_answer_is_json_and_handler_answer_follows_the_setting(
    client: httpx.AsyncClient, transport: HttpTransport
) -> None:
    h = {**HEADERS, "MCP-Protocol-Version": M2026}
    unknown = {"jsonrpc": "2.0", "id": 10, "method": "nope/x", "params": {"_meta": META}}
    r = await client.post("/mcp", json=unknown, headers={**h, "Mcp-Method": "nope/x"})
    assert r.headers["content-type"] == "application/json" and r.json()["error"]["code"] == -32601
    call = {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": META}}
    r = await client.post("/mcp", json=call, headers={**h, "Mcp-Method": "tools/call", "Mcp-Name": "echo"})
    assert r.status_code == 200
    assert r.headers["content-type"] == ("application/json" if transport.json_response else "text/event-stream")
    (reply,) = [m for m in messages(r) if m.get("id") == 11]
    assert reply["result"]["content"] == [{"type": "text", "text": "x"}]
