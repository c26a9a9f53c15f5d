"""Requests leave no reference cycles behind: what a request made is freed when it is answered,
not by the garbage collector (whose passes cost every request of a busy server)."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Callable, Iterator

import pytest

from mcpfast.server.demo import app
from mcpfast.transports.http import HttpTransport, asgi_app

HEADERS = {b"host": b"127.0.0.1:8000", b"accept": b"application/json, text/event-stream", b"content-type": b"application/json"}
INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
).encode()
CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}'
STATELESS_CALL = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "echo",
            "arguments": {"text": "hi"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}},
        },
    }
).encode()


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    """What the collector finds unreachable while the test runs (kept, not freed)."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def session_life(t: HttpTransport) -> None:
    status, headers, _ = t.handle("POST", "/mcp", b"", dict(HEADERS), INIT)  # type: ignore[misc]
    assert status == 200
    named = {**HEADERS, b"mcp-session-id": dict(headers)[b"mcp-session-id"], b"mcp-protocol-version": b"2025-11-25"}
    assert t.handle("POST", "/mcp", b"", dict(named), b'{"jsonrpc":"2.0","method":"notifications/initialized"}')[0] == 202  # type: ignore[index]
    for _ in range(3):
        assert t.handle("POST", "/mcp", b"", dict(named), CALL)[0] == 200  # type: ignore[index]
    assert t.handle("DELETE", "/mcp", b"", dict(named), b"")[0] == 200  # type: ignore[index]


def stateless_call(t: HttpTransport) -> None:
    headers = {**HEADERS, b"mcp-protocol-version": b"2026-07-28", b"mcp-method": b"tools/call", b"mcp-name": b"echo"}
    assert t.handle("POST", "/mcp", b"", headers, STATELESS_CALL)[0] == 200  # type: ignore[index]


@pytest.mark.parametrize("exchange", [session_life, stateless_call], ids=["session", "stateless"])
def test_a_request_leaves_no_cycle_for_the_collector(exchange: Callable[[HttpTransport], None], saved_garbage: list[object]) -> None:
    async def run() -> None:
        t = asgi_app(app)
        exchange(t)  # first use: caches fill
        gc.collect()
        saved_garbage.clear()
        for _ in range(20):
            exchange(t)
        gc.collect()
        left = sorted({type(o).__name__ for o in saved_garbage})
        assert saved_garbage == [], f"{len(saved_garbage)} objects in cycles: {left}"
        await t.aclose()

    asyncio.run(run())
