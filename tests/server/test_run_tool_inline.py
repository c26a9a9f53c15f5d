"""``Server.run_tool_inline``: a plain tool call served without a session machine step, for an
``async def`` tool too, as a short path (the native server's lane) would serve it: the result
at once when the coroutine does not wait, a ``PendingCall`` when it does; the same answers as
the full path gives."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import orjson
import pytest

from mcpfast import Context, McpError, Server
from mcpfast.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS
from mcpfast.server.app import PendingCall
from mcpfast.server.content import text_result

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

VERSION = "2025-11-25"


@pytest.fixture(
    params=[pytest.param(("asyncio", {"use_uvloop": False}), id="asyncio"), pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop")]
)
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


class Sum(TypedDict):
    sum: int


def make_app(gate: asyncio.Future[str] | None = None) -> Server:
    app = Server("inline-calls")

    @app.tool()
    def echo(text: str) -> str:
        return text

    @app.tool()
    async def shout(text: str) -> str:
        return text.upper()

    @app.tool(structured_output=False)
    async def blocks(text: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": text}, {"type": "text", "text": text}]

    @app.tool(structured_output=False)
    async def listing(n: int) -> Any:
        return {"n": n}

    @app.tool()
    async def broken() -> str:
        raise ValueError("no luck")

    @app.tool()
    async def refuses() -> str:
        raise McpError(INVALID_PARAMS, "not today", {"why": "test"})

    @app.tool()
    async def gives_up() -> str:
        raise asyncio.CancelledError

    @app.tool()
    async def with_ctx(text: str, ctx: Context) -> str:
        return text

    @app.tool()
    async def adds(a: int, b: int) -> Sum:
        return {"sum": a + b}

    if gate is not None:

        @app.tool()
        async def waits(text: str) -> str:
            return text + await gate

    return app


async def full_path(app: Server, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The reply the full path (a connection and its session machine) gives."""
    conn = app.connect()
    init = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    conn.feed(orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
    conn.feed(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    conn.session.data_to_send()
    conn.feed(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}))
    (reply,) = [orjson.loads(data) for data in conn.session.data_to_send()]
    await conn.close()
    return reply  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("echo", {"text": "sync"}),
        ("shout", {"text": "hi"}),
        ("blocks", {"text": "x"}),
        ("listing", {"n": 2}),
        ("broken", {}),
        ("refuses", {}),
        ("shout", {"text": 5}),  # invalid arguments: a tool error at this version
    ],
)
async def test_a_tool_that_does_not_wait_answers_at_once_as_the_full_path(name: str, arguments: dict[str, Any]) -> None:
    app = make_app()
    outcome = app.run_tool_inline(name, arguments, VERSION)
    assert outcome is not None and not isinstance(outcome, PendingCall)
    reply = await full_path(app, name, arguments)
    if isinstance(outcome, tuple):
        code, message, data = outcome
        assert reply["error"] == {"code": code, "message": message, **({"data": data} if data is not None else {})}
    else:
        assert reply["result"] == orjson.loads(orjson.dumps(text_result(outcome) if isinstance(outcome, str) else outcome))


async def test_what_it_serves_and_what_it_leaves() -> None:
    app = make_app()
    assert app.run_tool_inline("shout", {"text": "a"}, VERSION) == "A"  # the text alone, as run_plain_tool gives it
    assert app.run_tool_inline("echo", {"text": "a"}, VERSION) == app.run_plain_tool("echo", {"text": "a"}, VERSION)
    assert app.run_tool_inline("shout", {"text": 1}, "2025-06-18")[0] == INVALID_PARAMS  # type: ignore[index]
    assert app.run_tool_inline("with_ctx", {"text": "a"}, VERSION) is None  # a Context: the full path
    assert app.run_tool_inline("adds", {"a": 1, "b": 2}, VERSION) is None  # an output schema: the full path
    assert app.run_tool_inline("nope", {}, VERSION) is None
    assert app.run_tool_inline("shout", {"text": "a", "other": 1}, VERSION) is None  # arguments it does not take
    assert app.run_tool_inline("gives_up", {}, VERSION) == (INTERNAL_ERROR, "internal error", None)


async def test_a_tool_that_waits_is_a_pending_call_finished_from_the_loop() -> None:
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    app = make_app(gate)
    pending = app.run_tool_inline("waits", {"text": "a"}, VERSION)
    assert isinstance(pending, PendingCall) and not pending.done()
    with pytest.raises(asyncio.InvalidStateError):
        pending.outcome()
    heard: list[PendingCall] = []
    pending.listen(heard.append)
    gate.set_result("b")
    assert heard == []
    await asyncio.sleep(0)  # the future's callback: the tool's next step, which finishes it and tells the listener
    assert heard == [pending] and pending.outcome() == "ab"
    late: list[PendingCall] = []
    pending.listen(late.append)  # finished: told at once
    assert late == [pending]


async def test_a_pending_call_can_be_cancelled() -> None:
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    app = make_app(gate)
    pending = app.run_tool_inline("waits", {"text": "a"}, VERSION)
    assert isinstance(pending, PendingCall)
    heard: list[PendingCall] = []
    pending.listen(heard.append)
    assert pending.cancel() and gate.cancelled()
    await asyncio.sleep(0)
    assert heard == [pending] and pending.cancelled()
    with pytest.raises(asyncio.CancelledError):
        pending.outcome()
    assert not pending.cancel()
