"""The sans-IO ClientSession on canned bytes (no sockets, no gevent)."""

from __future__ import annotations

import base64
import json

import pytest

from mcpfast import core
from mcpfast.client import ClientSession, InvalidJson, McpError, ToolError, WrongId
from mcpfast.client.errors import UnexpectedReply
from mcpfast.client.session import MODERN_ERROR_CODES, encode_header_value


def reply(rid, result) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


def error(rid, code, message="x", data=None) -> bytes:
    e = {"code": code, "message": message}
    if data is not None:
        e["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": rid, "error": e}).encode()


INIT_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "s", "version": "1"},
}


def test_handshake_era_initialize_initialized_and_headers() -> None:
    s = ClientSession()
    assert s.era == "handshake" and s.needs_handshake
    p = s.initialize_request()
    msg = core.decode(p.data)
    assert (msg.id, msg.method) == (1, "initialize")
    assert msg.params == {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "mcpfast-swarm", "version": "0.1"},
    }
    assert s.http_headers(p) == {}  # nothing before the handshake
    ev = s.receive(reply(1, INIT_RESULT))
    assert ev.kind == "reply" and ev.reply.id == 1 and not ev.reply.is_error
    s.on_initialize_result(ev.reply)
    assert s.negotiated_version == "2025-11-25" and s.server_capabilities == {"tools": {"listChanged": True}}
    assert s.initialized_notification() == b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    assert not s.needs_handshake
    s.session_id = "abc"
    p2 = s.request("tools/call", {"name": "echo", "arguments": {}})
    assert p2.id == 2 and p2.stat_name == "tools/call:echo"
    assert s.http_headers(p2) == {"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": "abc"}
    assert b"_meta" not in p2.data


def test_counter_offer_older_version_and_bad_version() -> None:
    s = ClientSession()
    s.initialize_request()
    s.on_initialize_result(s.receive(reply(1, {**INIT_RESULT, "protocolVersion": "2025-03-26"})).reply)
    assert s.version == "2025-03-26"
    assert "MCP-Protocol-Version" not in s.http_headers()  # header exists from 2025-06-18 on
    s2 = ClientSession()
    s2.initialize_request()
    with pytest.raises(UnexpectedReply):
        s2.on_initialize_result(s2.receive(reply(1, {**INIT_RESULT, "protocolVersion": "1999-01-01"})).reply)


def test_stateless_era_meta_and_headers() -> None:
    s = ClientSession("2026-07-28", capabilities={"elicitation": {}})
    assert s.era == "stateless" and not s.needs_handshake
    p = s.request("tools/call", {"name": "echo", "arguments": {"text": "x"}}, progress=True)
    params = core.decode(p.data).params
    meta = params["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {}}
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcpfast-swarm"
    assert meta["progressToken"] == p.id
    assert params["arguments"] == {"text": "x"}
    assert s.http_headers(p) == {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
    r = s.request("resources/read", {"uri": "mem://ä"})
    assert r.stat_name == "resources/read"  # the uri stays out of the stats name
    assert s.http_headers(r)["Mcp-Name"] == "=?base64?" + base64.b64encode("mem://ä".encode()).decode() + "?="
    d = s.discover_request()
    assert core.decode(d.data).method == "server/discover"
    s.on_discover_result(
        s.receive(
            reply(
                d.id,
                {
                    "resultType": "complete",
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}},
                    "ttlMs": 0,
                    "cacheScope": "public",
                },
            )
        ).reply
    )
    assert s.server_capabilities == {"tools": {}}


def test_header_value_encoding() -> None:
    assert encode_header_value("echo") == "echo"
    for bad in (" lead", "trail ", "new\nline", "=?base64?abc?=", "ü"):
        v = encode_header_value(bad)
        assert v.startswith("=?base64?") and base64.b64decode(v[9:-2]).decode() == bad


