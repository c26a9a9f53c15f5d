"""The official MCP Python SDK client drives the Streamable HTTP transport.

The server runs under uvicorn in a thread behind a ``Recorder``; after each test every message
the server sent (JSON bodies and SSE events) is checked against the official JSON Schema of the
version that governs it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp
import pytest
from _support import wait_until
from mcp import types
from mcp.client.streamable_http import streamable_http_client

from mcpfast.protocol import TranscriptValidator
from mcpfast.transports.http import HttpTransport, asgi_app
from mcpfast.transports.http_testing import SERVERS, Recorder, serve_in_thread

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interop_app import app as interop

from mcpfast.server.conformance import app as fixture

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Live:
    def __init__(self, server: Any) -> None:
        self.transport: HttpTransport = asgi_app(server)
        self.recorder = Recorder(self.transport)
        self.url = ""

    def check(self) -> int:
        checker = TranscriptValidator()
        for body in self.recorder.client:
            checker.client(body)
        for message in self.recorder.server:
            checker.server(message)
        return checker.checked


def _serve(server: Any, runner: str) -> Iterator[Live]:
    """A server per test: a session one test leaves behind fails that test, not the next one."""
    live = Live(server)
    with serve_in_thread(live.recorder, server=runner) as base:
        live.url = base + "/mcp"
        yield live
        assert wait_until(lambda: not live.transport.sessions)  # a legacy session ends when its stream closes


@pytest.fixture(params=SERVERS)
def live_interop(request: pytest.FixtureRequest) -> Iterator[Live]:
    yield from _serve(interop, request.param)


@pytest.fixture(params=SERVERS)
def live_fixture(request: pytest.FixtureRequest) -> Iterator[Live]:
    yield from _serve(fixture, request.param)


@asynccontextmanager
async def connect(live: Live, **kwargs: Any) -> AsyncIterator[mcp.ClientSession]:
    live.recorder.client.clear()
    live.recorder.server.clear()
    async with streamable_http_client(live.url) as (read, write), mcp.ClientSession(read, write, **kwargs) as session:
        yield session
    assert live.check() > 0


async def test_initialize_tools_delete(live_interop: Live) -> None:
    async with connect(live_interop) as session:
        init = await session.initialize()
        assert init.protocol_version == "2025-11-25"
        await session.send_ping()
        result = await session.call_tool("echo", {"text": "héllo"})
        assert result.content[0].text == "héllo"
        added = await session.call_tool("add", {"a": 1, "b": 2})
        assert added.structured_content == {"result": 3}
        assert len(live_interop.transport.sessions) == 1
    # Leaving the client sends DELETE: the session is gone.
    assert not live_interop.transport.sessions


async def test_progress_resources_prompts_completion(live_fixture: Live) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with connect(live_fixture) as session:
        await session.initialize()
        streamed = await session.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
        assert not streamed.is_error and progress == [0, 50, 100]
        listed = await session.list_resources()
        assert {str(r.uri) for r in listed.resources} >= {"test://static-text", "test://static-binary"}
        read = await session.read_resource("test://template/123/data")
        assert "123" in read.contents[0].text
        await session.subscribe_resource("test://watched-resource")
        await session.unsubscribe_resource("test://watched-resource")
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        assert "test_prompt_with_arguments" in prompts
        got = await session.get_prompt("test_prompt_with_arguments", {"arg1": "v1", "arg2": "v2"})
        assert "v1" in json.dumps(got.model_dump(mode="json"))
        done = await session.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"), {"name": "arg1", "value": "t"}
        )
        assert done.completion.values is not None
        await session.set_logging_level("debug")
        logged = await session.call_tool("test_tool_with_logging", {})
        assert not logged.is_error


async def test_sampling_and_elicitation_callbacks(live_fixture: Live) -> None:
    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="sampled!"), model="m")

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "a@b.c"})

    async with connect(live_fixture, sampling_callback=sampling, elicitation_callback=elicitation) as session:
        await session.initialize()
        sampled = await session.call_tool("test_sampling", {"prompt": "hi"})
        assert "sampled!" in sampled.content[0].text
        elicited = await session.call_tool("test_elicitation", {"message": "who?"})
        assert not elicited.is_error and elicited.content[0].text


async def test_legacy_sse_client_2024(live_interop: Live) -> None:
    from mcp.client.sse import sse_client

    live_interop.recorder.client.clear()
    live_interop.recorder.server.clear()
    async with sse_client(live_interop.url.removesuffix("/mcp") + "/sse") as (read, write), mcp.ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "interop"
        result = await session.call_tool("echo", {"text": "old transport"})
        assert result.content[0].text == "old transport"
    assert live_interop.check() > 0
