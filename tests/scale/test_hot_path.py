"""The hot path makes no store round trip: a cached session costs one load, then only batches."""

from __future__ import annotations

import http.client
import json

import pytest

from mcpfast import core
from mcpfast.server.conformance import app
from mcpfast.store.redis import RedisStore
from mcpfast.transports.http import HttpTransport
from mcpfast.transports.http_testing import serve_in_thread
from mcpfast.transports.shared_sessions import SharedSessions

pytestmark = pytest.mark.timeout(120)

CALLS = 300


def _post(conn: http.client.HTTPConnection, session: str, body: dict) -> int:  # type: ignore[type-arg]
    """One POST on a keep-alive connection, as MCP clients send them."""
    conn.request(
        "POST",
        "/mcp",
        body=json.dumps(body).encode(),
        headers={
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2025-11-25",
            "mcp-session-id": session,
        },
    )
    resp = conn.getresponse()
    resp.read()
    return resp.status


def test_store_round_trips_per_request(servers, redis) -> None:
    (other,) = servers(1)  # the session is made by another process
    client = other.client()
    client.initialize()
    store = RedisStore(redis.url)
    transport = HttpTransport(app, store=store, session_idle_timeout=30)
    table = transport.table
    assert isinstance(table, SharedSessions) and table.store is store
    with serve_in_thread(transport) as base:
        conn = http.client.HTTPConnection(base.removeprefix("http://"), timeout=10)
        for i in range(CALLS):
            body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "test_simple_text", "arguments": {}}}
            assert _post(conn, client.session, body) == 200
        conn.close()
        ops, flushes = store.ops, table.flushes
        answered = transport.lane.answered if transport.lane is not None else None
    # The first request here numbers this process (its range of request ids) and loads the
    # session; every other round trip is a batched refresh.
    assert store.errors == 0
    assert ops - flushes == 2, (ops, flushes)
    if core.HAS_LANE:  # the session loaded from the store is served by the lane like a local one
        assert answered is not None and answered >= CALLS - 2, answered


def test_with_a_shared_store_every_session_is_made_by_the_full_path(redis) -> None:
    # The lane opens sessions only for a table of this process: the others must find them in the store.
    transport = HttpTransport(app, store=RedisStore(redis.url), session_idle_timeout=30)
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    with serve_in_thread(transport) as base:
        conn = http.client.HTTPConnection(base.removeprefix("http://"), timeout=10)
        ids = []
        for _ in range(3):
            conn.request(
                "POST",
                "/mcp",
                body=json.dumps(init).encode(),
                headers={"accept": "application/json, text/event-stream", "content-type": "application/json"},
            )
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200
            ids.append(resp.getheader("mcp-session-id"))
        conn.close()
        assert all(sid in transport.table.sessions for sid in ids)
        assert transport.lane is None or transport.lane.born == 0
