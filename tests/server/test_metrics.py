"""``mcpfast serve --transport http --metrics``: ``/metrics`` of a real server counts requests by
their JSON-RPC method and HTTP status, on the native runner and over ASGI (uvicorn) alike."""

from __future__ import annotations

import sys
import urllib.request
from collections.abc import Iterator

import httpx2 as httpx
import pytest
from _support import child_env, free_port, metric, start_process, stop_process

pytestmark = [pytest.mark.timeout(60)]

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
M2026 = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": M2026, "io.modelcontextprotocol/clientCapabilities": {}}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture(params=["native", "uvicorn"])
def served(request: pytest.FixtureRequest) -> Iterator[str]:
    port = free_port()
    cmd = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--runner", request.param, "--metrics"]
    proc = start_process([*cmd, "--host", "127.0.0.1", "--port", str(port)], port, "mcpfast serve --metrics", env=child_env())
    yield f"http://127.0.0.1:{port}"
    stop_process(proc)


def call(rid: int, name: str, args: dict, meta: dict | None = None) -> dict:
    params: dict = {"name": name, "arguments": args}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def test_requests_are_counted_by_jsonrpc_method_and_status(served: str) -> None:
    url = served + "/mcp"
    with httpx.Client(timeout=10) as c:
        r = c.post(url, json=INIT, headers=ACCEPT)
        assert r.status_code == 200
        h = {**ACCEPT, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        assert c.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h).status_code == 202
        for i in range(3):
            assert c.post(url, json=call(10 + i, "echo", {"text": "x"}), headers=h).status_code == 200
        assert c.post(url, json={"jsonrpc": "2.0", "id": 20, "method": "tools/list"}, headers=h).status_code == 200
        unknown = c.post(url, json={"jsonrpc": "2.0", "id": 21, "method": "x-vendor/random-name"}, headers=h)
        assert unknown.json()["error"]["code"] == -32601
        assert c.post(url, content=b"{not json", headers=h).status_code == 400
        assert c.post(url, json={"jsonrpc": "2.0", "id": 99, "result": {}}, headers=h).status_code == 202  # answers nothing
        modern = {**ACCEPT, "MCP-Protocol-Version": M2026, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
        assert c.post(url, json=call(30, "echo", {"text": "m"}, META), headers=modern).status_code == 200
        assert c.get(url, headers={"Accept": "text/event-stream"}).status_code == 400  # no session
        assert c.delete(url, headers=h).status_code == 200
        with urllib.request.urlopen(served + "/metrics", timeout=10) as resp:
            assert resp.headers["content-type"].startswith("text/plain")
            text = resp.read().decode()
    counted = {
        ("initialize", "200"): 1,
        ("notifications/initialized", "202"): 1,
        ("tools/call", "200"): 4,  # 3 in the session, 1 stateless
        ("tools/list", "200"): 1,
        ("other", "200"): 1,  # a method MCP does not define: one bounded label, whatever its name
        ("invalid", "400"): 1,
        ("response", "202"): 1,
        ("GET", "400"): 1,
        ("DELETE", "200"): 1,
    }
    for (method, status), n in counted.items():
        assert metric(text, "mcpfast_http_requests_total", method=method, status=status) == n, (method, status, text)
    assert "x-vendor/random-name" not in text and 'method="POST"' not in text
    total = sum(counted.values())
    assert metric(text, "mcpfast_http_request_seconds_count") == total  # /metrics itself is not counted
    samples = [line for line in text.splitlines() if line.startswith("mcpfast_http_requests_total{")]
    assert sum(float(line.rpartition(" ")[2]) for line in samples) == total, samples  # nothing else was counted
