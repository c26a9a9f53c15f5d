"""``mcpfast serve --app module:obj`` on a framework app as it is, end to end: stdio and HTTP.

The answers themselves are compared with the framework's own in test_parity.py; here the command
line runs the real processes: the adapter is picked from the object, the lifespan is entered, the
framework's Context reaches the client (progress), and a refused object exits naming its type.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

import pytest
from _servers import env, post


def _serve(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcpfast", "serve", *args]


def _initialize(rid: int = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0", "id": rid, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "cli-test", "version": "1"}},
    }  # fmt: skip


def _stdio_exchange(app: str, messages: list[dict[str, Any]], *extra: str) -> list[dict[str, Any]]:
    proc = subprocess.Popen(_serve("--app", app, *extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    assert proc.stdin is not None and proc.stdout is not None
    out: list[dict[str, Any]] = []
    try:
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        wanted = {m["id"] for m in messages if "id" in m}
        pending = b""  # read from the descriptor itself: a buffered readline would hide lines from select
        while not wanted <= {m.get("id") for m in out if "method" not in m}:  # replies come as handlers finish
            assert time.monotonic() < deadline, f"not every reply came: {out}"
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                assert chunk, f"the server exited: {proc.stderr.read().decode() if proc.stderr else ''}"
                *lines, pending = (pending + chunk).split(b"\n")
                out.extend(json.loads(line) for line in lines if line.strip())
        proc.stdin.close()
        proc.wait(timeout=10)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return out


def _calls(first: int) -> list[dict[str, Any]]:
    return [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": first, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}},
        {"jsonrpc": "2.0", "id": first + 1, "method": "tools/call",
         "params": {"name": "slow_count", "arguments": {"steps": 2}, "_meta": {"progressToken": "t"}}},
        {"jsonrpc": "2.0", "id": first + 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}},
    ]  # fmt: skip


def _check(out: list[dict[str, Any]], first: int) -> None:
    replies = {m["id"]: m for m in out if "method" not in m}
    assert replies[first]["result"]["structuredContent"] == {"result": 5}
    assert replies[first + 1]["result"]["structuredContent"] == {"result": "done 2"}
    assert replies[first + 2]["result"]["structuredContent"]["lifespan"] == "hello from the lifespan"
    assert [m["params"]["progress"] for m in out if m.get("method") == "notifications/progress"] == [1, 2]


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
@pytest.mark.parametrize(("app", "extra"), [("sdk_app:mcp", ()), ("sdk_app:mcp", ("--inline-sync-tools",)), ("fastmcp_app:mcp", ())])
def test_stdio_serves_a_framework_app(app: str, extra: tuple[str, ...]) -> None:
    if app.startswith("fastmcp"):
        pytest.importorskip("fastmcp")
    out = _stdio_exchange(app, [_initialize(), *_calls(1)], *extra)
    assert out[0]["result"]["serverInfo"]["name"] in ("sdk-sample", "fastmcp-sample")
    _check(out, 1)


def test_an_object_that_is_no_server_is_refused_at_start() -> None:
    done = subprocess.run(_serve("--app", "os:path"), capture_output=True, env=env(), timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert b"os:path: builtins.module is not a server mcpfast can serve" in done.stderr


@pytest.mark.parametrize("app", ["sdk", "fastmcp"])
def test_http_serves_a_framework_app(app: str, http_url: Any) -> None:
    url = http_url("mcpfast", app)  # mcpfast serve --transport http --app (conftest.py)
    response, first = post(url, _initialize(), {})
    assert response.status == 200, first
    session = response.getheader("mcp-session-id")
    assert session and first[0]["result"]["capabilities"]["tools"] is not None
    headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    out: list[dict[str, Any]] = []
    for message in _calls(1):
        response, messages = post(url, message, headers)
        assert response.status in (200, 202), messages
        out.extend(messages)
    _check(out, 1)
