"""mcpfast.protocol.http: the Streamable HTTP wire rules the client and the server share."""

from __future__ import annotations

from typing import Any

import pytest

from mcpfast import core
from mcpfast.protocol import http as wire
from mcpfast.protocol import methods as m
from mcpfast.protocol.versions import HANDSHAKE_VERSIONS

META_VERSION = "io.modelcontextprotocol/protocolVersion"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("echo", id="plain"),
        pytest.param(" lead", id="leading-space"),
        pytest.param("trail ", id="trailing-space"),
        pytest.param("new\nline", id="crlf-injection"),
        pytest.param("=?base64?abc?=", id="looks-like-the-sentinel"),
        pytest.param("ü-mem://ä", id="non-ascii"),
        pytest.param("", id="empty"),
    ],
)
def test_header_value_round_trips(value: str) -> None:
    encoded = wire.encode_header_value(value)
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded) and "\n" not in encoded
    assert wire.decode_header_value(encoded.encode("ascii")) == value
    assert wire.decode_header_value(encoded) == value


def test_safe_values_travel_bare_and_others_wrapped() -> None:
    assert wire.encode_header_value("tools/call") == "tools/call"
    assert wire.encode_header_value("é").startswith("=?base64?")


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"=?base64?not base64!?=", id="bad-base64"),
        pytest.param(b"=?base64?/w==?=", id="not-utf8"),
        pytest.param(b"a\x01b", id="control-char"),
        pytest.param(b"caf\xc3\xa9", id="raw-non-ascii"),
    ],
)
def test_invalid_header_values_decode_to_none(raw: bytes) -> None:
    assert wire.decode_header_value(raw) is None


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        pytest.param(m.TOOLS_CALL, {"name": "echo", "arguments": {}}, "echo", id="tools-call"),
        pytest.param(m.PROMPTS_GET, {"name": "greet"}, "greet", id="prompts-get"),
        pytest.param(m.RESOURCES_READ, {"uri": "mem://ä b"}, "mem://ä b", id="resources-read"),
        pytest.param(m.TOOLS_LIST, {}, None, id="unnamed"),
        # Not 2026-07-28 methods (replaced by subscriptions/listen): no Mcp-Name.
        pytest.param(m.RESOURCES_SUBSCRIBE, {"uri": "mem://x"}, None, id="resources-subscribe"),
        pytest.param(m.RESOURCES_UNSUBSCRIBE, {"uri": "mem://x"}, None, id="resources-unsubscribe"),
    ],
)
def test_client_headers_pass_the_server_check(method: str, params: dict[str, Any], name: str | None) -> None:
    assert wire.name_of(method, params) == name
    sent = wire.stateless_request_headers("2026-07-28", method, name)
    received = {k.lower().encode(): v.encode("ascii") for k, v in sent.items()}
    assert wire.check_request_headers(received, method, params.get, "2026-07-28") is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        pytest.param({b"mcp-protocol-version": None}, "missing MCP-Protocol-Version", id="no-version"),
        pytest.param({b"mcp-protocol-version": b"2025-11-25"}, "does not match params._meta", id="version-mismatch"),
        pytest.param({b"mcp-method": None}, "missing Mcp-Method", id="no-method"),
        pytest.param({b"mcp-method": b"tools/list"}, "Mcp-Method header does not match", id="method-mismatch"),
        pytest.param({b"mcp-name": None}, "missing Mcp-Name", id="no-name"),
        pytest.param({b"mcp-name": b"other"}, "Mcp-Name header does not match params.name", id="name-mismatch"),
    ],
)
def test_server_check_names_what_is_wrong(change: dict[bytes, bytes | None], problem: str) -> None:
    headers: dict[bytes, bytes] = {b"mcp-protocol-version": b"2026-07-28", b"mcp-method": b"tools/call", b"mcp-name": b"echo"}
    for key, value in change.items():
        if value is None:
            del headers[key]
        else:
            headers[key] = value
    found = wire.check_request_headers(headers, m.TOOLS_CALL, {"name": "echo"}.get, "2026-07-28")
    assert found is not None and problem in found


def test_param_headers_round_trip() -> None:
    schema = {
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
        }
    }
    annotations = wire.param_annotations(schema)
    assert annotations == [(b"mcp-param-region", ("region",)), (b"mcp-param-n", ("opts", "n"))]
    arguments = {"region": "é", "opts": {"n": 7}}
    headers = {b"mcp-param-region": wire.encode_header_value("é").encode(), b"mcp-param-n": b"07"}
    assert wire.check_param_headers(annotations, arguments, headers) is None
    assert "does not match" in (wire.check_param_headers(annotations, {**arguments, "region": "x"}, headers) or "")
    assert "absent" in (wire.check_param_headers(annotations, {"opts": {"n": 7}}, headers) or "")


@pytest.mark.parametrize(
    ("code", "status"),
    [
        pytest.param(-32601, 404, id="method-not-found"),
        pytest.param(-32602, 400, id="invalid-params"),
        pytest.param(-32020, 400, id="header-mismatch"),
        pytest.param(-32021, 400, id="missing-capability"),
        pytest.param(-32022, 400, id="unsupported-version"),
        pytest.param(-32603, 200, id="internal-error"),
        pytest.param(None, 200, id="result"),
    ],
)
def test_status_of_a_2026_error(code: int | None, status: int) -> None:
    assert wire.status_for_error(code) == status


@pytest.mark.parametrize(
    ("accept", "json", "sse", "ok"),
    [
        pytest.param(wire.ACCEPT_BOTH.encode(), True, True, True, id="both"),
        pytest.param(b"application/json", True, True, False, id="json-only-for-post"),
        pytest.param(b"text/event-stream", False, True, True, id="sse-for-get"),
        pytest.param(b"*/*", True, True, True, id="wildcard"),
        pytest.param(b"application/*;q=1, text/*", True, True, True, id="ranges"),
        pytest.param(None, False, True, False, id="absent"),
    ],
)
def test_accept(accept: bytes | None, json: bool, sse: bool, ok: bool) -> None:
    assert wire.accepts(accept, json, sse) is ok


def test_content_type_and_origin() -> None:
    assert wire.is_json(b"application/json") and wire.is_json("Application/JSON; charset=utf-8")
    assert not wire.is_json(b"text/plain") and not wire.is_json(None)
    assert wire.origin_allowed(b"http://localhost:5173", frozenset())
    assert wire.origin_allowed(b"http://[::1]:80", frozenset())
    assert not wire.origin_allowed(b"http://evil.example.com", frozenset())
    assert wire.origin_allowed(b"https://app.example.com/", frozenset({"https://app.example.com"}))
    assert wire.origin_allowed(b"http://evil.example.com", frozenset(), any_origin=True)


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_version_header_from_2025_06_18(version: str) -> None:
    assert wire.sends_version_header(version) is (version >= "2025-06-18")


def test_client_session_uses_the_shared_rules() -> None:
    from mcpfast.client.session import ClientSession

    s = ClientSession(protocol_version="2026-07-28")
    s.era = "stateless"
    pending = s.request(m.RESOURCES_READ, {"uri": "mem://ä"})
    headers = s.http_headers(pending)
    received = {k.lower().encode(): v.encode("ascii") for k, v in headers.items()}
    decoded = core.decode(pending.data)
    body_version = decoded.params["_meta"][META_VERSION]
    assert wire.check_request_headers(received, m.RESOURCES_READ, decoded.param, body_version) is None
