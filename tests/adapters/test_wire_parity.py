"""Parity over the HTTP wire: the framework's own Streamable HTTP server (the SDK's
``streamable_http_app()`` under uvicorn, FastMCP's ``http_app()``) and ``mcpfast serve
--transport http --app`` get the same raw HTTP requests, and every JSON-RPC message they answer
is compared, with the HTTP status of each reply.

Both protocol eras the adapters serve, which both frameworks serve too: a handshake-era session
(``initialize``, then requests carrying ``Mcp-Session-Id``; 2025-11-25 back to 2024-11-05) and
2026-07-28 stateless requests (the envelope in ``_meta`` and the ``Mcp-Method`` / ``Mcp-Name``
headers, no session).

Not compared, and why:

* HTTP headers: the ``Mcp-Session-Id`` each server mints is a random token of its own; whether a
  reply comes as a JSON body or as an SSE stream is the server's choice in every era (the spec
  allows both; the frameworks stream every reply, mcpfast streams when a notification goes with
  it). The messages in either body are compared, in order.
* ``capabilities.logging`` (``initialize``, ``server/discover``) for the official SDK's app: its
  handlers log without declaring ``logging``; mcpfast declares it, as the spec wants (docs/sdk-apps.md).
* At 2024-11-05, ``initialize``'s ``capabilities.completions`` and a progress notification's
  ``message``: that version does not define them, and mcpfast's session machine leaves them out
  where the frameworks send them anyway (docs/sdk-apps.md, "What an older version does not have").
"""

from __future__ import annotations

import copy
import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from _servers import SIDES, post

pytestmark = pytest.mark.timeout(60)

HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MODERN = "2026-07-28"

STRUCTURED = {
    "sdk": ("weather", {"city": "Wien"}),
    "fastmcp": ("midpoint", {"a": {"x": 0, "y": 0}, "b": {"x": 2, "y": 4}}),
}

CLIENT_INFO = {"name": "wire-client", "version": "1.0"}

ONLY: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "sdk": [
        ("tools/call", {"name": "unstructured", "arguments": {"n": 2}}),
        ("tools/call", {"name": "refuse", "arguments": {"what": "protocol"}}),  # an MCPError: a JSON-RPC error
        ("tools/call", {"name": "pixel", "arguments": {}}),
        ("resources/read", {"uri": "data://bytes"}),
        ("prompts/get", {"name": "dialogue", "arguments": {"topic": "t"}}),
        (
            "completion/complete",
            {"ref": {"type": "ref/resource", "uri": "users://{user_id}/profile"}, "argument": {"name": "user_id", "value": ""}},
        ),
    ],
    "fastmcp": [
        ("tools/call", {"name": "listing", "arguments": {"n": 2}}),
        ("tools/call", {"name": "detailed", "arguments": {}}),
    ],
}
"""Requests for what one sample app has and the other has not."""


def requests(app: str, *, modern: bool) -> list[dict[str, Any]]:
    """The requests both servers get, numbered from 1."""
    structured, arguments = STRUCTURED[app]
    calls: list[tuple[str, dict[str, Any] | None]] = [
        ("tools/list", None),
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
        ("tools/call", {"name": "shout", "arguments": {"text": "hi"}}),
        ("tools/call", {"name": structured, "arguments": arguments}),
        ("tools/call", {"name": "add", "arguments": {"a": "x"}}),  # bad arguments: the framework's validation error
        ("tools/call", {"name": "add", "arguments": {"a": 1}}),  # a missing argument
        ("tools/call", {"name": "nope", "arguments": {}}),
        ("tools/call", {"name": "fail", "arguments": {"reason": "boom"}}),
        ("tools/call", {"name": "refuse", "arguments": {"what": "that"}}),
        ("tools/call", {"name": "slow_count", "arguments": {"steps": 2}, "_meta": {"progressToken": "p1"}}),  # progress, logs
        ("tools/call", {"name": "whoami", "arguments": {}}),
        ("resources/list", None),
        ("resources/templates/list", None),
        ("resources/read", {"uri": "config://app"}),
        ("resources/read", {"uri": "users://7/profile"}),
        ("resources/read", {"uri": "items://missing"}),
        ("resources/read", {"uri": "nope://x"}),
        ("prompts/list", None),
        ("prompts/get", {"name": "review", "arguments": {"code": "x=1", "language": "rust"}}),
        ("prompts/get", {"name": "review", "arguments": {}}),
        ("prompts/get", {"name": "nope"}),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "language", "value": "p"}}),
    ]
    calls += [
        ("tools/list", {"cursor": "bogus"}),
        ("tools/call", {"name": "add", "arguments": None}),
        ("tools/call", {"name": "whoami"}),  # no arguments at all
        ("prompts/get", {"name": "review", "arguments": {"code": 5}}),  # not a string
        ("resources/read", {"uri": "items://broken"}),  # a crash
        ("resources/subscribe", {"uri": "config://app"}),  # not offered by either app
        *ONLY[app],
    ]
    if modern:
        calls.insert(0, ("server/discover", None))
    else:
        calls.append(("ping", None))
    out = []
    for rid, (method, params) in enumerate(calls, start=1):
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        out.append(message)
    return out


