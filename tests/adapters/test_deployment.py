"""A framework app deployed as mcpfast's own: mounted as the ASGI app (``asgi_app``), and served
by several worker processes sharing their sessions in Redis (``--workers N --store redis://``)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _servers import env, needs, post
from _support import RedisServer, free_port, stop_process, wait_port_named

from mcpfast.transports.http import asgi_app
from mcpfast.transports.http_testing import serve_in_thread

VERSION = "2025-11-25"


def open_session(url: str) -> dict[str, str]:
    """``initialize`` and ``notifications/initialized``: the headers of the session opened."""
    hello = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "deploy-test", "version": "1"}}
    response, messages = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}, {})
    assert response.status == 200, messages
    headers = {"mcp-session-id": response.getheader("mcp-session-id") or "", "mcp-protocol-version": VERSION}
    assert headers["mcp-session-id"], "no session id"
    response, _ = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    assert response.status == 202
    return headers


def call(url: str, headers: dict[str, str], rid: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    response, messages = post(
        url, {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}, headers
    )
    assert response.status == 200, messages
    (reply,) = [m for m in messages if m.get("id") == rid]
    result: dict[str, Any] = reply["result"]
    return result


@pytest.mark.parametrize(("app", "module"), [("sdk", "sdk_app"), ("fastmcp", "fastmcp_app")])
def test_a_framework_app_mounts_as_the_asgi_app(app: str, module: str) -> None:
    needs(app)
    obj = __import__(module).mcp
    with serve_in_thread(asgi_app(obj)) as base:
        url = f"{base}/mcp"
        headers = open_session(url)
        result = call(url, headers, 1, "add", {"a": 2, "b": 3})
        assert result["structuredContent"] == {"result": 5} and result["isError"] is False
        response, _ = post(url, None, headers, method="DELETE")
        assert response.status in (200, 204)


def test_a_framework_app_on_workers_sharing_sessions_in_redis(redis: RedisServer, tmp_path: Path) -> None:
    needs("fastmcp-edges")
    port = free_port()
    command = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--port", str(port), "--app", "fastmcp_edges:served"]
    with (tmp_path / "serve.log").open("wb") as log:  # the servers' stderr, for a failing test to show
        proc = subprocess.Popen([*command, "--workers", "2", "--store", redis.url], env=env(), stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_port_named(port, proc, "mcpfast serve --workers 2 --app fastmcp_edges:served", timeout=30.0)
        url = f"http://127.0.0.1:{port}/mcp"
        headers = open_session(url)
        pids: set[int] = set()
        deadline = time.monotonic() + 30
        rid = 1
        # Each request on a new connection: the kernel spreads them over the workers; the
        # session opened on one is served by either.
        while len(pids) < 2 and time.monotonic() < deadline:
            pids.add(call(url, headers, rid, "pid", {})["structuredContent"]["result"])
            assert call(url, headers, rid + 1, "versioned", {"x": rid})["content"][0]["text"] == f"v2 got {rid}"
            rid += 2
        assert len(pids) == 2, f"one worker answered every one of {rid // 2} calls"
    finally:
        stop_process(proc)
