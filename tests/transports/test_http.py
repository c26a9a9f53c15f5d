"""Streamable HTTP transport: statuses, sessions, 2026-07-28 rules, streaming, resumability, limits."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2 as httpx
import pytest
from _support import until, wait_until

from mcpfast import Context, Server, core
from mcpfast.transports.event_store import MemoryEventStore
from mcpfast.transports.http import HttpTransport, asgi_app
from mcpfast.transports.http_testing import SERVERS, serve_in_thread

pytestmark = [pytest.mark.timeout(30)]

ACCEPT = "application/json, text/event-stream"
HEADERS = {"Accept": ACCEPT, "Content-Type": "application/json"}
M2026 = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": M2026, "io.modelcontextprotocol/clientCapabilities": {}}

app = Server("http-test")
started: list[str] = []
cancelled: list[str] = []


@app.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@app.tool()
async def slow(steps: int, delay: float, ctx: Context) -> str:
    """Report progress ``steps`` times, ``delay`` seconds apart."""
    started.append(str(ctx.request_id))
    try:
        for i in range(steps):
            await asyncio.sleep(delay)
            ctx.report_progress(i + 1, steps)
    except asyncio.CancelledError:
        cancelled.append(str(ctx.request_id))
        raise
    return "done"


@pytest.fixture(autouse=True)
def _fresh_request_logs() -> None:
    """Every test (and every server it runs against) starts with empty logs: a request id left
    by the run against the previous server must not satisfy a wait for this one's."""
    started.clear()
    cancelled.clear()


@app.tool()
async def needs_sampling(ctx: Context) -> str:
    """An async tool (answered later, not inline) that needs the client's sampling capability."""
    await asyncio.sleep(0.01)
    answer = await ctx.sample("hello?")
    return str(answer)


@app.tool()
def touch(uri: str) -> int:
    """Announce a resource change to subscribers."""
    return app.notify_resource_updated(uri)


@app.resource("test://r")
def res() -> str:
    return "r"


def init_body(version: str = "2025-11-25", rid: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }


def call(name: str, args: dict[str, Any], rid: int = 2, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": args}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    h = {**HEADERS, "MCP-Protocol-Version": M2026, "Mcp-Method": method}
    if name is not None:
        h["Mcp-Name"] = name
    return h


# ------------------------------------------------------------------ ASGI level


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def transport() -> AsyncIterator[HttpTransport]:
    t = asgi_app(app, max_body=64 * 1024)
    yield t
    await t.aclose()
    assert not t.sessions


async def open_session(client: httpx.AsyncClient, version: str = "2025-11-25") -> dict[str, str]:
    r = await client.post("/mcp", json=init_body(version), headers=HEADERS)
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    assert sid and all(0x21 <= ord(c) <= 0x7E for c in sid)
    h = {**HEADERS, "Mcp-Session-Id": sid, "MCP-Protocol-Version": version}
    r = await client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h)
    assert r.status_code == 202 and r.content == b""
    return h


@pytest.mark.anyio
async def test_handshake_json_reply_delete(client: httpx.AsyncClient, transport: HttpTransport) -> None:
    h = await open_session(client)
    r = await client.post("/mcp", json=call("echo", {"text": "hi"}), headers=h)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json()["result"]["content"][0]["text"] == "hi"
    r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers=h)
    assert r.json() == {"jsonrpc": "2.0", "id": 9, "result": {}}
    # A response to nothing and a notification: 202, empty.
    r = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 77, "result": {}}, headers=h)
    assert r.status_code == 202 and r.content == b""
    assert len(transport.sessions) == 1
    assert (await client.delete("/mcp", headers=h)).status_code == 200
    assert not transport.sessions
    r = await client.post("/mcp", json=call("echo", {"text": "x"}), headers=h)
    assert r.status_code == 404
    assert (await client.delete("/mcp", headers=h)).status_code == 404