def _modern(message: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A 2026-07-28 request: its envelope in ``_meta`` (logs opted in at debug), and its headers."""
    message = copy.deepcopy(message)
    params = message.setdefault("params", {})
    params["_meta"] = {
        **params.get("_meta", {}),
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        "io.modelcontextprotocol/logLevel": "debug",
    }
    headers = {"mcp-protocol-version": MODERN, "mcp-method": message["method"]}
    name = params.get("name", params.get("uri"))
    if message["method"] in ("tools/call", "prompts/get", "resources/read") and isinstance(name, str):
        headers["mcp-name"] = name
    return message, headers


Exchange = list[tuple[str, int, list[dict[str, Any]]]]
"""What a server answered: per request sent, (what was sent, HTTP status, JSON-RPC messages)."""


def handshake_exchange(url: str, app: str, version: str) -> Exchange:
    initialize = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO},
    }  # fmt: skip
    response, messages = post(url, initialize, {})
    out: Exchange = [("initialize", response.status, messages)]
    session = response.getheader("mcp-session-id")
    assert session, f"no session from {url}: {messages}"
    headers = {"mcp-session-id": session, "mcp-protocol-version": version}
    response, messages = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    out.append(("notifications/initialized", response.status, messages))
    for message in requests(app, modern=False):
        response, messages = post(url, message, headers)
        out.append((message["method"], response.status, messages))
    response, messages = post(url, None, headers, method="DELETE")
    out.append(("DELETE", response.status, messages))
    return out


def modern_exchange(url: str, app: str) -> Exchange:
    out: Exchange = []
    for message in requests(app, modern=True):
        body, headers = _modern(message)
        response, messages = post(url, body, headers)
        out.append((message["method"], response.status, messages))
    return out


def normalise(exchange: Exchange, app: str, version: str = MODERN) -> Exchange:
    """The exchange without the fields the module docstring lists, each for the reason given there."""
    out = copy.deepcopy(exchange)
    for sent, _status, messages in out:
        for message in messages:
            result = message.get("result")
            if sent in ("initialize", "server/discover") and app == "sdk" and isinstance(result, dict):
                result["capabilities"].pop("logging", None)
            if version == "2024-11-05":
                if sent == "initialize" and isinstance(result, dict):
                    result["capabilities"].pop("completions", None)
                if message.get("method") == "notifications/progress":
                    message["params"].pop("message", None)
    return out


def compare(own: Exchange, ours: Exchange) -> None:
    differ = [
        f"{theirs[0]} (request {i}):\n framework: {json.dumps(theirs[1:])}\n mcpfast:   {json.dumps(mine[1:])}"
        for i, (theirs, mine) in enumerate(zip(own, ours, strict=True))
        if theirs != mine
    ]
    assert not differ, "\n".join(differ)


def _by_id(exchange: Exchange) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for _sent, _status, messages in exchange for m in messages if "id" in m and "method" not in m}


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
@pytest.mark.parametrize("app", ["sdk", "fastmcp"])
def test_handshake_era_on_the_wire(app: str, version: str, http_url: Any) -> None:
    got = {side: handshake_exchange(http_url(side, app), app, version) for side in SIDES}
    compare(normalise(got["own"], app, version), normalise(got["mcpfast"], app, version))
    # What the comparison covered is what the app does (two exchanges of errors would match too).
    ours = got["mcpfast"]
    replies = _by_id(ours)
    assert replies[2]["result"]["structuredContent"] == {"result": 3}
    assert replies[5]["result"]["isError"] is True and replies[4]["result"]["structuredContent"]
    progress = [m for _s, _st, messages in ours for m in messages if m.get("method") == "notifications/progress"]
    assert [p["params"]["progress"] for p in progress] == [1, 2]
    assert replies[15]["result"]["contents"][0]["text"] == "profile of 7"
    assert "error" in replies[17] and "error" in replies[21]
    assert [status for _sent, status, _messages in ours][1] == 202


@pytest.mark.parametrize("app", ["sdk", "fastmcp"])
def test_stateless_era_on_the_wire(app: str, http_url: Any) -> None:
    got = {side: modern_exchange(http_url(side, app), app) for side in SIDES}
    compare(normalise(got["own"], app), normalise(got["mcpfast"], app))
    replies = _by_id(got["mcpfast"])
    assert replies[3]["result"]["structuredContent"] == {"result": 3} and replies[3]["result"]["resultType"] == "complete"
    assert replies[12]["result"]["structuredContent"]["client"] == "wire-client"
    logs = [m for _s, _st, messages in got["mcpfast"] for m in messages if m.get("method") == "notifications/message"]
    assert logs, "the request opted in to logs at debug"


def first_message(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """The HTTP status and the first JSON-RPC message of a reply that may be a stream left open
    (``subscriptions/listen``): read up to its first SSE event, then hang up."""
    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=10)
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    try:
        conn.request("POST", where.path, json.dumps(body).encode(), sent)
        response = conn.getresponse()
        if not response.getheader("content-type", "").startswith("text/event-stream"):
            return response.status, json.loads(response.read())
        while True:
            line = response.fp.readline().decode()
            assert line, "the stream ended before any event"
            if line.startswith("data:") and line[5:].strip():
                return response.status, json.loads(line[5:])
    finally:
        conn.close()


@pytest.mark.parametrize("app", ["sdk", "fastmcp"])
def test_listen_on_the_wire(app: str, http_url: Any) -> None:
    listen = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen"}
    listen["params"] = {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["config://app"]}}
    body, headers = _modern(listen)
    del body["params"]["_meta"]["io.modelcontextprotocol/logLevel"]
    got = {side: first_message(http_url(side, app), body, headers) for side in SIDES}
    assert got["mcpfast"] == got["own"]
    if app == "fastmcp":  # it serves no listen: -32601, worded as FastMCP words it
        assert got["mcpfast"][1]["error"] == {"code": -32601, "message": "Method not found", "data": "subscriptions/listen"}
