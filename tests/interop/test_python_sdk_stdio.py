"""The official MCP Python SDK client drives ``mcpfast serve --transport stdio``.

The server runs behind two ``tee``s so that every line it writes can be checked against the
JSON Schema of the negotiated protocol version after each test.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest
from mcp import types

from mcpfast.protocol import TranscriptValidator

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(30),
    # The SDK warns on every feature 2026-07-28 deprecates, even in the 2025 sessions tested here.
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def check_transcript(inlog: Path, outlog: Path) -> int:
    """Validate every server line against the negotiated version's schema; returns the count."""
    checker = TranscriptValidator()
    # The order of the two logs is lost, but each reply follows its request, so reading all
    # client lines first is enough to correlate ids with methods (ids are never reused here).
    for line in inlog.read_bytes().splitlines():
        if line.strip():
            checker.client(line)
    for line in outlog.read_bytes().splitlines():
        assert line.strip(), "blank line on stdout"
        checker.server(line)
    return checker.checked


def server_params(tmp_path: Path, *serve_args: str) -> mcp.StdioServerParameters:
    inlog, outlog = tmp_path / "client.jsonl", tmp_path / "server.jsonl"
    serve = " ".join([sys.executable, "-m", "mcpfast", "serve", "--transport", "stdio", *serve_args])
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    if "MCPFAST_CORE" in os.environ:
        env["MCPFAST_CORE"] = os.environ["MCPFAST_CORE"]
    return mcp.StdioServerParameters(command="sh", args=["-c", f"tee {inlog} | {serve} | tee {outlog}"], env=env, cwd=str(ROOT))


@asynccontextmanager
async def connect(tmp_path: Path, *serve_args: str, **session_kwargs: Any) -> AsyncIterator[mcp.ClientSession]:
    inlog, outlog = tmp_path / "client.jsonl", tmp_path / "server.jsonl"
    async with mcp.stdio_client(server_params(tmp_path, *serve_args)) as (read, write):
        async with mcp.ClientSession(read, write, **session_kwargs) as session:
            yield session
    assert check_transcript(inlog, outlog) > 0


async def test_initialize_and_demo_tools(tmp_path: Path) -> None:
    async with connect(tmp_path) as session:
        init = await session.initialize()
        assert init.protocol_version == "2025-11-25"
        assert init.server_info.name == "mcpfast-demo"
        assert init.capabilities.tools is not None and init.capabilities.completions is not None
        await session.send_ping()
        result = await session.call_tool("echo", {"text": "héllo"})
        assert result.content[0].text == "héllo" and not result.is_error
        result = await session.call_tool("add", {"a": 2, "b": 3.5})
        assert result.structured_content == {"sum": 5.5}
        assert result.content[0].text == '{"sum":5.5}'


