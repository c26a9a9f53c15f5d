"""A framework app's ``async def`` tools are run as mcpfast runs its own: up to their first wait
inside the connection's ``feed`` (``mcpfast.server.inline``), so one that does not wait is
answered with no task, its progress and logs ahead of the reply; one that waits goes on from the
loop; the framework's ``Context`` works in both. ``test_parity`` checks the answers are the
framework's."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from mcpfast.adapters import servable

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.timeout(30),
    pytest.mark.filterwarnings("ignore:The logging capability is deprecated"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _app(name: str) -> Any:
    if name == "fastmcp":
        pytest.importorskip("fastmcp", reason="the sdk extra: pip install 'mcpfast[sdk]'")
        import fastmcp_app

        return fastmcp_app.mcp
    pytest.importorskip("mcp", reason="the sdk extra: pip install 'mcpfast[sdk]'")
    import sdk_app

    return sdk_app.mcp


def _call(rid: int, name: str, arguments: dict[str, Any]) -> bytes:
    params = {"name": name, "arguments": arguments, "_meta": {"progressToken": f"p{rid}"}}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()


def ready(conn: Any) -> None:
    """The handshake, its messages read."""
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    conn.feed(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode())
    conn.feed(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    conn.session.data_to_send()


@pytest.mark.parametrize("framework", ["sdk", "fastmcp"])
async def test_async_tools_that_do_not_wait_are_answered_inside_feed(framework: str) -> None:
    server = servable(_app(framework))
    await server.start()
    conn = server.connect(records=False)
    try:
        ready(conn)
        before = asyncio.all_tasks()

        conn.feed(_call(1, "slow_count", {"steps": 2}))  # progress and logs through the framework's Context
        assert conn.in_flight == 0 and asyncio.all_tasks() == before
        sent = [json.loads(data) for data in conn.session.data_to_send()]
        kinds = [message.get("method", "reply") for message in sent]
        assert kinds == ["notifications/progress", "notifications/progress", "notifications/message", "notifications/message", "reply"]
        assert sent[-1]["result"]["content"][0]["text"] == "done 2"

        conn.feed(_call(2, "fail", {"reason": "boom"}))  # raises: the framework's error result
        assert conn.in_flight == 0
        (failed,) = [json.loads(data) for data in conn.session.data_to_send()]
        assert failed["id"] == 2 and failed["result"]["isError"] is True

        conn.feed(_call(3, "add", {"a": 1, "b": 2}))  # a plain def: the worker threads, so it waits
        assert conn.in_flight == 1
        async with asyncio.timeout(10):
            while conn.in_flight:
                await asyncio.sleep(0.001)
        (added,) = [json.loads(data) for data in conn.session.data_to_send()]
        assert added["id"] == 3 and "3" in json.dumps(added["result"])
    finally:
        await conn.close()
        await server.stop()


async def test_a_fastmcp_tool_that_waits_goes_on_from_the_loop() -> None:
    server = servable(_app("fastmcp"))
    await server.start()
    conn = server.connect(records=False)
    try:
        ready(conn)
        conn.feed(_call(1, "paced_count", {"steps": 2}))  # sleeps between its steps
        assert conn.in_flight == 1
        sent: list[dict[str, Any]] = []
        async with asyncio.timeout(10):
            while conn.in_flight:
                await asyncio.sleep(0.001)
                sent += [json.loads(data) for data in conn.session.data_to_send()]
        sent += [json.loads(data) for data in conn.session.data_to_send()]
        assert [message.get("method", "reply") for message in sent] == ["notifications/progress", "notifications/progress", "reply"]
        assert sent[-1]["result"]["content"][0]["text"] == "done 2"
    finally:
        await conn.close()
        await server.stop()
