"""``mcpfast serve --transport http --stateless-only``: only 2026-07-28 stateless requests are
served (the handshake era is refused with the errors the spec names), so ``--workers N`` may use
the memory store. Real servers, both runners, and the rule itself (no I/O)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx2 as httpx
import pytest
from _support import child_env, free_port, start_process, stop_process, wait_until

from mcpfast import core
from mcpfast.client.probe import child_pids
from mcpfast.server import Server
from mcpfast.transports.http import ENDPOINT_MCP, ENDPOINT_SSE, HttpTransport
from mcpfast.transports.stateless_only import refusal, stateless_only

pytestmark = [pytest.mark.timeout(90)]

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
M2026 = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": M2026, "io.modelcontextprotocol/clientCapabilities": {}}
MODERN = {**ACCEPT, "MCP-Protocol-Version": M2026, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}


def init(rid: int | str = 1, version: str = "2025-11-25") -> dict:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }


def echo(rid: int, text: str) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}, "_meta": META}}


# ------------------------------------------------------------------ the rule


def decoded(message: object) -> object:
    """A body as the transport's parse step hands it to a gate (the decode error included)."""
    try:
        return core.decode(message if isinstance(message, bytes) else json.dumps(message).encode())
    except core.JsonRpcError as exc:
        return exc


def test_the_rule_refuses_the_handshake_era_only() -> None:
    status, headers, body = refusal("POST", ENDPOINT_MCP, {}, decoded(init("a")))  # type: ignore[misc]
    error = json.loads(body)
    assert status == 400 and dict(headers)[b"content-type"] == b"application/json"
    assert error["id"] == "a" and error["error"]["code"] == -32022
    assert error["error"]["data"] == {"supported": [M2026], "requested": "2025-11-25"}
    assert refusal("GET", ENDPOINT_MCP, {}, None) == (405, ((b"allow", b"POST"),), b"")
    assert refusal("DELETE", ENDPOINT_MCP, {b"mcp-session-id": b"x"}, None) == (405, ((b"allow", b"POST"),), b"")
    # served by the transport: 2026 requests, anything that is not initialize, a body that is no JSON-RPC
    assert refusal("POST", ENDPOINT_MCP, {b"mcp-protocol-version": M2026.encode()}, decoded(echo(1, "x"))) is None
    assert refusal("POST", ENDPOINT_MCP, {}, decoded(echo(1, "x"))) is None
    assert refusal("POST", ENDPOINT_MCP, {}, decoded({"jsonrpc": "2.0", "method": "notifications/initialized"})) is None
    assert refusal("POST", ENDPOINT_MCP, {}, decoded(b"{not json")) is None
    assert refusal("POST", ENDPOINT_MCP, {}, decoded([init()])) is None  # a batch: the transport's 400 (needs a session)
    # other paths are not the rule's: the transport answers them (404, the 2024-11-05 endpoints when on)
    assert refusal("GET", ENDPOINT_SSE, {}, None) is None
    assert refusal("POST", None, {}, decoded(init())) is None


def test_the_rule_runs_in_the_transports_pipeline_after_the_host_check() -> None:
    transport = stateless_only(HttpTransport(Server("t"), allowed_hosts=["localhost"]))
    assert transport.gates == [refusal]
    head = {b"host": b"localhost", b"accept": b"application/json, text/event-stream", b"content-type": b"application/json"}
    body = json.dumps(init(7)).encode()
    assert transport.handle("POST", "/mcp", b"", head, body)[0] == 400  # type: ignore[index]
    assert transport.handle("POST", "/mcp", b"", {**head, b"host": b"evil.example"}, body)[0] == 421  # type: ignore[index]
    assert transport.handle("GET", "/mcp/", b"", head, b"")[0] == 405  # type: ignore[index]  # the endpoint's trailing slash too
    assert not transport.sessions


# ------------------------------------------------------------------ real servers


def serve(port: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port), *args]


def check_stateless_only(base: str) -> None:
    url = base + "/mcp"
    with httpx.Client(timeout=10) as c:
        r = c.post(url, json=init(7), headers=ACCEPT)
        assert r.status_code == 400 and "mcp-session-id" not in r.headers
        assert r.json()["id"] == 7 and r.json()["error"]["code"] == -32022
        assert r.json()["error"]["data"] == {"supported": [M2026], "requested": "2025-11-25"}
        assert "only 2026-07-28" in r.json()["error"]["message"]
        for verb in ("GET", "DELETE"):
            r = c.request(verb, url, headers={"Accept": "text/event-stream", "Mcp-Session-Id": "whatever"})
            assert r.status_code == 405 and r.headers["allow"] == "POST"
        assert c.get(base + "/sse", headers={"Accept": "text/event-stream"}).status_code == 404  # no 2024-11-05 endpoints
        r = c.post(url, json={"jsonrpc": "2.0", "id": 8, "method": "tools/list"}, headers={**ACCEPT, "Mcp-Session-Id": "made-up"})
        assert r.status_code == 404  # no session was ever made, so none is found
    for i in range(20):  # a new connection each time: with --workers the kernel spreads them
        with httpx.Client(timeout=10) as c:
            r = c.post(url, json=echo(i, f"m{i}"), headers=MODERN)
            assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == f"m{i}"
            assert "mcp-session-id" not in r.headers


@pytest.fixture(params=["native", "uvicorn"])
def one_process(request: pytest.FixtureRequest) -> Iterator[str]:
    port = free_port()
    proc = start_process(
        serve(port, "--runner", request.param, "--stateless-only"), port, "mcpfast serve --stateless-only", env=child_env()
    )
    yield f"http://127.0.0.1:{port}"
    stop_process(proc)


def test_stateless_only_server_refuses_the_handshake_era(one_process: str) -> None:
    check_stateless_only(one_process)


def test_workers_with_the_memory_store_need_stateless_only() -> None:
    refused = subprocess.run(serve(free_port(), "--workers", "2"), capture_output=True, text=True, timeout=30, env=child_env())
    assert refused.returncode == 2
    assert "--workers 2 needs a shared session store" in refused.stderr and "--stateless-only" in refused.stderr
    port = free_port()
    sup = start_process(
        serve(port, "--workers", "2", "--stateless-only", "--grace", "2"), port, "mcpfast serve --workers 2", env=child_env()
    )
    try:
        assert wait_until(lambda: len(child_pids(sup.pid)) == 2)  # two workers on one port, memory store
        check_stateless_only(f"http://127.0.0.1:{port}")
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(30) == 0
    finally:
        stop_process(sup)
