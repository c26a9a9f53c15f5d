"""Existing framework apps served by mcpfast answer exactly as the framework's own server does.

Each test drives the framework's own server (its lowlevel server over memory streams, in
process) and mcpfast's adapter of the same app object with the same client messages, then
compares the two transcripts message by message: every reply, notification (progress, logs) and
server-to-client request (elicitation), in order; on handshake-era sessions and as 2026-07-28
stateless requests.

Normalised, and only these (docs/sdk-apps.md says why each differs):

* the ids of server-to-client requests (each server numbers its own; the framework starts at 1,
  mcpfast at 0) and of the client's answers to them;
* ``initialize``'s ``capabilities.logging``: the official SDK's handlers send
  ``notifications/message`` without declaring ``logging``; mcpfast declares it (the spec wants it
  of a server that logs). FastMCP declares it itself, so there nothing is normalised.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import anyio
import pytest
from _harness import framework_transcript, handshake, mcpfast_transcript, request

from mcpfast.adapters import servable

pytestmark = [
    pytest.mark.filterwarnings("ignore:The logging capability is deprecated"),
    pytest.mark.filterwarnings("ignore:The sampling capability is deprecated"),
    pytest.mark.filterwarnings("ignore:The roots capability is deprecated"),
]

ELICIT_ANSWER = {"action": "accept", "content": {"date": "monday", "seats": 2}}


SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "test-model"}
ROOTS = {"roots": [{"uri": "file:///work/project", "name": "project"}]}


def answer(method: str, params: Any) -> Any:
    """The test client: an accepted form, a sampled message, its roots."""
    return {"elicitation/create": ELICIT_ANSWER, "sampling/createMessage": SAMPLED, "roots/list": ROOTS}[method]


def _common(rid: int) -> list[dict[str, Any]]:
    """Requests both sample apps answer (same names, same arguments)."""
    calls = [
        ("tools/list", None),
        ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
        ("tools/call", {"name": "add", "arguments": {"a": "x"}}),  # the framework's validation error
        ("tools/call", {"name": "nope", "arguments": {}}),
        ("tools/call", {"name": "shout", "arguments": {"text": "hi"}}),
        ("tools/call", {"name": "fail", "arguments": {"reason": "boom"}}),
        ("tools/call", {"name": "slow_count", "arguments": {"steps": 3}, "_meta": {"progressToken": "p1"}}),
        ("tools/call", {"name": "slow_count", "arguments": {"steps": 1}}),  # no progress token
        ("tools/call", {"name": "whoami", "arguments": {}}),
        ("tools/call", {"name": "read_config", "arguments": {}}),
        ("tools/call", {"name": "book", "arguments": {}}),  # elicitation
        ("resources/list", None),
        ("resources/templates/list", None),
        ("resources/read", {"uri": "config://app"}),
        ("resources/read", {"uri": "users://7/profile"}),
        ("resources/read", {"uri": "nope://x"}),
        ("prompts/list", None),
        ("prompts/get", {"name": "review", "arguments": {"code": "x=1"}}),
        ("prompts/get", {"name": "review", "arguments": {"code": "x", "language": "rust"}}),
        ("prompts/get", {"name": "nope"}),
        ("prompts/get", {"name": "review", "arguments": {}}),
        ("ping", None),
    ]
    calls += [
        ("tools/call", {"name": "refuse", "arguments": {"what": "that"}}),  # ToolError: an error result
        ("resources/read", {"uri": "items://3"}),
        ("resources/read", {"uri": "items://missing"}),  # ResourceError
        ("resources/read", {"uri": "items://broken"}),  # a crash
    ]
    return [request(rid + i, method, params) for i, (method, params) in enumerate(calls)]


SDK_ONLY = [
    request(100, "tools/call", {"name": "weather", "arguments": {"city": "Wien"}}),
    request(101, "tools/call", {"name": "unstructured", "arguments": {"n": 2}}),
    request(102, "resources/read", {"uri": "data://bytes"}),
    request(103, "prompts/get", {"name": "dialogue", "arguments": {"topic": "t"}}),
    request(104, "completion/complete", {"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "language", "value": "p"}}),
    request(
        105,
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "users://{user_id}/profile"},
            "argument": {"name": "user_id", "value": ""},
        },
    ),
    request(106, "completion/complete", {"ref": {"type": "ref/prompt", "name": "review"}, "argument": {"name": "code", "value": ""}}),
    request(107, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2, "extra": True}}),
    request(108, "tools/call", {"name": "summarize", "arguments": {"text": "a long text"}}),  # sampling, then roots
    request(109, "tools/call", {"name": "refuse", "arguments": {"what": "protocol"}}),  # MCPError: a JSON-RPC error
    request(110, "tools/call", {"name": "pixel", "arguments": {}}),
]

FASTMCP_ONLY = [
    request(100, "tools/call", {"name": "midpoint", "arguments": {"a": {"x": 0, "y": 0}, "b": {"x": 2, "y": 4}}}),
    request(101, "tools/call", {"name": "listing", "arguments": {"n": 2}}),
    request(102, "logging/setLevel", {"level": "warning"}),
    request(103, "tools/call", {"name": "slow_count", "arguments": {"steps": 2}}),  # only the warning goes out now
    request(104, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2, "extra": True}}),
    request(105, "tools/call", {"name": "detailed", "arguments": {}}),
]


def normalise(transcript: list[dict[str, Any]], *, logging_declared_by_framework: bool) -> list[dict[str, Any]]:
    out = copy.deepcopy(transcript)
    asked = 0
    for message in out:
        if "method" in message and "id" in message:  # a server-to-client request: numbered by each server
            message["id"] = f"server-request-{asked}"
            asked += 1
        if message.get("id") == 0 and "result" in message and not logging_declared_by_framework:
            message["result"]["capabilities"].pop("logging", None)
    return out


def compare(framework: list[dict[str, Any]], ours: list[dict[str, Any]]) -> None:
    for i, (theirs, mine) in enumerate(zip(framework, ours, strict=False)):
        assert mine == theirs, f"message {i} differs:\n framework: {json.dumps(theirs)}\n mcpfast:   {json.dumps(mine)}"
    assert len(ours) == len(framework), f"{len(framework)} messages from the framework, {len(ours)} from mcpfast"


def transcripts(
    app: Any, lowlevel: Any, messages: list[dict[str, Any]], **options: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    theirs = anyio.run(framework_transcript, lowlevel, messages, answer)
    server = servable(app, **options)
    ours = asyncio.run(mcpfast_transcript(server, messages, answer))
    return theirs, ours


@pytest.mark.parametrize(
    ("version", "inline"), [("2025-11-25", False), ("2025-06-18", False), ("2025-11-25", True)], ids=["2025-11-25", "2025-06-18", "inline"]
)
def test_sdk_app_answers_as_the_sdk_does(version: str, inline: bool) -> None:
    # inline: the plain def tools (add, shout, fail's siblings...) run on the event loop, the rest as usual.
    import sdk_app

    messages = handshake(version, {"elicitation": {}, "sampling": {}, "roots": {}}) + _common(1) + SDK_ONLY
    before = dict(sdk_app.STATE)
    theirs, ours = transcripts(sdk_app.mcp, sdk_app.mcp._lowlevel_server, messages, inline_sync_tools=inline)
    # Once each: the framework's own run and mcpfast's start/stop both went through the lifespan.
    assert sdk_app.STATE == {"entered": before["entered"] + 2, "exited": before["exited"] + 2}
    compare(normalise(theirs, logging_declared_by_framework=False), normalise(ours, logging_declared_by_framework=False))
    _check_substance(ours)
    # What the comparison covered is what the app does (a transcript of errors would match too).
    by_id = {m["id"]: m for m in ours if "method" not in m}
    assert by_id[100]["result"]["structuredContent"] == {"city": "Wien", "celsius": 21.5, "windy": True}
    assert by_id[104]["result"]["completion"]["values"] == ["python", "perl"]
    assert by_id[0]["result"]["capabilities"]["logging"] == {}
    assert by_id[109]["error"]["code"] == -32042 and by_id[110]["result"]["content"][0]["type"] == "image"
    assert by_id[108]["result"]["structuredContent"] == {"result": "short (test-model; roots: file:///work/project)"}
    asked = [m["method"] for m in ours if "method" in m and "id" in m]
    assert asked == ["elicitation/create", "sampling/createMessage", "roots/list"]


def test_fastmcp_app_answers_as_fastmcp_does() -> None:
    pytest.importorskip("fastmcp", reason="the sdk extra: pip install 'mcpfast[sdk]'")
    import fastmcp_app

    messages = handshake("2025-11-25", {"elicitation": {}}) + _common(1) + FASTMCP_ONLY
    theirs, ours = transcripts(fastmcp_app.mcp, fastmcp_app.mcp._mcp_server, messages)
    compare(normalise(theirs, logging_declared_by_framework=True), normalise(ours, logging_declared_by_framework=True))
    _check_substance(ours)
    by_id = {m["id"]: m for m in ours if "method" not in m}
    assert by_id[100]["result"]["structuredContent"] == {"x": 1.0, "y": 2.0}
    assert by_id[0]["result"]["serverInfo"] == {"name": "fastmcp-sample", "version": "1.2.3"}
    assert by_id[105]["result"]["_meta"] == {"source": "test"}


STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "parity-client", "version": "1.0"},
}


def stateless(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same requests as 2026-07-28 stateless ones (each carries its envelope in ``_meta``)."""
    out = []
    for message in messages:
        message = copy.deepcopy(message)
        params = message.setdefault("params", {})
        params["_meta"] = {**params.get("_meta", {}), **STATELESS_META}
        out.append(message)
    return out