@pytest.mark.anyio
async def test_bad_input_statuses(client: httpx.AsyncClient, transport: HttpTransport) -> None:
    h = await open_session(client)
    body = json.dumps(call("echo", {"text": "x"}))
    cases: list[tuple[dict[str, str], str | bytes, int]] = [
        ({**h, "Accept": "application/json"}, body, 406),
        ({**h, "Accept": "text/event-stream"}, body, 406),
        ({**h, "Content-Type": "text/plain"}, body, 415),
        ({**h, "Mcp-Session-Id": "nope"}, body, 404),
        ({k: v for k, v in h.items() if k != "Mcp-Session-Id"}, body, 400),
        ({**h, "Origin": "http://evil.example.com"}, body, 403),
        (h, b'{"jsonrpc":"2.0","id":3,', 400),  # malformed JSON in a session
        (h, b"x" * (64 * 1024 + 1), 413),
        (HEADERS, b"{not json", 400),  # malformed, no session
        (HEADERS, json.dumps(call("echo", {"text": "x"})), 400),  # no session id
    ]
    for headers, content, status in cases:
        r = await client.post("/mcp", content=content, headers=headers)
        assert r.status_code == status, (headers, content[:40], r.status_code, r.text)
    r = await client.post("/mcp", content=b"{bad", headers=h)
    assert r.json()["error"]["code"] == -32700 and r.json()["id"] is None
    # GET/DELETE: missing session 400, unknown 404, bad version 400, wrong Accept 406.
    assert (await client.get("/mcp", headers={"Accept": "text/event-stream"})).status_code == 400
    assert (await client.get("/mcp", headers={**h, "Mcp-Session-Id": "zz"})).status_code == 404
    assert (await client.get("/mcp", headers={**h, "MCP-Protocol-Version": "1999-01-01"})).status_code == 400
    assert (await client.get("/mcp", headers={**h, "Accept": "application/json"})).status_code == 406
    assert (await client.put("/mcp", headers=h)).status_code == 405
    # Allowed origins: localhost in any port; the session survived all of the above.
    r = await client.post("/mcp", content=body, headers={**h, "Origin": "http://localhost:5173"})
    assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "x"
    assert len(transport.sessions) == 1


@pytest.mark.anyio
async def test_sessions_are_capped_and_idle_ones_reaped() -> None:
    t = asgi_app(app, max_sessions=2, session_idle_timeout=0.2)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(t), base_url="http://127.0.0.1") as c:
        await open_session(c)
        await open_session(c)
        r = await c.post("/mcp", json=init_body(), headers=HEADERS)
        assert r.status_code == 503 and r.json()["error"]["code"] == -32603 and "mcp-session-id" not in r.headers
        assert await until(lambda: not t.sessions)  # reaped once idle
        await open_session(c)  # room again
    await t.aclose()
    assert not t.sessions


