"""A handler result JSON cannot hold is answered -32603 with the request's id, on every transport.

Regression tests: a content block whose ``_meta`` held an ``object()`` or
an integer beyond 64 bits got no reply over stdio (the stream went on, the client waited
forever), HTTP 500 with ``"id": null`` from a sync tool over HTTP, and no answer at all from an
async tool. The engine dropped the request from its in-flight table before encoding.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx2 as httpx
import orjson
import pytest

from mcpfast import Context, Server
from mcpfast.sansio import ServerSession
from mcpfast.transports.http import asgi_app
from mcpfast.transports.http_testing import serve_in_thread
from mcpfast.transports.stdio import serve_stdio

pytestmark = [pytest.mark.timeout(30)]

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
BAD_META: list[Any] = [object(), 2**70]

app = Server("unencodable")


@app.tool()
def sync_bad(which: int) -> dict[str, Any]:
    """A content block whose _meta JSON cannot hold."""
    return {"type": "text", "text": "x", "_meta": {"bad": BAD_META[which]}}


@app.tool()
async def async_bad(which: int, ctx: Context) -> dict[str, Any]:
    """The same, from a coroutine that reports progress first (so HTTP answers over SSE)."""
    ctx.report_progress(1, 2)
    await asyncio.sleep(0.01)
    return {"type": "text", "text": "x", "_meta": {"bad": BAD_META[which]}}


@app.tool()
def fine() -> str:
    """The session goes on."""
    return "fine"


def call(rid: int, name: str, which: int = 0, token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {"which": which} if name != "fine" else {}}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def assert_internal_error(message: dict[str, Any], rid: int) -> None:
    assert message["id"] == rid, message
    assert message["error"]["code"] == -32603, message
    assert "cannot be encoded" in message["error"]["message"]


def test_engine_keeps_the_request_in_flight_until_its_reply_is_encoded(caplog: pytest.LogCaptureFixture) -> None:
    session = ServerSession({"name": "t", "version": "1"}, {"tools": {}})
    session.receive(orjson.dumps(INIT))
    session.receive(orjson.dumps(INITIALIZED))
    session.data_to_send()
    session.receive(orjson.dumps(call(5, "sync_bad")))
    assert session.in_flight() == [5]
    with caplog.at_level(logging.ERROR, logger="mcpfast.sansio"):
        assert session.respond(5, {"content": [{"type": "text", "text": "x", "_meta": {"n": 2**70}}]}) is True
    assert "tools/call 'sync_bad'" in caplog.text
    (reply,) = session.data_to_send()
    assert_internal_error(orjson.loads(reply), 5)
    assert session.in_flight() == []
    with pytest.raises(KeyError):  # answered exactly once
        session.respond(5, {})


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_stdio(anyio_backend: str) -> None:
    reader = asyncio.StreamReader()
    out = bytearray()

    class Writer:
        def write(self, data: bytes) -> None:
            out.extend(data)

        async def drain(self) -> None:
            pass

        def close(self) -> None:
            pass

    task = asyncio.get_running_loop().create_task(serve_stdio(app, reader, Writer()))  # type: ignore[arg-type]
    lines = [
        INIT,
        INITIALIZED,
        call(1, "sync_bad", 0),
        call(2, "sync_bad", 1),
        call(3, "async_bad", 0),
        call(4, "async_bad", 1),
        call(5, "fine"),
    ]
    for line in lines:
        reader.feed_data(orjson.dumps(line) + b"\n")
    async with asyncio.timeout(10):
        while sum(1 for m in bytes(out).splitlines() if "id" in orjson.loads(m) and "method" not in orjson.loads(m)) < 6:
            await asyncio.sleep(0.01)
    reader.feed_eof()
    await asyncio.wait_for(task, 10)
    replies = {m["id"]: m for m in map(orjson.loads, bytes(out).splitlines()) if "id" in m and "method" not in m}
    for rid in (1, 2, 3, 4):
        assert_internal_error(replies[rid], rid)
    assert replies[5]["result"]["content"][0]["text"] == "fine"


@pytest.fixture(params=["native", "uvicorn"])
def base(request: pytest.FixtureRequest) -> Any:
    with serve_in_thread(asgi_app(app), server=request.param) as url:
        yield url


def _session(c: httpx.Client, url: str) -> dict[str, str]:
    r = c.post(url, json=INIT, headers=HEADERS)
    h = {**HEADERS, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    assert c.post(url, json=INITIALIZED, headers=h).status_code == 202
    return h


def test_http_json(base: str) -> None:
    url = base + "/mcp"
    with httpx.Client(timeout=10) as c:
        h = _session(c, url)
        for rid, name, which in ((1, "sync_bad", 0), (2, "sync_bad", 1), (3, "async_bad", 0), (4, "async_bad", 1)):
            r = c.post(url, json=call(rid, name, which), headers=h)
            assert r.status_code == 200 and r.headers["content-type"].startswith("application/json"), r.text
            assert_internal_error(r.json(), rid)
        assert c.post(url, json=call(5, "fine"), headers=h).json()["result"]["content"][0]["text"] == "fine"


def test_http_sse(base: str) -> None:
    url = base + "/mcp"
    with httpx.Client(timeout=10) as c:
        h = _session(c, url)
        for rid, which in ((1, 0), (2, 1)):
            r = c.post(url, json=call(rid, "async_bad", which, token=f"p{rid}"), headers=h)
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r.text
            data = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:") and line[5:].strip()]
            assert data[0]["method"] == "notifications/progress"
            assert_internal_error(data[-1], rid)
        assert c.post(url, json=call(5, "fine"), headers=h).json()["result"]["content"][0]["text"] == "fine"