@pytest.mark.parametrize("framework", ["sdk", "fastmcp"])
def test_stateless_requests_are_answered_as_the_framework_does(framework: str) -> None:
    # 2026-07-28: no handshake; results carry resultType and the serverInfo stamp; a handler
    # that asks the client (book: elicitation) fails as under the framework, with no back channel.
    if framework == "sdk":
        import sdk_app

        app, lowlevel, extra = sdk_app.mcp, sdk_app.mcp._lowlevel_server, SDK_ONLY
    else:
        pytest.importorskip("fastmcp")
        import fastmcp_app

        app, lowlevel, extra = fastmcp_app.mcp, fastmcp_app.mcp._mcp_server, FASTMCP_ONLY[:2]
    messages = stateless([m for m in _common(1) + extra if m["method"] != "ping"])
    theirs, ours = transcripts(app, lowlevel, messages)
    compare(theirs, ours)
    by_id = {m["id"]: m for m in ours if "method" not in m}
    assert by_id[2]["result"]["resultType"] == "complete" and by_id[2]["result"]["structuredContent"] == {"result": 3}
    assert by_id[9]["result"]["structuredContent"]["client"] == "parity-client"


def _check_substance(ours: list[dict[str, Any]]) -> None:
    by_id = {m["id"]: m for m in ours if "method" not in m}
    assert by_id[2]["result"]["structuredContent"] == {"result": 3}
    assert by_id[3]["result"]["isError"] is True
    assert by_id[4]["result"]["isError"] is True
    assert by_id[6]["result"]["isError"] is True
    progress = [m["params"] for m in ours if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3] and {p["progressToken"] for p in progress} == {"p1"}
    assert any(m.get("method") == "notifications/message" for m in ours)
    whoami = by_id[9]["result"]["structuredContent"]
    assert whoami["client"] == "parity-client" and whoami["lifespan"] == "hello from the lifespan" and whoami["request_id"] == "9"
    assert by_id[10]["result"]["structuredContent"] == {"result": '{"debug": false}'}
    assert next(m["method"] for m in ours if "method" in m and "id" in m) == "elicitation/create"
    assert by_id[11]["result"]["structuredContent"] == {"result": "booked 2 on monday"}
    assert by_id[15]["result"]["contents"][0]["text"] == "profile of 7"
    assert "error" in by_id[16] and "error" in by_id[20] and "error" in by_id[21]
    assert by_id[23]["result"]["isError"] is True and by_id[24]["result"]["contents"][0]["text"] == "item 3"
    assert "error" in by_id[25] and "error" in by_id[26]