@pytest.mark.anyio
async def test_stateless_2026_statuses(client: httpx.AsyncClient, transport: HttpTransport) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    r = await client.post("/mcp", json=body, headers=modern_headers("server/discover"))
    assert r.status_code == 200 and r.json()["result"]["supportedVersions"] == [M2026]
    assert "mcp-session-id" not in r.headers
    r = await client.post("/mcp", json=call("echo", {"text": "m"}, meta=META), headers=modern_headers("tools/call", "echo"))
    assert r.status_code == 200 and r.json()["result"]["resultType"] == "complete"
    # Base64 header form.
    r = await client.post("/mcp", json=call("echo", {"text": "m"}, meta=META), headers=modern_headers("tools/call", "=?base64?ZWNobw==?="))
    assert r.status_code == 200
    for headers, code in [
        (modern_headers("tools/call", "other"), -32020),
        (modern_headers("tools/list", "echo"), -32020),
        ({**modern_headers("tools/call"), "Mcp-Name": ""}, -32020),
        ({k: v for k, v in modern_headers("tools/call", "echo").items() if k != "Mcp-Method"}, -32020),
    ]:
        r = await client.post("/mcp", json=call("echo", {"text": "m"}, meta=META), headers=headers)
        assert (r.status_code, r.json()["error"]["code"], r.json()["id"]) == (400, code, 2)
    r = await client.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 5, "method": "nope/x", "params": {"_meta": META}}, headers=modern_headers("nope/x")
    )
    assert (r.status_code, r.json()["error"]["code"]) == (404, -32601)
    r = await client.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {}}, headers=modern_headers("tools/list")
    )
    assert (r.status_code, r.json()["error"]["code"]) == (400, -32602)
    old = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    r = await client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": old}},
        headers={**modern_headers("tools/list"), "MCP-Protocol-Version": "2099-01-01"},
    )
    assert (r.status_code, r.json()["error"]["code"]) == (400, -32022)
    assert r.json()["error"]["data"]["supported"] == [M2026]
    # An error from a handler that answered later has the same status rule as an inline one.
    r = await client.post("/mcp", json=call("needs_sampling", {}, rid=8, meta=META), headers=modern_headers("tools/call", "needs_sampling"))
    assert (r.status_code, r.json()["error"]["code"], r.json()["id"]) == (400, -32021, 8)
    assert r.json()["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert (await client.get("/mcp", headers=modern_headers("x"))).status_code == 405
    assert (await client.delete("/mcp", headers=modern_headers("x"))).status_code == 405
    assert not transport.sessions and not transport._stateless


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"], ids=["subscribe", "unsubscribe"])
async def test_2026_has_no_resource_subscriptions(client: httpx.AsyncClient, method: str) -> None:
    # subscriptions/listen replaced them in 2026-07-28: no Mcp-Name, an unknown method (404, -32601).
    sub = {"jsonrpc": "2.0", "id": 9, "method": method, "params": {"uri": "test://r", "_meta": META}}
    r = await client.post("/mcp", json=sub, headers=modern_headers(method))
    assert (r.status_code, r.json()["error"]["code"], r.json()["id"]) == (404, -32601, 9)


@pytest.mark.anyio
async def test_mounts_under_starlette() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    t = asgi_app(app)
    outer = Starlette(routes=[Mount("/api", app=t)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(outer), base_url="http://127.0.0.1") as c:
        r = await c.post("/api/mcp", json=init_body(), headers=HEADERS)
        assert r.status_code == 200 and "mcp-session-id" in r.headers
    await t.aclose()


def test_memory_event_store_bounds_and_replay() -> None:
    store = MemoryEventStore(max_events=5)
    ids = [store.append("s", "1", f"m{i}".encode()) for i in range(4)]
    other = store.append("s", "2", b"x")
    assert store.replay("s", ids[1]) == ("1", [(ids[2], b"m2"), (ids[3], b"m3")])
    assert store.replay("s", other) == ("2", [])
    store.append("s", "1", b"m4")  # evicts m0
    assert store.replay("s", ids[0]) == ("1", [(ids[1], b"m1"), (ids[2], b"m2"), (ids[3], b"m3"), ("1-4", b"m4")])
    store.append("s", "1", b"m5")  # evicts m1: ids[0] can no longer be resumed without a gap
    assert store.replay("s", ids[0]) is None
    assert store.replay("s", "garbage") is None and store.replay("t", ids[2]) is None
    assert len(store) == 5
    store.forget("s")
    assert len(store) == 0 and store.replay("s", ids[3]) is None


def test_memory_event_store_forgets_streams_whose_events_were_all_evicted() -> None:
    """A session that opens a stream per SSE reply keeps a record of only the streams with events left."""
    store = MemoryEventStore(max_events=30)
    ids = [store.append("s", str(n), b"e") for n in range(1000) for _ in range(3)]
    assert len(store) == 30
    assert store.streams == 10
    assert store.replay("s", ids[0]) is None  # its stream was forgotten with its last event
    assert store.replay("s", ids[-3]) == ("999", [(ids[-2], b"e"), (ids[-1], b"e")])
    store.forget("s")
    assert len(store) == 0 and store.streams == 0


# ------------------------------------------------------------------ real server


@pytest.fixture(params=SERVERS)
def live(request: pytest.FixtureRequest) -> Iterator[tuple[str, HttpTransport]]:
    """A real server per test: a session one test leaves behind (when it fails midway) fails
    that test's teardown, not the next test's ``assert not t.sessions``."""
    t = asgi_app(app, keepalive=0.2, retry_ms=500)
    with serve_in_thread(t, server=request.param) as base:
        yield base + "/mcp", t
    assert not t.sessions


def sse_events(lines: Iterator[str], limit: int) -> list[dict[str, str]]:
    events: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in lines:
        if line == "":
            if current:
                events.append(current)
                current = {}
                if len(events) >= limit:
                    break
            continue
        if line.startswith(":"):
            events.append({"comment": line})
            if len(events) >= limit:
                break
            continue
        field, _, value = line.partition(":")
        current[field] = current.get(field, "") + value.removeprefix(" ")
    return events


def sync_session(c: httpx.Client, url: str) -> dict[str, str]:
    r = c.post(url, json=init_body(), headers=HEADERS)
    h = {**HEADERS, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    assert c.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h).status_code == 202
    return h


def test_progress_sse_priming_and_resume(live: tuple[str, HttpTransport]) -> None:
    url, t = live
    with httpx.Client(timeout=10) as c:
        h = sync_session(c, url)
        body = call("slow", {"steps": 3, "delay": 0.05}, meta={"progressToken": "p"})
        with c.stream("POST", url, json=body, headers=h) as r:
            assert r.headers["content-type"] == "text/event-stream"
            events = sse_events(r.iter_lines(), 5)
        assert events[0]["data"] == "" and events[0]["retry"] == "500" and events[0]["id"]
        messages = [json.loads(e["data"]) for e in events[1:]]
        assert [m["params"]["progress"] for m in messages[:3]] == [1, 2, 3]
        assert messages[3]["result"]["content"][0]["text"] == "done"
        # Resume after the first progress event: the rest of that stream only.
        with c.stream("GET", url, headers={**h, "Last-Event-ID": events[1]["id"]}) as r:
            assert r.status_code == 200
            replay = sse_events(r.iter_lines(), 10)
        assert [e["id"] for e in replay] == [e["id"] for e in events[2:]]
        r = c.get(url, headers={**h, "Last-Event-ID": "999-0"})
        assert r.status_code == 404
        assert c.delete(url, headers=h).status_code == 200
    assert not t.sessions


def test_get_stream_conflict_keepalive_and_notifications(live: tuple[str, HttpTransport]) -> None:
    url, t = live
    with httpx.Client(timeout=10) as c:
        h = sync_session(c, url)
        sub = {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": "test://r"}}
        assert c.post(url, json=sub, headers=h).json()["result"] == {}
        with c.stream("GET", url, headers=h) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            first = sse_events(lines, 1)[0]
            assert first["data"] == "" and "id" in first  # priming
            assert c.get(url, headers=h).status_code == 409
            assert c.post(url, json=call("touch", {"uri": "test://r"}, rid=4), headers=h).json()["result"]
            got = sse_events(lines, 3)
            notes = [json.loads(e["data"]) for e in got if "data" in e]
            assert notes and notes[0]["method"] == "notifications/resources/updated"
            if len(notes) == len(got):  # a keep-alive comment arrives within the idle interval
                assert any("comment" in e for e in sse_events(lines, 1))
        assert c.delete(url, headers=h).status_code == 200
    assert not t.sessions


def test_vanishing_clients_harm_nothing(live: tuple[str, HttpTransport]) -> None:
    url, t = live
    with httpx.Client(timeout=10) as c:
        h = sync_session(c, url)
        # Handshake era: a disconnect is not a cancellation; the work finishes, replayable.
        with c.stream("POST", url, json=call("slow", {"steps": 4, "delay": 0.05}, rid=11, meta={"progressToken": 1}), headers=h) as r:
            first = sse_events(r.iter_lines(), 1)[0]
        resume = {**h, "Last-Event-ID": first["id"]}
        rest: list[dict[str, Any]] = []

        def resumed() -> bool:  # 409 until the server has seen the first reader go (slow on a busy machine)
            with c.stream("GET", url, headers=resume) as r:
                if r.status_code == 409:
                    return False
                assert r.status_code == 200
                rest.extend(json.loads(e["data"]) for e in sse_events(r.iter_lines(), 10) if e.get("data"))
                return True

        assert wait_until(resumed, interval=0.05)
        assert rest and rest[-1]["id"] == 11 and rest[-1]["result"]["content"][0]["text"] == "done"
        # 2026: closing the response stream cancels the request.
        body = call("slow", {"steps": 50, "delay": 0.05}, rid="gone", meta={**META, "progressToken": 1})
        with c.stream("POST", url, json=body, headers=modern_headers("tools/call", "slow")) as r:
            assert r.status_code == 200
            next(r.iter_lines())
        assert wait_until(lambda: "gone" in cancelled)
        # The session still serves.
        assert c.post(url, json=call("echo", {"text": "ok"}, rid=12), headers=h).json()["result"]["content"][0]["text"] == "ok"
        assert c.delete(url, headers=h).status_code == 200
    assert wait_until(lambda: not t._stateless) and not t.sessions


def test_cancelled_request_gets_a_stream_that_ends_without_its_answer(live: tuple[str, HttpTransport]) -> None:
    url, t = live
    with httpx.Client(timeout=10) as c:
        h = sync_session(c, url)
        got: list[httpx.Response] = []
        post = threading.Thread(
            target=lambda: got.append(c.post(url, json=call("slow", {"steps": 200, "delay": 0.02}, rid="cx"), headers=h))
        )
        post.start()
        assert wait_until(lambda: "cx" in started)  # the cancel must reach a request that is running
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "cx"}}
        assert c.post(url, json=cancel, headers=h).status_code == 202
        post.join(10)
        (r,) = got
        # A request is answered with JSON or an SSE stream, never 202; cancelled, no answer comes.
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        events = sse_events(iter(r.text.split("\n")), 10)
        assert "cx" in cancelled
        assert all(e.get("data", "") == "" for e in events)  # the priming event at most
        assert c.post(url, json=call("echo", {"text": "ok"}, rid=13), headers=h).json()["result"]["content"][0]["text"] == "ok"
        assert c.delete(url, headers=h).status_code == 200
    assert not t.sessions


def test_legacy_http_sse_2024(live: tuple[str, HttpTransport]) -> None:
    url, t = live
    base = url.removesuffix("/mcp")
    with httpx.Client(timeout=10) as c, c.stream("GET", base + "/sse", headers={"Accept": "text/event-stream"}) as r:
        lines = r.iter_lines()
        endpoint = sse_events(lines, 1)[0]
        assert endpoint["event"] == "endpoint" and "session_id=" in endpoint["data"]
        post = base + endpoint["data"]
        assert c.post(post, json=init_body("2024-11-05"), headers=HEADERS).status_code == 202
        reply = sse_events(lines, 1)[0]
        assert reply["event"] == "message" and json.loads(reply["data"])["result"]["protocolVersion"] == "2024-11-05"
        assert c.post(post, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=HEADERS).status_code == 202
        assert c.post(post, json=call("echo", {"text": "old"}, rid=5), headers=HEADERS).status_code == 202
        msg = json.loads(sse_events(lines, 1)[0]["data"])
        assert msg["result"]["content"][0]["text"] == "old"
        assert c.post(base + "/messages?session_id=unknown", json=call("echo", {"text": "x"}), headers=HEADERS).status_code == 404
    assert wait_until(lambda: not t.sessions)  # the SSE connection closing ended the session


def test_core_sse_encoder_is_used_for_events() -> None:
    assert core.SseEncoder().encode(b"", id="1-0", retry=500) == b"id: 1-0\nretry: 500\ndata: \n\n"


def test_2026_listen_stream(live: tuple[str, HttpTransport]) -> None:
    url, t = live
    body = {
        "jsonrpc": "2.0",
        "id": "L1",
        "method": "subscriptions/listen",
        "params": {"_meta": META, "notifications": {"resourceSubscriptions": ["test://r"]}},
    }
    with httpx.Client(timeout=10) as c, c.stream("POST", url, json=body, headers=modern_headers("subscriptions/listen")) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        assert "mcp-session-id" not in r.headers
        lines = r.iter_lines()
        ack = json.loads(sse_events(lines, 1)[0]["data"])
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        touched = c.post(url, json=call("touch", {"uri": "test://r"}, rid=3, meta=META), headers=modern_headers("tools/call", "touch"))
        assert touched.status_code == 200 and touched.json()["result"]["structuredContent"] == {"result": 1}
        note = next(json.loads(e["data"]) for e in sse_events(lines, 5) if e.get("data"))
        assert note["method"] == "notifications/resources/updated"
        assert note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
    assert wait_until(lambda: not t._stateless) and not t.sessions


@app.tool(
    input_schema={
        "type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "n": {"type": "integer", "x-mcp-header": "N"}},
        "required": ["region"],
    }
)
def regional(region: str, n: int | None = None) -> str:
    """A tool whose arguments are mirrored in Mcp-Param-* headers."""
    return region


@pytest.mark.anyio
async def test_2026_param_headers(client: httpx.AsyncClient) -> None:
    base = modern_headers("tools/call", "regional")
    ok = [
        ({"region": "eu"}, {"Mcp-Param-Region": "eu"}),
        ({"region": "é", "n": 7}, {"Mcp-Param-Region": "=?base64?w6k=?=", "mcp-param-n": "07"}),
    ]
    for args, extra in ok:
        r = await client.post("/mcp", json=call("regional", args, meta=META), headers={**base, **extra})
        assert r.status_code == 200, r.text
    bad = [
        ({"region": "eu"}, {}),
        ({"region": "eu"}, {"Mcp-Param-Region": "us"}),
        ({"region": "eu", "n": 7}, {"Mcp-Param-Region": "eu", "Mcp-Param-N": "8"}),
        ({"region": "eu"}, {"Mcp-Param-Region": "eu", "Mcp-Param-N": "1"}),
    ]
    for args, extra in bad:
        r = await client.post("/mcp", json=call("regional", args, meta=META), headers={**base, **extra})
        assert (r.status_code, r.json()["error"]["code"]) == (400, -32020), (args, extra)


@pytest.mark.anyio
async def test_batch_in_2025_03_26(client: httpx.AsyncClient, transport: HttpTransport) -> None:
    h = await open_session(client, "2025-03-26")
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, call("echo", {"text": "b"}, rid=2)]
    r = await client.post("/mcp", json=batch, headers=h)
    assert r.status_code == 200
    replies = {m["id"]: m for m in r.json()}
    assert replies[1]["result"] == {} and replies[2]["result"]["content"][0]["text"] == "b"
    r = await client.post(
        "/mcp", json=[{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}], headers=h
    )
    assert r.status_code == 202


@pytest.mark.anyio
async def test_chunked_body_over_limit(client: httpx.AsyncClient, transport: HttpTransport) -> None:
    h = await open_session(client)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(3):
            yield b" " * 40_000

    r = await client.post("/mcp", content=chunks(), headers=h)
    assert r.status_code == 413 and r.headers["content-type"] == "application/json"
    assert r.json()["error"] == {"code": -32600, "message": f"request body exceeds {64 * 1024} bytes"}
    assert len(transport.sessions) == 1
