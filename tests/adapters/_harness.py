"""Drive a framework's own server and an mcpfast ``Server`` with the same client messages, in process.

Both sides get the messages one at a time; after each request the driver collects every message
the server wrote until the reply to it (notifications, server-to-client requests, which ``answer``
answers). The transcripts are lists of JSON objects as they went on the wire (framework: the
lowlevel server's messages dumped the way its stdio transport dumps them; mcpfast: the bytes the
session machine queued, decoded).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import anyio

Answer = Callable[[str, Any], Any]
"""``answer(method, params)``: the result a test client gives to a server-to-client request."""

DEADLINE = 10.0


def _no_answer(method: str, params: Any) -> Any:
    raise AssertionError(f"unexpected server-to-client request {method}")


async def framework_transcript(lowlevel: Any, messages: list[dict[str, Any]], answer: Answer = _no_answer) -> list[dict[str, Any]]:
    """What the framework's lowlevel server (``MCPServer._lowlevel_server``, FastMCP's) writes for ``messages``."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    to_server_send, to_server_recv = anyio.create_memory_object_stream[Any](100)
    from_server_send, from_server_recv = anyio.create_memory_object_stream[Any](100)
    out: list[dict[str, Any]] = []

    def dump(message: SessionMessage) -> dict[str, Any]:
        return json.loads(message.message.model_dump_json(by_alias=True, exclude_unset=True))

    async def send(obj: dict[str, Any]) -> None:
        await to_server_send.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(obj, by_name=False)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: lowlevel.run(to_server_recv, from_server_send, lowlevel.create_initialization_options()))
        for message in messages:
            await send(message)
            if "id" not in message:
                await anyio.sleep(0.01)  # let a notification be handled before the next message
                continue
            with anyio.fail_after(DEADLINE):
                while True:
                    got = dump(await from_server_recv.receive())
                    out.append(got)
                    if "method" in got and "id" in got:  # a server-to-client request
                        await send({"jsonrpc": "2.0", "id": got["id"], "result": answer(got["method"], got.get("params"))})
                    elif "method" not in got and got.get("id") == message["id"]:
                        break
        tg.cancel_scope.cancel()
    for stream in (to_server_send, to_server_recv, from_server_send, from_server_recv):
        await stream.aclose()
    return out


async def mcpfast_transcript(server: Any, messages: list[dict[str, Any]], answer: Answer = _no_answer) -> list[dict[str, Any]]:
    """What an mcpfast ``Server`` writes for ``messages`` on one stdio-like connection (lifespan entered around it)."""
    out: list[dict[str, Any]] = []
    await server.start()
    conn = server.connect(records=False)
    try:
        for message in messages:
            conn.feed(json.dumps(message).encode())
            if "id" not in message:
                continue
            deadline = time.monotonic() + DEADLINE
            done = False
            while not done:
                pending = conn.session.data_to_send()
                if not pending:
                    assert time.monotonic() < deadline, f"no reply to {message}"
                    await asyncio.sleep(0.001)
                    continue
                for data in pending:
                    got = json.loads(data)
                    out.append(got)
                    if "method" in got and "id" in got:
                        reply = {"jsonrpc": "2.0", "id": got["id"], "result": answer(got["method"], got.get("params"))}
                        conn.feed(json.dumps(reply).encode())
                    elif "method" not in got and got.get("id") == message["id"]:
                        done = True
    finally:
        await conn.close()
        await server.stop()
    return out


def request(rid: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def handshake(version: str, capabilities: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``initialize`` (id 0) and ``notifications/initialized``."""
    return [
        request(
            0,
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": capabilities if capabilities is not None else {},
                "clientInfo": {"name": "parity-client", "version": "1.0"},
            },
        ),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
