"""The Streamable HTTP adapter (gevent, in a child interpreter) against the official SDK server
(uvicorn on 127.0.0.1, SSE and JSON reply modes) and a fake server."""

from __future__ import annotations

import json

import pytest
from _support import FAKE, SDK, refused_port, start_reference_server, stop


def names(out: dict) -> list[str]:
    return [r[0] for r in out["records"]]


def failures(out: dict) -> list[list]:
    return [r for r in out["records"] if r[3] is not None]


OPS = [
    ["initialize"],
    ["tool", "echo", {"text": "sdk"}],
    ["tool", "add", {"a": 2, "b": 3}],
    ["stream", 5],
    ["call", "tools/list"],
    ["concurrent", 4],
]


@pytest.mark.parametrize("mode", ["sse", "json"])
def test_sdk_legacy_session(drive, http_servers, mode: str) -> None:
    url = http_servers(SDK, *(["--json"] if mode == "json" else []))
    out = drive({"transport": "http", "target": url, "ops": [*OPS, ["get_stream", 0.3], ["delete"]]})
    assert not failures(out), failures(out)
    assert out["era"] == "handshake" and out["session_id"]
    echo, add = (json.loads(r)["result"] for r in out["replies"][:2])
    assert echo["content"][0]["text"] == "sdk" and add["content"][0]["text"] == "5"
    assert len(out["concurrent"]) == 4
    assert out["deleted"] is True and "DELETE" in names(out)
    if mode == "sse":
        assert out["progress"] == 5
        assert "sse:first-event" in names(out) and names(out).count("sse:gap") >= 4
        assert out["get_status"] == 200 and "GET:open" in names(out)
    else:
        assert "sse:first-event" not in names(out)


@pytest.mark.parametrize("version", ["2026-07-28", "auto"])
def test_sdk_modern(drive, http_servers, version: str) -> None:
    url = http_servers(SDK)
    out = drive({"transport": "http", "target": url, "version": version, "ops": [*OPS, ["listen", 0.5]]})
    assert not failures(out), failures(out)
    assert out["listen"] is True and "subscriptions/listen:ack" in names(out)
    assert out["era"] == "stateless" and out["session_id"] is None and names(out)[0] == "server/discover"
    assert json.loads(out["replies"][0])["result"]["resultType"] == "complete"
    assert out["progress"] == 5 and "sse:first-event" in names(out)


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_held_stream_lives_as_long_as_its_session(drive, version: str) -> None:
    # hold_stream(): the session's stream (GET, or a 2026 listen) in its own greenlet and on its own
    # connection; asked again for the same session it does nothing; delete() and close() end it
    # (not a failure) and leave no greenlet or connection behind; the next session holds its own
    proc, url = start_reference_server()
    hold = [["hold"], ["hold"], ["sleep", 0.3], ["state"], ["tool", "echo", {"text": "x"}]]
    ops = [["initialize"], ["state"], *hold, ["delete"], ["state"], ["initialize"], *hold, ["close"], ["state"]]
    try:
        out = drive({"transport": "http", "target": url, "version": version, "ops": ops})
    finally:
        stop(proc)
    assert not failures(out), failures(out)
    held = "GET:open" if version == "2025-11-25" else "subscriptions/listen:ack"
    assert names(out).count(held) == 2, "one per session"
    open_, holding, ended, holding_again, closed = out["states"]
    assert holding["greenlets"] == open_["greenlets"] + 1 and holding["sockets"] == open_["sockets"] + 1
    assert ended == open_ and holding_again == holding
    assert closed == {"greenlets": open_["greenlets"], "sockets": open_["sockets"] - 1}  # the calls' connection too


def test_sdk_errors_are_jsonrpc_codes(drive, http_servers) -> None:
    url = http_servers(SDK, "--json")
    out = drive(
        {"transport": "http", "target": url, "version": "2026-07-28", "ops": [["call", "nope/method"], ["tool", "no_such_tool", {}]]}
    )
    first = failures(out)[0]
    assert first[0] == "nope/method" and first[3] == "McpError('JSON-RPC error -32601 on nope/method: Method not found')"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--mode", "wrong-id"], "WrongId('reply id matches no request in flight')"),
        (["--mode", "invalid-json"], "InvalidJson('invalid JSON')"),
        (["--mode", "bad-sse"], "BadSse('SSE event is not JSON-RPC')"),
    ],
)
def test_broken_fake_server_failure_categories(drive, http_servers, args: list[str], expected: str) -> None:
    url = http_servers(FAKE, *args)
    out = drive({"transport": "http", "target": url, "ops": [["initialize"]], "timeout": 3})
    assert failures(out)[0][0] == "initialize" and failures(out)[0][3] == expected


def test_connection_refused_and_http_status(drive, http_servers) -> None:
    with refused_port() as port:
        out = drive({"transport": "http", "target": f"http://127.0.0.1:{port}/mcp", "ops": [["initialize"]], "timeout": 2})
    assert failures(out)[0][3] == "ConnectionFailure('connection error')"
    url = http_servers(SDK, "--json")
    # a request on a session the server never issued -> 4xx from the SDK
    out = drive({"transport": "http", "target": url, "ops": [["call", "tools/list"]]})
    assert failures(out)[0][3].startswith("HttpStatusError('HTTP 4")


def test_fake_server_modern_auto_over_http(drive, http_servers) -> None:
    url = http_servers(FAKE, "--mode", "modern")
    out = drive({"transport": "http", "target": url, "version": "auto", "ops": [["initialize"], ["tool", "echo", {"text": "a"}]]})
    assert out["era"] == "stateless" and not failures(out)


def test_bearer_token_and_timeout(drive, http_servers) -> None:
    url = http_servers(FAKE, "--token", "s3cret")
    out = drive({"transport": "http", "target": url, "token": "s3cret", "ops": [["initialize"], ["tool", "echo", {"text": "a"}]]})
    assert not failures(out) and out["initialized"] == [True]
    out = drive({"transport": "http", "target": url, "ops": [["initialize"]]})
    assert failures(out)[0][3] == "HttpStatusError('HTTP 401')"
    slow = http_servers(FAKE, "--delay-ms", "1500")
    out = drive({"transport": "http", "target": slow, "ops": [["call", "ping"]], "timeout": 0.3})
    assert failures(out)[0][3] == "RequestTimeout('timeout on ping')"