def test_auto_detection_modern_retry_and_legacy() -> None:
    s = ClientSession("auto")
    assert s.era is None
    p = s.discover_request()
    assert "io.modelcontextprotocol/protocolVersion" in core.decode(p.data).params["_meta"]
    assert (
        s.detect(s.receive(reply(p.id, {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {}})).reply)
        == "modern"
    )
    assert s.era == "stateless"

    # a legacy server: any other error (not keyed on one code), or a timeout
    for answer in (error(1, -32601), error(1, -32600), error(1, -32602), None):
        s = ClientSession("auto")
        p = s.discover_request()
        r = s.receive(answer).reply if answer else None
        assert s.detect(r) == "legacy" and s.era == "handshake" and s.protocol_version == "2025-11-25"

    # HTTP 400 with an unrecognised or empty body: legacy
    s = ClientSession("auto")
    s.discover_request()
    assert s.detect(None, http_status=400, body=b"Bad Request: missing session") == "legacy"

    # -32022 listing only legacy versions: the server wants a handshake version
    s = ClientSession("auto")
    p = s.discover_request()
    r = s.receive(error(p.id, -32022, "unsupported", {"supported": ["2025-06-18"], "requested": "2026-07-28"})).reply
    assert s.detect(r) == "legacy" and s.protocol_version == "2025-06-18"

    # -32022 listing no shared version: an error, no fallback
    s = ClientSession("auto")
    p = s.discover_request()
    r = s.receive(error(p.id, -32022, "unsupported", {"supported": ["2099-01-01"]})).reply
    with pytest.raises(McpError) as info:
        s.detect(r)
    assert info.value.code == -32022
    assert -32020 in MODERN_ERROR_CODES


def test_error_reply_and_tool_error() -> None:
    s = ClientSession()
    p = s.request("tools/call", {"name": "echo"})
    r = s.receive(error(p.id, -32602, "bad params", {"why": 1})).reply
    assert r.is_error and r.code == -32602 and r.error["message"] == "bad params"
    exc = r.exception()
    assert isinstance(exc, McpError) and exc.code == -32602 and repr(exc) == "McpError('JSON-RPC error -32602 on tools/call: bad params')"
    with pytest.raises(McpError):
        r.raise_for_error()
    p = s.request("tools/call", {"name": "echo"})
    r = s.receive(reply(p.id, {"content": [], "isError": True})).reply
    assert r.is_tool_error and isinstance(r.exception(), ToolError)
    p = s.request("tools/call", {"name": "echo"})
    r = s.receive(reply(p.id, {"content": [{"type": "text", "text": '"isError"'}], "isError": False})).reply
    assert not r.is_tool_error and r.exception() is None


def test_wrong_id_and_invalid_json() -> None:
    s = ClientSession()
    p = s.request("ping")
    with pytest.raises(WrongId) as info:
        s.receive(reply(p.id + 7, {}))
    assert info.value.got == p.id + 7 and repr(info.value) == "WrongId('reply id matches no request in flight')"
    with pytest.raises(InvalidJson):
        s.receive(b'{"jsonrpc":"2.0","id":1,"result":{oops')
    with pytest.raises(InvalidJson):
        s.receive(b'{"jsonrpc":"1.0","method":"x"}')
    # the request is still in flight and its reply still matches
    assert s.receive(reply(p.id, {})).reply.id == p.id
    with pytest.raises(WrongId):
        s.receive(reply(p.id, {}))  # replies are consumed once


