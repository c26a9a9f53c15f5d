"""The hot path makes no store round trip: a cached session costs one load, then only batches."""

from __future__ import annotations

import json
import urllib.request

import pytest

from mcpfast.server.conformance import app
from mcpfast.store.redis import RedisStore
from mcpfast.transports.http import HttpTransport
from mcpfast.transports.http_testing import serve_in_thread
from mcpfast.transports.shared_sessions import SharedSessions

pytestmark = pytest.mark.timeout(120)

CALLS = 300


def _post(url: str, session: str, body: dict) -> int:  # type: ignore[type-arg]
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2025-11-25",
            "mcp-session-id": session,
        },
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
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
        url = f"{base}/mcp"
        for i in range(CALLS):
            body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "test_simple_text", "arguments": {}}}
            assert _post(url, client.session, body) == 200
        ops, flushes = store.ops, table.flushes
    # The first request here numbers this process (its range of request ids) and loads the
    # session; every other round trip is a batched refresh.
    assert store.errors == 0
    assert ops - flushes == 2, (ops, flushes)
