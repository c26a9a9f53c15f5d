"""``tools/call`` on an adapted FastMCP app: the short way (FastMCP's lookup and tool run, without
its middleware chain and dispatch wrappers) answers exactly as FastMCP's own server, and only the
calls it can not judge take FastMCP's handler.

Each test drives FastMCP's own server and mcpfast's adapter of the same app with the same
messages and compares the transcripts message by message (``test_parity`` says how). Which calls
took FastMCP's handler is read off ``FastMCP.call_tool``, which the short way never calls.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from _harness import framework_transcript, handshake, mcpfast_transcript, request

pytest.importorskip("fastmcp", reason="the sdk extra: pip install 'mcpfast[sdk]'")

import fastmcp_edges
from fastmcp import FastMCP
from test_parity import compare, normalise, stateless

from mcpfast.adapters import servable


def call(rid: int, name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return request(rid, "tools/call", {"name": name, "arguments": arguments if arguments is not None else {}, **extra})


@pytest.fixture
def by_handler(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the tools/call requests that went through ``FastMCP.call_tool`` (from the
    handler, not from a tool), recorded while mcpfast serves."""
    names: list[str] = []
    original = FastMCP.call_tool

    async def recording(self: FastMCP[Any], name: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("run_middleware", True):
            names.append(name)
        return await original(self, name, *args, **kwargs)

    monkeypatch.setattr(FastMCP, "call_tool", recording)
    yield names


def served(make: Callable[[], FastMCP[Any]], messages: list[dict[str, Any]], by_handler: list[str]) -> list[dict[str, Any]]:
    """Both transcripts, each from an app of its own (``make()``: state such as visibility rules
    starts empty on both), compared; mcpfast's returned (``by_handler`` then holds mcpfast's calls only)."""
    theirs = anyio.run(framework_transcript, make()._mcp_server, messages)
    by_handler.clear()
    ours = asyncio.run(mcpfast_transcript(servable(make()), messages))
    compare(normalise(theirs, logging_declared_by_framework=True), normalise(ours, logging_declared_by_framework=True))
    return ours


def results(transcript: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for m in transcript if "method" not in m}


@pytest.mark.parametrize("era", ["handshake", "stateless"])
def test_the_short_way_answers_as_fastmcp_does(era: str, by_handler: list[str]) -> None:
    calls = [
        call(1, "versioned", {"x": 1}),  # the highest version
        call(2, "versioned", {"x": 1}, _meta={"fastmcp": {"version": "1"}}),
        call(3, "who"),
        call(4, "count_up", {"n": 3}),
        call(5, "doubled", {"x": 21}),
        call(6, "doubled", {"x": "many"}),  # bad arguments
        call(7, "body_invalid"),
        call(8, "rate_limited"),
        call(9, "upstream_slow"),
        call(10, "upstream_error"),
        call(11, "needs_roots"),
        call(12, "crash", {"reason": "disk on fire"}),
        call(13, "refused", {"what": "that"}),
        call(14, "forbidden"),
        call(15, "nope"),
        call(16, "secret"),
        call(17, "hide_secret"),
        call(18, "secret"),  # hidden for this session now
        call(19, "versioned", {"x": 2}, _meta={"fastmcp": {"version": "9"}}),
        request(20, "completion/complete", {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "style", "value": "p"}}),
        request(21, "completion/complete", {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": ""}}),
        request(22, "prompts/get", {"name": "greet", "arguments": {"name": "Ada", "style": "formal"}}),
    ]
    if era == "stateless":
        # Visibility rules of a stateless request (kept per process in process, none over HTTP)
        # are test_fastmcp_transports's; the change notification FastMCP's in-memory server
        # writes into such a request goes over subscriptions/listen only at 2026-07-28.
        calls = [c for c in calls if c["id"] not in (17, 18)]
    messages = handshake("2025-11-25") + calls if era == "handshake" else stateless(calls)
    ours = results(served(fastmcp_edges.plain, messages, by_handler))
    # What the comparison covered is what the app does, not a run of identical errors.
    assert ours[1]["result"]["content"][0]["text"] == "v2 got 1"
    assert ours[2]["result"]["content"][0]["text"] == "v1 got 1"
    assert ours[3]["result"]["content"][0]["text"] == "request 3 of fastmcp-edges"
    assert ours[5]["result"]["structuredContent"] == {"result": 42}
    assert ours[6]["result"]["isError"] is True
    assert ours[8]["result"]["content"][0]["text"] == "Rate limited by upstream API, please retry later"
    assert ours[9]["result"]["content"][0]["text"] == "Upstream request timed out, please retry"
    assert ours[11]["error"]["code"] == -32021
    assert ours[12]["result"]["content"][0]["text"] == "Error calling tool 'crash': disk on fire"
    assert ours[16]["result"]["content"][0]["text"] == "the secret"
    assert ours[20]["result"]["completion"]["values"] == ["plain", "pirate"]
    assert ours[21]["result"]["completion"]["values"] == []
    # Only what the lookup turned down went to FastMCP's handler (which then says why).
    if era == "handshake":
        assert ours[18]["result"]["content"][0]["text"] == "Unknown tool: 'secret'"
        assert by_handler == ["forbidden", "nope", "secret", "versioned"]
    else:
        assert ours[3]["result"]["resultType"] == "complete"
        assert by_handler == ["forbidden", "nope", "versioned"]


def test_masking_and_a_tool_disabled_server_wide(by_handler: list[str]) -> None:
    messages = handshake("2025-06-18") + [
        call(1, "crash_masked", {"reason": "secret detail"}),
        call(2, "shown", {"x": 1}),
        call(3, "switched_off"),
    ]
    ours = results(served(fastmcp_edges.masked, messages, by_handler))
    assert ours[1]["result"]["content"][0]["text"] == "Error calling tool 'crash_masked'"
    assert ours[2]["result"]["structuredContent"] == {"result": 2}
    assert by_handler == ["switched_off"]


def test_injected_tools_and_middleware_on_tools_call_take_fastmcps_handler(by_handler: list[str]) -> None:
    messages = handshake("2025-11-25") + [call(1, "injected", {"x": 1}), call(2, "native", {"x": 2})]
    ours = results(served(fastmcp_edges.composed, messages, by_handler))
    assert ours[1]["result"]["content"][0]["text"] == "injected got 1"
    assert by_handler == ["injected", "native"]


def test_middleware_added_after_adapting_is_run(by_handler: list[str]) -> None:
    app = FastMCP("fastmcp-late-middleware")

    @app.tool
    def echo(text: str) -> str:
        return text

    messages = handshake("2025-11-25") + [call(1, "echo", {"text": "a"}), call(2, "echo", {"text": "b"})]
    server = servable(app)
    ours: list[dict[str, Any]] = []

    async def run() -> None:
        await server.start()
        conn = server.connect(records=False)
        try:
            for message in messages:
                conn.feed(json.dumps(message).encode())
                await asyncio.sleep(0.05)
                if message.get("id") == 1:
                    app.add_middleware(fastmcp_edges.Tagging())
                ours.extend(json.loads(data) for data in conn.session.data_to_send())
        finally:
            await conn.close()
            await server.stop()

    asyncio.run(run())
    replies = results(ours)
    assert "_meta" not in replies[1]["result"] or "tagged" not in replies[1]["result"]["_meta"]
    assert replies[2]["result"]["_meta"]["tagged"] is True
    assert by_handler == ["echo"]


def test_telemetry_that_acts_takes_fastmcps_handler(by_handler: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An OpenTelemetry SDK set as tracer provider records FastMCP's span of each call; in
    ``propagation_only`` mode the span attaches the caller's context. Either way the call takes
    FastMCP's handler; with telemetry ``off`` nothing of it acts, so the short way stays."""
    import fastmcp
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    messages = handshake("2025-11-25") + [call(1, "versioned", {"x": 1}), call(2, "who")]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # The global provider can be set once a process: looked up through the API's own function instead.
    with monkeypatch.context() as patched:
        patched.setattr(trace, "get_tracer_provider", lambda: provider)
        served(fastmcp_edges.plain, messages, by_handler)
        assert by_handler == ["versioned", "who"]
        assert any(span.name == "tools/call versioned" for span in exporter.get_finished_spans())
    with monkeypatch.context() as patched:
        patched.setattr(fastmcp.settings, "telemetry_mode", "propagation_only")
        served(fastmcp_edges.plain, messages, by_handler)
        assert by_handler == ["versioned", "who"]
    with monkeypatch.context() as patched:
        patched.setattr(fastmcp.settings, "telemetry_mode", "off")
        served(fastmcp_edges.plain, messages, by_handler)
        assert by_handler == []
