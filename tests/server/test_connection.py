"""Connection: runs handlers for one engine session, given its collaborators explicitly."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from mcpfast import core
from mcpfast.protocol.errors import McpError
from mcpfast.sansio import InboundRequest, NotificationReceived, ServerSession
from mcpfast.server import Connection

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

CAPS = {"tools": {}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def ready_session(caps: dict[str, Any] | None = None) -> ServerSession:
    s = ServerSession({"name": "t", "version": "1"}, CAPS)
    init = {"protocolVersion": "2025-11-25", "capabilities": caps or {}, "clientInfo": {"name": "c", "version": "1"}}
    s.receive(orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
    s.receive(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    s.data_to_send()
    return s


def call(rid: int, name: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": {}}})


async def replies(session: ServerSession, count: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    async with asyncio.timeout(5):
        while len(got) < count:
            got += [orjson.loads(b) for b in session.data_to_send()]
            await asyncio.sleep(0.001)
    return got


async def test_sync_result_is_answered_inside_feed() -> None:
    seen: list[str] = []

    def handle(request: InboundRequest, conn: Connection) -> Any:
        seen.append(request.method)
        return {"content": []}

    conn = Connection(ready_session(), handle)
    conn.feed(call(1, "x"))
    assert seen == ["tools/call"] and conn.in_flight == 0
    assert [orjson.loads(b) for b in conn.session.data_to_send()] == [{"jsonrpc": "2.0", "id": 1, "result": {"content": []}}]


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        pytest.param(McpError(-32602, "bad"), -32602, id="mcp-error"),
        pytest.param(RuntimeError("boom"), -32603, id="handler-bug"),
    ],
)
async def test_handler_errors_become_error_replies(outcome: Exception, code: int) -> None:
    def handle(request: InboundRequest, conn: Connection) -> Any:
        raise outcome

    conn = Connection(ready_session(), handle)
    conn.feed(call(2, "x"))
    (reply,) = [orjson.loads(b) for b in conn.session.data_to_send()]
    assert reply["id"] == 2 and reply["error"]["code"] == code


async def test_async_handlers_run_in_tasks_and_a_cancel_stops_them() -> None:
    stopped: list[int | str] = []

    async def work(request: InboundRequest) -> dict[str, Any]:
        try:
            await asyncio.sleep(0 if request.params["name"] == "quick" else 30)
        except asyncio.CancelledError:
            stopped.append(request.id)
            raise
        return {"content": []}

    conn = Connection(ready_session(), lambda request, conn: work(request))
    conn.feed(call(3, "slow"))
    conn.feed(call(4, "quick"))
    assert conn.in_flight == 2
    (reply,) = await replies(conn.session, 1)
    assert reply["id"] == 4
    conn.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}')
    async with asyncio.timeout(5):
        while conn.in_flight:
            await asyncio.sleep(0.001)
    assert stopped == [3]
    assert conn.session.data_to_send() == []  # a cancelled request is never answered


async def test_an_async_handler_that_does_not_wait_is_answered_inside_feed() -> None:
    async def handle(request: InboundRequest, conn: Connection) -> dict[str, Any]:
        return {"content": [], "task": type(asyncio.current_task()).__name__}

    before = asyncio.all_tasks()
    conn = Connection(ready_session(), handle)
    conn.feed(call(1, "x"))
    assert conn.in_flight == 0 and asyncio.all_tasks() == before  # no task made, no loop turn needed
    (reply,) = [orjson.loads(b) for b in conn.session.data_to_send()]
    assert reply == {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "task": "InlineTask"}}


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        pytest.param(McpError(-32602, "bad"), -32602, id="mcp-error"),
        pytest.param(RuntimeError("boom"), -32603, id="handler-bug"),
    ],
)
@pytest.mark.parametrize("waits", [False, True], ids=["at-once", "after-a-wait"])
async def test_async_handler_errors_become_error_replies(outcome: Exception, code: int, waits: bool) -> None:
    async def handle(request: InboundRequest, conn: Connection) -> dict[str, Any]:
        if waits:
            await asyncio.sleep(0)
        raise outcome

    conn = Connection(ready_session(), handle)
    conn.feed(call(2, "x"))
    (reply,) = await replies(conn.session, 1)
    assert reply["id"] == 2 and reply["error"]["code"] == code and conn.in_flight == 0


async def test_an_awaitable_that_is_no_coroutine_is_awaited() -> None:
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    conn = Connection(ready_session(), lambda request, conn: future)
    conn.feed(call(3, "x"))
    assert conn.in_flight == 1
    future.set_result({"content": []})
    (reply,) = await replies(conn.session, 1)
    assert reply == {"jsonrpc": "2.0", "id": 3, "result": {"content": []}}


async def test_a_handlers_timeout_never_cancels_the_task_that_fed_it() -> None:
    # Fed from a task, as the stdio transport's reader feeds: the handler's timeout is its own.
    seen: list[object] = []

    async def handle(request: InboundRequest, conn: Connection) -> dict[str, Any]:
        seen.append(asyncio.current_task())
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(5)
        except TimeoutError:
            return {"content": [{"type": "text", "text": "timed out"}]}
        return {"content": []}

    conn = Connection(ready_session(), handle)
    conn.feed(call(4, "x"))
    (reply,) = await replies(conn.session, 1)
    assert reply["result"]["content"][0]["text"] == "timed out"
    assert seen[0] is not asyncio.current_task() and asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_close_stops_the_handlers_that_wait_and_waits_for_them() -> None:
    stopped: list[int | str] = []

    async def handle(request: InboundRequest, conn: Connection) -> dict[str, Any]:
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0)  # winding down takes a turn of the loop
            stopped.append(request.id)
        return {"content": []}

    conn = Connection(ready_session(), handle)
    conn.feed(call(5, "a"))
    conn.feed(call(6, "b"))
    assert conn.in_flight == 2
    await conn.close()
    assert set(stopped) == {5, 6}
    assert conn.session.data_to_send() == []  # a handler stopped by the close is not answered


async def test_notifications_and_close_reach_the_given_callbacks() -> None:
    notes: list[str] = []
    closed: list[Connection] = []

    def on_notification(conn: Connection, event: NotificationReceived) -> None:
        notes.append(event.method)

    conn = Connection(ready_session(), lambda r, c: {}, on_notification=on_notification, on_close=closed.append)
    conn.feed(b'{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}')
    assert notes == ["notifications/roots/list_changed"]
    await conn.close()
    assert closed == [conn]


async def test_request_client_resolves_with_the_reply_and_times_out() -> None:
    conn = Connection(ready_session({"roots": {}}), lambda r, c: {}, request_timeout=0.05)
    waiting = asyncio.ensure_future(conn.request_client("roots/list", None))
    await asyncio.sleep(0)
    (sent,) = [orjson.loads(b) for b in conn.session.data_to_send()]
    conn.feed(orjson.dumps({"jsonrpc": "2.0", "id": sent["id"], "result": {"roots": []}}))
    assert await waiting == {"roots": []}
    with pytest.raises(TimeoutError):
        await conn.request_client("roots/list", None)  # no answer: request_timeout applies
    (cancel,) = [orjson.loads(b) for b in conn.session.data_to_send()][-1:]
    assert cancel["method"] == "notifications/cancelled"


async def test_server_connect_wires_its_dispatch_and_registry() -> None:
    from mcpfast import Server

    app = Server("wired")

    @app.tool()
    def echo(text: str) -> str:
        """Echo."""
        return text

    conn = app.connect()
    assert conn in app._connections
    conn.session.receive(
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
            }
        )
    )
    conn.feed(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}))
    out = [orjson.loads(b) for b in conn.session.data_to_send()]
    assert out[-1]["result"]["content"][0]["text"] == "hi"
    await conn.close()
    assert conn not in app._connections


async def test_an_adopted_call_is_served_as_one_fed_here() -> None:
    # A short path ran the tool to its first wait (Server.run_tool_inline) and hands the call
    # over: in flight from then on, answered when it finishes, cancelled by the client's cancel.
    from mcpfast import Server
    from mcpfast.server.app import PendingCall

    app = Server("adopting")
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    stopped: list[str] = []

    @app.tool()
    async def waits(text: str) -> str:
        try:
            return text + await asyncio.shield(gate)
        except asyncio.CancelledError:
            stopped.append(text)
            raise

    @app.tool()
    async def fails(text: str) -> str:
        await asyncio.sleep(0)
        raise McpError(-32042, "refused", {"text": text})

    conn = app.connect()
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    conn.feed(orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
    conn.session.data_to_send()

    def adopt(rid: int, name: str, text: str) -> None:
        message = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": {"text": text}}}
        pending = app.run_tool_inline(name, {"text": text}, "2025-11-25")
        assert isinstance(pending, PendingCall)
        conn.adopt(core.decode(orjson.dumps(message)), None, pending)  # type: ignore[arg-type]

    adopt(1, "waits", "a")
    adopt(2, "waits", "b")
    adopt(3, "fails", "c")
    assert conn.in_flight == 3 and sorted(conn.session.in_flight()) == [1, 2, 3]
    conn.feed(call(1, "waits"))  # a reused id: refused by the session machine
    conn.feed(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}')
    gate.set_result("!")
    got = await replies(conn.session, 3)
    assert got[0]["error"]["message"] == "request id already in use by a request in flight"
    by_id = {reply["id"]: reply for reply in got[1:]}
    assert by_id[1]["result"] == {"content": [{"type": "text", "text": "a!"}]}
    assert by_id[3]["error"] == {"code": -32042, "message": "refused", "data": {"text": "c"}}
    assert stopped == ["b"] and conn.in_flight == 0 and conn.session.in_flight() == []
    assert conn.session.data_to_send() == []  # the cancelled call is never answered
    gate = asyncio.get_running_loop().create_future()
    adopt(5, "waits", "e")
    await conn.close()  # the connection's end stops what is still running
    assert stopped == ["b", "e"]