async def test_progress_notifications(tmp_path: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect(tmp_path) as session:
        await session.initialize()
        result = await session.call_tool("stream", {"n": 4}, progress_callback=on_progress)
        assert result.content[0].text == "streamed 4 steps"
    assert [p for p, _, _ in seen] == [1, 2, 3, 4]
    assert seen[0][1] == 4 and seen[0][2] == "step 1 of 4"


async def test_pagination_of_every_list(tmp_path: Path) -> None:
    async with connect(tmp_path, "--app", "interop_app:app") as session:
        await session.initialize()
        names, cursor, pages = [], None, 0
        while True:
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            names += [t.name for t in page.tools]
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        assert names == ["echo", "add", "touch", "t3", "t4", "t5", "roots", "slow", "ask", "login", "pay"] and pages == 6
        add = next(iter((await session.list_tools()).tools[1:2]))
        assert add.output_schema == {"type": "object", "properties": {"result": {"type": "number"}}, "required": ["result"]}
        first = await session.list_resources()
        second = await session.list_resources(params=types.PaginatedRequestParams(cursor=first.next_cursor))
        assert [r.uri for r in first.resources + second.resources] == ["mem://r0", "mem://r1", "mem://r2"]
        templates = await session.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["mem://items/{id}"]
        prompts = await session.list_prompts()
        assert [p.name for p in prompts.prompts] == ["p1", "p2"] and prompts.next_cursor
        with pytest.raises(mcp.MCPError) as info:
            await session.list_tools(params=types.PaginatedRequestParams(cursor="bogus"))
        assert info.value.error.code == -32602


async def test_resources_prompts_completion(tmp_path: Path) -> None:
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    async with connect(tmp_path, "--app", "interop_app:app", message_handler=on_message) as session:
        await session.initialize()
        read = await session.read_resource("mem://r1")
        assert read.contents[0].text == "resource 1"
        read = await session.read_resource("mem://items/a%20b")
        assert read.contents[0].text == "item a b"
        with pytest.raises(mcp.MCPError) as info:
            await session.read_resource("mem://missing")
        assert info.value.error.code == -32002
        await session.subscribe_resource("mem://r0")
        assert (await session.call_tool("touch", {"uri": "mem://r0"})).structured_content == {"result": 1}
        assert (await session.call_tool("touch", {"uri": "mem://r1"})).structured_content == {"result": 0}
        await session.unsubscribe_resource("mem://r0")
        assert (await session.call_tool("touch", {"uri": "mem://r0"})).structured_content == {"result": 0}
        with pytest.raises(mcp.MCPError) as info:
            await session.subscribe_resource("mem://missing")
        assert info.value.error.code == -32002
        prompt = await session.get_prompt("p1", {"topic": "rust"})
        assert prompt.messages[0].content.text == "Talk about rust"
        with pytest.raises(mcp.MCPError) as info:
            await session.get_prompt("p1", {})
        assert info.value.error.code == -32602
        done = await session.complete(types.PromptReference(type="ref/prompt", name="p1"), {"name": "topic", "value": "x"})
        assert len(done.completion.values) == 100 and done.completion.has_more
    assert updates == ["mem://r0"]


async def test_logging_and_errors(tmp_path: Path) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with connect(tmp_path, "--fixture", "conformance", logging_callback=on_log) as session:
        await session.initialize()
        await session.set_logging_level("debug")
        result = await session.call_tool("test_tool_with_logging", {})
        assert not result.is_error
        assert [entry.data for entry in logs] == ["Tool execution started", "Tool processing data", "Tool execution completed"]
        result = await session.call_tool("test_error_handling", {})
        assert result.is_error and "intentionally" in result.content[0].text
        result = await session.call_tool("test_sampling", {})  # missing required argument
        assert result.is_error and "prompt" in result.content[0].text
        with pytest.raises(mcp.MCPError) as info:
            await session.call_tool("no_such_tool", {})
        assert info.value.error.code == -32602


async def test_conformance_fixture_content(tmp_path: Path) -> None:
    async with connect(tmp_path, "--fixture", "conformance") as session:
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert all(t.description and t.input_schema for t in tools.values())
        assert tools["json_schema_2020_12_tool"].input_schema["$defs"]["address"]["type"] == "object"
        kinds = [c.type for c in (await session.call_tool("test_multiple_content_types", {})).content]
        assert kinds == ["text", "image", "resource"]
        audio = (await session.call_tool("test_audio_content", {})).content[0]
        assert audio.mime_type == "audio/wav"
        read = await session.read_resource("test://template/123/data")
        assert "123" in read.contents[0].text
        prompt = await session.get_prompt("test_prompt_with_embedded_resource", {"resourceUri": "test://example-resource"})
        assert prompt.messages[0].content.resource.uri == "test://example-resource"
        done = await session.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"), {"name": "arg1", "value": "test"}
        )
        assert done.completion.values


async def test_sampling_elicitation_roots_callbacks(tmp_path: Path) -> None:
    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        assert params.max_tokens == 5
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="sampled!"), model="m")

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert params.message == "Name?"
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/a"), types.Root(uri="file:///tmp/b")])

    async with connect(
        tmp_path,
        "--app",
        "interop_app:app",
        sampling_callback=sampling,
        elicitation_callback=elicitation,
        list_roots_callback=roots,
    ) as session:
        await session.initialize()
        result = await session.call_tool("ask", {})
        assert json.loads(result.content[0].text) == {
            "sampled": "sampled!",
            "elicited": {"action": "accept", "content": {"name": "Ada"}},
            "roots": 2,
        }
        result = await session.call_tool("roots", {})
        assert result.structured_content == {"result": ["file:///tmp/a", "file:///tmp/b"]}


async def test_roots_list_changed_reaches_the_app_hook(tmp_path: Path) -> None:
    current = ["file:///tmp/a"]
    logs: list[Any] = []

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=u) for u in current])

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with connect(tmp_path, "--app", "interop_app:app", list_roots_callback=roots, logging_callback=on_log) as session:
        await session.initialize()
        current.append("file:///tmp/new")
        await session.send_roots_list_changed()
        with anyio.fail_after(5):
            while not logs:
                await anyio.sleep(0.01)
        assert logs == [{"rootsChanged": ["file:///tmp/a", "file:///tmp/new"]}]