def test_server_requests_answered() -> None:
    s = ClientSession(
        server_replies={"sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}}
    )
    ev = s.receive(b'{"jsonrpc":"2.0","id":"s1","method":"ping"}')
    assert ev.kind == "server-request" and ev.response == b'{"jsonrpc":"2.0","id":"s1","result":{}}'
    ev = s.receive(b'{"jsonrpc":"2.0","id":5,"method":"roots/list"}')
    assert json.loads(ev.response) == {"jsonrpc": "2.0", "id": 5, "result": {"roots": []}}
    ev = s.receive(b'{"jsonrpc":"2.0","id":6,"method":"elicitation/create","params":{}}')
    assert json.loads(ev.response)["result"] == {"action": "decline"}
    ev = s.receive(b'{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}')
    assert json.loads(ev.response)["result"]["model"] == "m"
    ev = s.receive(b'{"jsonrpc":"2.0","id":8,"method":"unknown/thing"}')
    assert json.loads(ev.response)["error"]["code"] == -32601
    assert s.server_requests == 5
    s2 = ClientSession()
    ev = s2.receive(b'{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{}}')
    assert json.loads(ev.response)["error"]["code"] == -32601


def test_progress_counted_per_request_with_timestamps() -> None:
    s = ClientSession()
    a = s.request("tools/call", {"name": "stream", "arguments": {"count": 3}}, progress=True)
    b = s.request("tools/call", {"name": "stream"}, progress=True)
    for i, t in enumerate((1.0, 1.5, 2.25)):
        ev = s.receive(
            json.dumps(
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": a.id, "progress": i + 1, "total": 3}}
            ).encode(),
            now=t,
        )
        assert ev.kind == "notification" and ev.pending is a
    s.receive(
        json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": b.id, "progress": 1, "message": "m"}}
        ).encode(),
        now=9.0,
    )
    ev = s.receive(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":999,"progress":1}}')
    assert ev.pending is None  # unknown token: counted as a notification, tied to nothing
    r = s.receive(reply(a.id, {"content": []})).reply
    assert [(u.at, u.progress, u.total) for u in r.progress] == [(1.0, 1, 3), (1.5, 2, 3), (2.25, 3, 3)]
    assert b.progress[0].message == "m" and s.notifications == 5
    assert a.progress_token not in s._by_token  # forgotten with the reply


def test_cancel_and_mrtr_retry() -> None:
    s = ClientSession("2026-07-28")
    p = s.request("tools/call", {"name": "echo"})
    data = s.cancel(p, "timeout")
    assert json.loads(data) == {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": p.id, "reason": "timeout"}}
    assert p.id not in s.pending
    p = s.request("tools/call", {"name": "ask", "arguments": {}})
    r = s.receive(
        reply(
            p.id,
            {"resultType": "input_required", "requestState": "st", "inputRequests": {"k": {"method": "elicitation/create", "params": {}}}},
        )
    ).reply
    assert r.is_input_required
    retry = s.mrtr_retry(r, {"name": "ask", "arguments": {}})
    params = core.decode(retry.data).params
    assert retry.id != p.id and params["inputResponses"] == {"k": {"action": "decline"}} and params["requestState"] == "st"


def test_reset_keeps_ids_increasing_and_auto_reprobes() -> None:
    s = ClientSession("auto")
    p = s.discover_request()
    s.detect(None)
    assert s.era == "handshake"
    s.reset()
    assert s.era is None and s.session_id is None and not s.pending
    assert s.request("ping").id > p.id


def test_unsupported_version_rejected() -> None:
    with pytest.raises(ValueError):
        ClientSession("2020-01-01")


def test_sans_io_modules_do_not_import_gevent_or_locust() -> None:
    import subprocess
    import sys

    from _support import child_env

    code = (
        "import sys\n"
        "import mcpfast.client, mcpfast.client.session, mcpfast.client.base, mcpfast.client.errors\n"
        "print(sorted(m for m in ('locust', 'gevent', 'geventhttpclient') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=child_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_mrtr_retry_keeps_the_callers_params_and_replaces_the_state() -> None:
    s = ClientSession("2026-07-28", capabilities={"elicitation": {}})
    p = s.request("tools/call", {"name": "ask", "arguments": {"q": 1}}, progress=True)
    assert p.params == {"name": "ask", "arguments": {"q": 1}}  # without the added _meta
    first = s.receive(
        reply(
            p.id,
            {"resultType": "input_required", "requestState": "s1", "inputRequests": {"e": {"method": "elicitation/create", "params": {}}}},
        )
    ).reply
    retry = s.mrtr_retry(first, p.params, progress=True)
    assert retry.params == {"name": "ask", "arguments": {"q": 1}, "inputResponses": {"e": {"action": "decline"}}, "requestState": "s1"}
    assert retry.progress_token == retry.id and retry.id != p.id
    second = s.receive(
        reply(retry.id, {"resultType": "input_required", "requestState": "s2", "inputRequests": {"r": {"method": "roots/list"}}})
    ).reply
    again = s.mrtr_retry(second, retry.params)
    assert again.params["requestState"] == "s2" and again.params["inputResponses"] == {"r": {"roots": []}}
