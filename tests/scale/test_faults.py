"""Faults with a real Redis: down, back, restarted empty; a process killed mid-stream; the cap."""

from __future__ import annotations

import json

import pytest
from scale_client import Legacy, Mcp, until

pytestmark = pytest.mark.timeout(120)


def test_redis_down_then_back(servers, redis) -> None:
    a, b = servers(2)
    cached = a.client()
    cached.initialize()
    redis.stop()
    # A new session cannot be kept: 503 with a JSON-RPC error body, and the process lives on.
    for s in (a, b):
        status, headers, data = Mcp(s.port).raw(
            "POST",
            Mcp(s.port).request_body(
                "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            ),
        )
        assert status == 503
        error = json.loads(data)
        assert error["jsonrpc"] == "2.0" and error["error"]["code"] == -32603 and "store" in error["error"]["message"]
        assert headers.get("retry-after") == "1"
    # A session this process already holds is answered from its cache.
    assert cached.call("ping")[0] == 200
    # A session it would have to load: 503 too (unknown is not the same as not found).
    assert cached.on(b.port).call("ping")[0] == 503
    assert a.proc.poll() is None and b.proc.poll() is None
    redis.start()  # same port, empty: the old session is gone, new ones work without a restart
    fresh = until(lambda: _try_initialize(b.port), what="initialize after Redis came back")
    assert fresh.on(a.port).call("ping")[0] == 200


def test_redis_down_legacy_post_on_another_process_is_503_and_on_its_own_202(servers, redis) -> None:
    a, b = servers(2)
    legacy = Legacy(a.port)
    redis.stop()
    for port, expected in ((b.port, 503), (a.port, 202)):  # b cannot tell; a holds the stream
        status, data = legacy.post(port, b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        assert status == expected, data
        if expected == 503:
            assert "store" in json.loads(data)["error"]["message"] and legacy.headers.get("retry-after") == "1"
    legacy.close()


def test_legacy_post_after_its_holder_was_sigkilled_is_404_not_lost(servers) -> None:
    # 2024-11-05: the /sse stream is open on a, which dies. Its record lives on in Redis until the
    # idle expiry, but a POST for the session on b must not be taken (202) and lost: b finds
    # nobody listening for it, answers 404 and drops the record.
    a, b = servers(2)
    legacy = Legacy(a.port)
    assert legacy.post(b.port, {"jsonrpc": "2.0", "id": 1, "method": "ping"})[0] == 202  # passed on while a lives
    a.kill()
    legacy.close()
    for n in (2, 3):  # the second finds no record at all
        status, data = legacy.post(b.port, {"jsonrpc": "2.0", "id": n, "method": "ping"})
        assert status == 404 and json.loads(data)["error"]["message"] == "session not found", data
    assert b.proc.poll() is None


def _try_initialize(port: int) -> Mcp | None:
    client = Mcp(port)
    try:
        client.initialize()
    except AssertionError:
        return None
    return client


def test_redis_restarted_empty_gives_404_then_reinitialize(servers, redis) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize()
    assert client.on(b.port).call("ping")[0] == 200
    redis.stop()
    redis.start()
    # Both processes notice the session is gone (lost subscription, then the batched refresh).
    until(lambda: client.call("ping")[0] == 404, what="404 on a")
    until(lambda: client.on(b.port).call("ping")[0] == 404, what="404 on b")
    again = Mcp(a.port)
    again.initialize()
    assert again.on(b.port).call("tools/list")[0] == 200


def test_sigkilled_process_sessions_go_on_elsewhere(servers) -> None:
    a, b = servers(2)
    client = a.client()
    client.initialize()
    get = client.get_stream()  # a stream open on a when it dies
    priming = get.next()
    assert priming is not None and priming[1] is None  # the priming event (2025-11-25): the stream is live
    a.kill()
    assert get.next() is None  # then the stream ended with the process
    get.close()
    status, reply = client.on(b.port).call("tools/call", {"name": "test_simple_text", "arguments": {}})
    assert status == 200 and reply["result"]["content"]
    client.on(b.port).get_stream().close()  # the session's GET stream opens again, on b


def test_session_cap_is_global(servers) -> None:
    a, b = servers(2, "--max-sessions", "3")
    Mcp(a.port).initialize()
    Mcp(b.port).initialize()
    Mcp(a.port).initialize()
    for s in (a, b):
        probe = Mcp(s.port)
        status, _, data = probe.raw(
            "POST",
            probe.request_body(
                "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            ),
        )
        assert status == 503 and "too many sessions" in json.loads(data)["error"]["message"]