async def test_url_mode_elicitation(tmp_path: Path) -> None:
    asked: list[Any] = []

    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept")

    async with connect(tmp_path, "--app", "interop_app:app", elicitation_callback=elicitation) as session:
        await session.initialize()  # the SDK declares elicitation {form, url}
        result = await session.call_tool("login", {})
        assert result.content[0].text == "accept"
        assert asked[0].mode == "url" and asked[0].url == "https://example.com/login" and asked[0].elicitation_id == "login-1"
        with pytest.raises(mcp.MCPError) as info:
            await session.call_tool("pay", {})
        assert info.value.error.code == -32042
        assert info.value.error.data["elicitations"][0]["elicitationId"] == "pay-1"
    # The transcript check (every server line against the 2025-11-25 schema) ran on exit,
    # notifications/elicitation/complete included.


async def test_server_requests_need_client_capabilities(tmp_path: Path) -> None:
    async with connect(tmp_path, "--app", "interop_app:app") as session:  # no callbacks: nothing declared
        await session.initialize()
        with pytest.raises(mcp.MCPError) as info:
            await session.call_tool("roots", {})
        assert info.value.error.code == -32021


async def test_conformance_elicitation_and_sampling(tmp_path: Path) -> None:
    asked: list[dict[str, Any]] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="42"), model="m")

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.requested_schema)
        return types.ElicitResult(action="decline")

    async with connect(tmp_path, "--fixture", "conformance", sampling_callback=sampling, elicitation_callback=elicitation) as session:
        await session.initialize()
        result = await session.call_tool("test_sampling", {"prompt": "q"})
        assert result.content[0].text == "LLM response: 42"
        for name in ("test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums"):
            assert not (await session.call_tool(name, {})).is_error
    assert asked[0]["properties"]["age"] == {"type": "integer", "description": "User age", "default": 30}
    assert set(asked[1]["properties"]) == {"untitledSingle", "titledSingle", "legacyEnum", "untitledMulti", "titledMulti"}


async def test_cancellation_keeps_the_session(tmp_path: Path) -> None:
    async with connect(tmp_path, "--app", "interop_app:app") as session:
        await session.initialize()
        with anyio.move_on_after(0.3):
            await session.call_tool("slow", {"seconds": 20})
        # The cancelled call got no reply; the session still serves.
        result = await session.call_tool("echo", {"text": "still here"})
        assert result.content[0].text == "still here"


async def test_modern_client_discovers_and_calls(tmp_path: Path) -> None:
    async with connect(tmp_path) as session:
        discovered = await session.discover()
        assert discovered.supported_versions == ["2026-07-28"]
        assert session.protocol_version == "2026-07-28"
        tools = await session.list_tools()
        assert "echo" in [t.name for t in tools.tools]
        result = await session.call_tool("add", {"a": 1, "b": 2})
        assert result.structured_content == {"sum": 3}
        with pytest.raises(mcp.MCPError) as info:
            await session.read_resource("demo://nope")
        assert info.value.error.code == -32602


async def test_modern_client_resolves_input_required_rounds(tmp_path: Path) -> None:
    """2026-07-28: sampling, elicitation and roots ride in InputRequiredResult rounds (MRTR)."""

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="modern"), model="m")

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///r")])

    client = mcp.Client(
        server_params(tmp_path, "--app", "interop_app:app"),
        sampling_callback=sampling,
        elicitation_callback=elicitation,
        list_roots_callback=roots,
    )
    async with client:
        assert client.session.protocol_version == "2026-07-28"
        result = await client.call_tool("ask", {})
        assert json.loads(result.content[0].text) == {
            "sampled": "modern",
            "elicited": {"action": "accept", "content": {"name": "Grace"}},
            "roots": 1,
        }
    assert check_transcript(tmp_path / "client.jsonl", tmp_path / "server.jsonl") > 0


async def test_modern_listen_stream_gets_resource_updates(tmp_path: Path) -> None:
    async with mcp.Client(server_params(tmp_path, "--app", "interop_app:app")) as client:
        async with client.listen(resource_subscriptions=["mem://r0"], tools_list_changed=True) as sub:
            assert list(sub.honored.resource_subscriptions or []) == ["mem://r0"]
            touched = await client.call_tool("touch", {"uri": "mem://r0"})
            assert touched.structured_content == {"result": 1}
            with anyio.fail_after(5):
                event = await sub.__anext__()
            assert "mem://r0" in repr(event)
    assert check_transcript(tmp_path / "client.jsonl", tmp_path / "server.jsonl") > 0
