"""What a FastMCP app decides by the transport serving it is decided alike on mcpfast: component
auth checks are skipped on stdio (FastMCP trusts a local client), and a 2026-07-28 request over
HTTP has no scope for per-client state, so visibility rules set in one are not kept for the next.
Both servers run the same app (``fastmcp_edges:served``) as processes; their answers are compared."""

from __future__ import annotations

import json
import select
import subprocess
import time
from typing import Any

from _servers import SIDES, env, needs, post, stdio_command
from test_wire_parity import _modern

DEADLINE = 20.0


def stdio_answers(side: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``side``'s stdio server writes for ``messages`` (each reply awaited before the next)."""
    proc = subprocess.Popen(
        stdio_command(side, "fastmcp-edges"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env()
    )
    assert proc.stdin is not None and proc.stdout is not None
    out: list[dict[str, Any]] = []
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            if "id" not in message:
                continue
            deadline = time.monotonic() + DEADLINE
            while True:
                ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
                assert ready, f"{side}: no reply to {message} in {DEADLINE} s"
                line = proc.stdout.readline()
                assert line, f"{side}: the server ended before replying to {message}"
                got = json.loads(line)
                out.append(got)
                if got.get("id") == message["id"] and "method" not in got:
                    break
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return out


def test_component_auth_is_skipped_on_stdio_as_fastmcp_skips_it() -> None:
    needs("fastmcp-edges")
    messages = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "forbidden", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "versioned", "arguments": {"x": 3}}},
    ]  # fmt: skip
    got = {side: stdio_answers(side, messages) for side in SIDES}
    assert got["mcpfast"][1:] == got["own"][1:]  # initialize differs by what the module docstring of test_parity lists
    assert got["mcpfast"][1]["result"]["content"][0]["text"] == "never seen"


def test_visibility_rules_of_a_stateless_http_request_are_not_kept(http_url: Any) -> None:
    needs("fastmcp-edges")
    calls = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "secret", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hide_secret", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "secret", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "forbidden", "arguments": {}}},
    ]
    got: dict[str, list[tuple[int, list[dict[str, Any]]]]] = {}
    for side in SIDES:
        url = http_url(side, "fastmcp-edges")
        got[side] = []
        for message in calls:
            body, headers = _modern(message)
            response, answers = post(url, body, headers)
            got[side].append((response.status, [a for a in answers if "method" not in a]))
    assert got["mcpfast"] == got["own"]
    assert got["mcpfast"][2][1][0]["result"]["content"][0]["text"] == "the secret"
    assert got["mcpfast"][3][1][0]["result"]["content"][0]["text"] == "Unknown tool: 'forbidden'"
