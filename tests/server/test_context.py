"""Context: what a handler sees of its request, on a real Connection and engine session."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from mcpfast.sansio import InboundRequest, RequestReceived, ServerSession
from mcpfast.sansio.mrtr import InputRequired
from mcpfast.server import Connection, Context

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

CAPS = {"tools": {}, "logging": {}}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def admitted(message: dict[str, Any], *, handshake: bool = True) -> tuple[Connection, InboundRequest]:
    """A connection whose engine admitted ``message`` (handshake era unless told otherwise)."""
    session = ServerSession({"name": "t", "version": "1"}, CAPS)
    if handshake:
        init = {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}, "clientInfo": {"name": "c", "version": "1"}}
        session.receive(orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
        session.receive(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        session.data_to_send()
    (event,) = session.receive(orjson.dumps(message))
    assert isinstance(event, RequestReceived)
    return Connection(session, lambda r, c: {}), event.request


def call(rid: int, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "t", "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


async def test_request_facts() -> None:
    conn, request = admitted(call(5))
    ctx = Context(conn, request)
    assert (ctx.request_id, ctx.version, ctx.client_capabilities) == (5, "2025-11-25", {"sampling": {}})
    conn, request = admitted(call(6, META), handshake=False)
    ctx = Context(conn, request)
    assert ctx.version == "2026-07-28" and ctx.client_capabilities == {"elicitation": {}}


async def test_progress_and_logs_from_a_worker_thread_go_through_the_loop() -> None:
    conn, request = admitted(call(7, {"progressToken": "p"}))
    ctx = Context(conn, request)

    def blocking_work() -> tuple[bool, bool]:
        return ctx.report_progress(1, 2), ctx.info("half way")

    assert await asyncio.to_thread(blocking_work) == (True, True)
    out = [orjson.loads(b) for b in conn.session.data_to_send()]
    assert [m["method"] for m in out] == ["notifications/progress", "notifications/message"]
    assert out[0]["params"] == {"progressToken": "p", "progress": 1, "total": 2}
    with pytest.raises(ValueError):
        ctx.report_progress(1)  # progress must increase


async def test_progress_without_a_token_sends_nothing() -> None:
    conn, request = admitted(call(8))
    assert Context(conn, request).report_progress(1) is False
    assert conn.session.data_to_send() == []


async def test_stateless_questions_become_input_required_and_answers_come_back() -> None:
    conn, request = admitted(call(9, META), handshake=False)
    ask = {"name": ("elicitation/create", {"message": "name?", "requestedSchema": {"type": "object"}})}
    with pytest.raises(InputRequired) as info:
        await Context(conn, request).ask(ask)
    assert list(info.value.requests) == ["name"]
    answered = Context(conn, request, {"name": {"action": "accept", "content": {}}}, resumed=True)
    assert await answered.ask(ask) == {"name": {"action": "accept", "content": {}}}
    assert answered.resumed
