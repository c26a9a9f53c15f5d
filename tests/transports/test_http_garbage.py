"""Requests leave no reference cycles behind: what a request made is freed when it is answered,
not by the garbage collector (whose passes cost every request of a busy server)."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

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


def measure(exchange: Callable[[HttpTransport], None]) -> None:
    """Run ``exchange`` 20 times after a first use and raise if the collector found anything."""

    async def run() -> None:
        t = asgi_app(app)
        exchange(t)  # first use: caches fill
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        for _ in range(20):
            exchange(t)
        gc.collect()
        left = sorted({type(o).__name__ for o in gc.garbage})
        assert gc.garbage == [], f"{len(gc.garbage)} objects in cycles: {left}"
        gc.set_debug(0)
        gc.enable()
        await t.aclose()

    asyncio.run(run())


@pytest.mark.parametrize("exchange", ["session_life", "stateless_call"])
def test_a_request_leaves_no_cycle_for_the_collector(exchange: str) -> None:
    # In a process of its own: servers other tests left running in threads of this one make
    # garbage of their own meanwhile.
    code = f"from tests.transports.test_http_garbage import measure, {exchange}; measure({exchange})"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
