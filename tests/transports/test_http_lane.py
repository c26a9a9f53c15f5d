"""The native server's lane (``core.HttpLane``): sync tool calls answered in the core.

Every reply the lane writes must be the one the full path (``HttpTransport.handle``) writes for
the same request, byte for byte but the ``date`` line; and the lane must leave to the full path
every request it cannot judge. Both are checked against the same app served twice, once with
the lane and once without.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcpfast import Server, core
from mcpfast.protocol.errors import McpError
from mcpfast.server import ToolResult
from mcpfast.transports.http import SESSION_ID_BYTES, HttpTransport, asgi_app
from mcpfast.transports.http_server import _clock, _head
from mcpfast.transports.http_testing import serve_in_thread
from tests.transports.test_http_server import Conn, post

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not core.HAS_LANE, reason="the lane is part of the compiled core; the pure-Python core has none"),
]

app = Server("lane-test")
release = threading.Event()


@app.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@app.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Structured output."""
    return {"sum": a + b}


@app.tool()
def boom() -> str:
    """A tool that fails: its error is a result."""
    raise ValueError("it broke")


@app.tool()
def refuse() -> str:
    """A tool that answers a JSON-RPC error."""
    raise McpError(-32042, "refused here", {"why": "testing"})


@app.tool()
def unencodable() -> Any:
    """A result JSON cannot hold."""
    return ToolResult(content=[{"type": "text", "text": "x", "bad": {1, 2}}])


@app.tool()
async def slow() -> str:
    """Stays in flight until released."""
    import asyncio

    while not release.is_set():
        await asyncio.sleep(0.01)
    return "released"


def init(version: str = "2025-11-25") -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        }
    ).encode()


def tool_call(rid: Any, name: str, arguments: Any = None, *, raw: str | None = None) -> bytes:
    if raw is not None:
        return raw.encode()
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()


class Served:
    def __init__(self, transport: HttpTransport, url: str) -> None:
        self.transport = transport
        self.url = url

    @property
    def answered(self) -> int:
        lane = self.transport.lane
        return -1 if lane is None else lane.answered

    def session(self, c: Conn, version: str = "2025-11-25") -> bytes:
        c.send(post(init(version)))
        status, headers, _ = c.response()
        assert status == 200
        extra = b"Mcp-Session-Id: " + headers[b"mcp-session-id"] + b"\r\nMCP-Protocol-Version: " + version.encode() + b"\r\n"
        c.send(post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', extra))
        assert c.response()[0] == 202
        return extra


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[Served, Served]]:
    with_lane = asgi_app(app)
    without = asgi_app(app)
    with serve_in_thread(with_lane) as a, serve_in_thread(without, lane=False) as b:
        yield Served(with_lane, a), Served(without, b)


def exchange(served: Served, bodies: list[bytes], version: str = "2025-11-25") -> list[tuple[int, list[bytes], bytes]]:
    """Each body posted on one session; the replies without their ``date`` line."""
    c = Conn(served.url)
    try:
        extra = served.session(c, version)
        out = []
        for body in bodies:
            c.send(post(body, extra))
            status, headers, reply = c.response()
            out.append((status, sorted(k + b": " + v for k, v in headers.items() if k != b"date"), reply))
        return out
    finally:
        c.close()


CASES = [
    tool_call(1, "echo", {"text": "hello"}),
    tool_call("a\u0041\n", "echo", {"text": 'h\u00e9 \u2603 "q"'}),
    tool_call(123456789012345678901234567890, "echo", {"text": "big id"}),
    tool_call(-5, "echo", {"text": 5}),  # invalid arguments
    tool_call(6, "echo", {}),  # missing argument
    tool_call(7, "echo", {"text": "a", "extra": 1}),  # an argument the function does not take
    tool_call(8, "nope", {}),  # unknown tool
    tool_call(9, "add", {"a": 1, "b": 2}),  # structured output
    tool_call(10, "echo"),  # no arguments at all
    tool_call(11, "echo", [1]),  # arguments not an object
    tool_call(12, "boom", {}),
    tool_call(13, "refuse", {}),
    tool_call(14, "unencodable", {}),
    tool_call(
        15,
        "",
        raw='{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"echo","arguments":{"text":"m"},"_meta":{"progressToken":1}}}',
    ),
    tool_call(16, "", raw='{"id":16,"params":{"arguments":{"text":"order"},"name":"echo"},"method":"tools/call","jsonrpc":"2.0"}'),
    tool_call(
        17, "", raw='{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","name":"echo","arguments":{"text":"dup"}}}'
    ),
    tool_call(18, "", raw='{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"ec\\u0068o","arguments":{"text":"esc"}}}'),
    tool_call(19, "", raw='[{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"echo","arguments":{"text":"batch"}}}]'),
    tool_call(20, "", raw='{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}'),  # cut short
    tool_call(21, "", raw='{"jsonrpc":"2.0","id":21,"method":"tools/list"}'),
]


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
def test_every_reply_equals_the_full_paths(both: tuple[Served, Served], version: str) -> None:
    lane, full = both
    before = lane.answered
    got = exchange(lane, [*CASES, *CASES[:2]], version)
    want = exchange(full, [*CASES, *CASES[:2]], version)
    for body, a, b in zip([*CASES, *CASES[:2]], got, want, strict=True):
        assert a == b, body
    assert full.answered == -1  # served without a lane: every reply above came from handle
    # The first call of a session learns its header values through the full path; the plain
    # tool calls after it (echo, add, boom, refuse, unencodable, and the error replies of
    # echo's arguments) are the lane's.
    assert lane.answered - before >= 12


def test_the_lane_answers_only_after_the_full_path_accepted_the_header_values(both: tuple[Served, Served]) -> None:
    lane, _ = both
    c = Conn(lane.url)
    try:
        extra = lane.session(c)
        odd_host = b"Host: 127.0.0.1:1\r\n"  # a Host value no request carried before
        for expected in (0, 1):
            before = lane.answered
            c.send(post(tool_call(1, "echo", {"text": "h"}), extra).replace(b"Host: 127.0.0.1\r\n", odd_host))
            assert c.response()[0] == 200
            assert lane.answered - before == expected
    finally:
        c.close()


def test_ended_and_unknown_sessions_go_to_the_full_path(both: tuple[Served, Served]) -> None:
    lane, _ = both
    c = Conn(lane.url)
    try:
        extra = lane.session(c)
        c.send(post(tool_call(1, "echo", {"text": "h"}), extra))
        assert c.response()[0] == 200
        sid = extra.split(b"\r\n")[0].split(b": ")[1]
        c.send(b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: " + sid + b"\r\n\r\n")
        assert c.response()[0] == 200
        before = lane.answered
        c.send(post(tool_call(2, "echo", {"text": "h"}), extra))
        assert c.response()[0] == 404
        c.send(post(tool_call(3, "echo", {"text": "h"}), extra.replace(sid, b"x" * len(sid))))
        assert c.response()[0] == 404
        assert lane.answered == before
        assert lane.transport.lane is not None
        assert sid.decode() not in lane.transport.sessions
    finally:
        c.close()


def test_a_session_with_a_request_in_flight_is_served_by_the_full_path(both: tuple[Served, Served]) -> None:
    lane, _ = both
    release.clear()
    a, b = Conn(lane.url), Conn(lane.url)
    try:
        extra = lane.session(a)
        a.send(post(tool_call(0, "echo", {"text": "learn"}), extra))
        assert a.response()[0] == 200
        before = lane.answered
        a.send(post(tool_call(7, "slow", {}), extra))  # the lane's call, which waits for release
        b.send(post(tool_call(7, "echo", {"text": "same id"}), extra))
        status, _, body = b.response()
        assert status == 200
        assert json.loads(body)["error"]["message"] == "request id already in use by a request in flight"
        b.send(post(tool_call(8, "echo", {"text": "other id"}), extra))
        status, _, body = b.response()
        assert json.loads(body)["result"]["content"][0]["text"] == "other id"
        assert lane.answered == before + 1  # the slow call only: the others are the full path's
        release.set()
        status, _, body = a.response()
        assert status == 200 and b"released" in body
        b.send(post(tool_call(9, "echo", {"text": "after"}), extra))
        assert b.response()[0] == 200
        assert lane.answered == before + 2
    finally:
        release.set()
        a.close()
        b.close()


@contextlib.contextmanager
def learned(served: Served) -> Iterator[tuple[Conn, bytes]]:
    """A connection with a session whose header values the lane has learned."""
    c = Conn(served.url)
    try:
        extra = served.session(c)
        c.send(post(tool_call(0, "echo", {"text": "learn"}), extra))
        assert c.response()[0] == 200
        yield c, extra
    finally:
        c.close()


def test_pipelined_requests_are_answered_in_order(both: tuple[Served, Served]) -> None:
    lane, _ = both
    with learned(lane) as (c, extra):
        before = lane.answered
        bodies = [
            tool_call(1, "echo", {"text": "one"}),
            tool_call(2, "echo", {"text": "two"}),
            b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}',
            tool_call(4, "echo", {"text": "four"}),
        ]
        c.send(b"".join(post(body, extra) for body in bodies))
        ids = [json.loads(c.response()[2])["id"] for _ in bodies]
        assert ids == [1, 2, 3, 4]
        assert lane.answered - before == 2  # the ones before tools/list; the rest kept their turn
        c.send(post(tool_call(5, "echo", {"text": "bye"}), extra + b"Connection: close\r\n"))
        status, headers, _ = c.response()
        assert status == 200 and headers[b"connection"] == b"close"
        assert c.closed()
        assert lane.answered - before == 2  # a closing request is the full path's


def test_stateless_and_other_versions_are_left_to_the_full_path(both: tuple[Served, Served]) -> None:
    lane, _ = both
    with learned(lane) as (c, extra):
        before = lane.answered
        odd = extra.replace(b"MCP-Protocol-Version: 2025-11-25", b"MCP-Protocol-Version: 2026-07-28")
        c.send(post(tool_call(1, "echo", {"text": "x"}), odd))
        status, _, _ = c.response()
        assert status in (200, 400)
        assert lane.answered == before


M2026 = "2026-07-28"
PLAIN_META = {"io.modelcontextprotocol/protocolVersion": M2026, "io.modelcontextprotocol/clientCapabilities": {}}


def modern(rid: Any, name: str, arguments: Any = None, *, meta: Any = None, headers: bytes | None = None) -> tuple[bytes, bytes]:
    """A 2026-07-28 tools/call: its body and its headers (``headers`` replaces the usual ones)."""
    params: dict[str, Any] = {"name": name, "_meta": PLAIN_META if meta is None else meta}
    if arguments is not None:
        params["arguments"] = arguments
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}).encode()
    usual = b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: " + name.encode() + b"\r\n"
    return body, usual if headers is None else headers


# (request, whether the lane answers it)
MODERN_CASES: list[tuple[tuple[bytes, bytes], bool]] = [
    (modern(1, "echo", {"text": "hello"}), True),
    (modern("a\u0041\n", "echo", {"text": 'h\u00e9 \u2603 "q"'}), True),
    (modern(123456789012345678901234567890, "echo", {"text": "big id"}), True),
    (modern(4, "echo", {"text": 5}), True),  # invalid arguments: a tool error in 2026
    (modern(5, "echo"), True),  # no arguments at all
    (modern(6, "boom", {}), True),
    (modern(7, "refuse", {}), True),
    (modern(8, "unencodable", {}), True),
    (modern(9, "echo", {"text": "info"}, meta={**PLAIN_META, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}), True),
    (modern(10, "echo", {"text": "a", "extra": 1}), False),  # an argument the function does not take
    (modern(11, "nope", {}), False),
    (modern(12, "add", {"a": 1, "b": 2}), False),  # an output schema: not a plain tool
    (modern(13, "echo", [1]), False),
    (modern(14, "echo", {"text": "p"}, meta={**PLAIN_META, "progressToken": 1}), False),
    (modern(15, "echo", {"text": "l"}, meta={**PLAIN_META, "io.modelcontextprotocol/logLevel": "debug"}), False),
    (modern(16, "echo", {"text": "v"}, meta={**PLAIN_META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}), False),
    (modern(17, "echo", {"text": "c"}, meta={**PLAIN_META, "io.modelcontextprotocol/clientCapabilities": []}), False),
    (modern(18, "echo", {"text": "m"}, meta={"io.modelcontextprotocol/protocolVersion": M2026}), False),
    (modern(19, "echo", {"text": "n"}, headers=b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: add\r\n"), False),
    (
        modern(
            20,
            "echo",
            {"text": "b64"},
            headers=b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: =?base64?ZWNobw==?=\r\n",
        ),
        False,
    ),
    (modern(21, "echo", {"text": "nm"}, headers=b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Name: echo\r\n"), False),
    (
        modern(
            22,
            "echo",
            {"text": "pm"},
            headers=b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\nMcp-Param-Text: pm\r\n",
        ),
        False,
    ),
    (
        modern(
            23,
            "echo",
            {"text": "sid"},
            headers=b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\nMcp-Session-Id: x\r\n",
        ),
        False,
    ),
]


def modern_exchange(served: Served, cases: list[tuple[bytes, bytes]]) -> tuple[list[tuple[int, list[bytes], bytes]], int]:
    """2026-07-28 ``(body, headers)`` cases posted on one connection (after a call that lets the
    full path accept the header values): each reply without its ``date`` line, and how many
    the lane answered."""
    c = Conn(served.url)
    try:
        c.send(post(*modern(0, "echo", {"text": "the full path accepts these header values first"})))
        assert c.response()[0] == 200
        before = served.answered
        out = []
        for body, headers in cases:
            c.send(post(body, headers))
            status, reply_headers, reply = c.response()
            out.append((status, sorted(k + b": " + v for k, v in reply_headers.items() if k != b"date"), reply))
        return out, served.answered - before
    finally:
        c.close()


def test_every_2026_reply_equals_the_full_paths(both: tuple[Served, Served]) -> None:
    got: list[list[tuple[int, list[bytes], bytes]]] = []
    answered: list[int] = []
    for served in both:
        out, count = modern_exchange(served, [case for case, _ in MODERN_CASES])
        got.append(out)
        answered.append(count)
    lane, full = got
    for (case, _), mine, theirs in zip(MODERN_CASES, lane, full, strict=True):
        assert mine == theirs, case[0]
    assert answered == [sum(short for _, short in MODERN_CASES), 0]  # the lane's count; the other has none
    first = json.loads(lane[0][2])
    assert first["result"]["resultType"] == "complete" and first["result"]["content"] == [{"type": "text", "text": "hello"}]
    assert json.loads(lane[7][2])["error"]["code"] == -32603  # the unencodable result, answered as the full path does


def lane_of(transport: HttpTransport) -> core.HttpLane | None:
    return transport.open_lane(max_head=65536, max_body=1 << 20, head=_head, clock=_clock.get)


def test_no_lane_where_a_request_could_be_answered_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpfast.auth import ResourceServer
    from mcpfast.transports.http_server import HttpServer
    from mcpfast.transports.metrics import with_metrics

    assert lane_of(asgi_app(app)) is not None
    assert lane_of(asgi_app(app, json_response=False)) is None
    gated = asgi_app(app)
    gated.gates.append(lambda method, endpoint, headers, message: None)
    assert lane_of(gated) is None
    gated.stateless_gates.add(gated.gates[0])  # one that lets every 2026 POST through: stateless calls only
    assert lane_of(gated) is not None
    # With authentication: a lane that admits the tokens the resource server verified only, and
    # opens no session itself (each is bound to its subject by the full path).
    authed = asgi_app(app, auth=ResourceServer("http://127.0.0.1:1/jwks", "http://127.0.0.1/mcp"))
    lane = lane_of(authed)
    assert lane is not None and lane.tokens == 0
    # A gate that only watches (metrics'): the lane is lent only to whoever counts what it watches.
    watched = asgi_app(app)
    watched.gates.append(lambda method, endpoint, headers, message: None)
    watched.observers.add(watched.gates[0])
    assert lane_of(watched) is None
    counting: list[core.HttpLane] = []
    assert watched.open_lane(max_head=65536, max_body=1 << 20, head=_head, clock=_clock.get, counted=counting.append) is not None
    assert len(counting) == 1
    # A wrapper that passes attributes on to the transport lends it the lane only by opening it
    # itself: metrics' counts what the lane answers.
    counted = HttpServer(with_metrics(asgi_app(app))).lane
    assert counted is not None and counted.tally() is not None
    assert HttpServer(asgi_app(app), lane=False).lane is None
    monkeypatch.setattr(core, "HAS_LANE", False)
    assert lane_of(asgi_app(app)) is None


def test_a_stateless_only_server_has_a_lane_for_stateless_calls_only() -> None:
    from mcpfast.transports.stateless_only import stateless_only

    requests = [
        post(*modern(1, "echo", {"text": "first: the full path, which teaches the header values"})),
        post(*modern(2, "echo", {"text": "the lane's"})),
        post(init()),  # refused by the gate, lane or not
        post(tool_call(3, "echo", {"text": "handshake era"})),  # no session: the transport's 400
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n",  # 405
        post(*modern(4, "echo", {"text": "the lane's again"})),
    ]
    got = []
    answered = []
    with_lane, without = stateless_only(asgi_app(app)), stateless_only(asgi_app(app))
    with serve_in_thread(with_lane) as a, serve_in_thread(without, lane=False) as b:
        for transport, url in ((with_lane, a), (without, b)):
            c = Conn(url)
            try:
                out = []
                for raw in requests:
                    c.send(raw)
                    status, headers, body = c.response()
                    out.append((status, sorted(k + b": " + v for k, v in headers.items() if k != b"date"), body))
                got.append(out)
                answered.append(-1 if transport.lane is None else transport.lane.answered)
            finally:
                c.close()
    assert got[0] == got[1]
    assert [status for status, _, _ in got[0]] == [200, 200, 400, 400, 405, 200]
    assert answered == [2, -1]
    assert with_lane.lane is not None and with_lane.lane.born == 0


def test_a_replaced_tools_call_route_is_not_bypassed() -> None:
    own = Server("routes")

    @own.tool()
    def echo(text: str) -> str:
        return text

    assert own.run_plain_tool("echo", {"text": "x"}, "2025-11-25") == "x"  # the text of a one-text-content result
    own.routes["tools/call"] = lambda request, conn: {"content": [{"type": "text", "text": "routed"}]}
    assert own.run_plain_tool("echo", {"text": "x"}, "2025-11-25") is None


# ---------------------------------------------------------------- sessions the lane opens


def masked(status: int, headers: dict[bytes, bytes], body: bytes) -> tuple[int, list[bytes], bytes]:
    """A reply without its ``date`` line, its session id replaced (each server draws its own)."""
    sid = headers.get(b"mcp-session-id")
    lines = sorted(k + b": " + (b"<id>" if k == b"mcp-session-id" else v) for k, v in headers.items() if k != b"date")
    return status, lines, body.replace(sid, b"<id>") if sid else body


def lifecycle(served: Served, init_body: bytes, version: str) -> list[tuple[int, list[bytes], bytes]]:
    """initialize, initialized, a call, DELETE, a call after it: every reply, masked."""
    c = Conn(served.url)
    try:
        c.send(post(init_body))
        status, headers, body = c.response()
        out = [masked(status, headers, body)]
        sid = headers.get(b"mcp-session-id")
        if sid is None:
            return out
        extra = b"Mcp-Session-Id: " + sid + b"\r\nMCP-Protocol-Version: " + version.encode() + b"\r\n"
        for request in (
            post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', extra),
            post(tool_call(1, "echo", {"text": "born"}), extra),
            b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + b"\r\n",
            post(tool_call(2, "echo", {"text": "gone"}), extra),
        ):
            c.send(request)
            out.append(masked(*c.response()))
        return out
    finally:
        c.close()


def raw_init(params: Any, rid: Any = 0) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": "initialize", "params": params}
    if rid is not None:
        message["id"] = rid
    return json.dumps(message).encode()


INFO = {"name": "t", "version": "1"}


@pytest.mark.parametrize("requested", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "1999-01-01"])
def test_a_session_opened_by_the_lane_answers_as_the_full_path(both: tuple[Served, Served], requested: str) -> None:
    lane, full = both
    body = raw_init({"protocolVersion": requested, "capabilities": {}, "clientInfo": INFO}, "x")
    negotiated = requested if requested != "1999-01-01" else "2025-11-25"
    lifecycle(lane, body, negotiated)  # the first of a version is the full path's, and teaches the lane
    before = lane.answered
    got = lifecycle(lane, body, negotiated)
    want = lifecycle(full, body, negotiated)
    assert got == want
    assert [r[0] for r in got] == [200, 202, 200, 200, 404]
    # initialize, initialized, the call and DELETE were the lane's; the call after DELETE is not
    assert lane.answered - before == 4


@pytest.mark.parametrize(
    "body",
    [
        raw_init({"protocolVersion": 20251125, "capabilities": {}, "clientInfo": INFO}),
        raw_init({"protocolVersion": "2025-11-25", "capabilities": [], "clientInfo": INFO}),
        raw_init({"protocolVersion": "2025-11-25", "capabilities": {}}),
        raw_init({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": "t"}),
        raw_init({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": INFO, "_meta": {"k": 1}}),
        raw_init({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": INFO}, rid=None),
        raw_init(["2025-11-25"]),
        b'[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{}}}]',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{}',
    ],
)
def test_an_initialize_the_lane_may_not_answer_is_the_full_paths(both: tuple[Served, Served], body: bytes) -> None:
    lane, full = both
    lifecycle(lane, init(), "2025-11-25")
    before = lane.answered
    assert lifecycle(lane, body, "2025-11-25")[0] == lifecycle(full, body, "2025-11-25")[0]
    # with an extra member the session machine would take it; the lane leaves it all the same
    assert lane.answered == before or b"_meta" in body


def make_app(name: str, instructions: str | None = None) -> Server:
    own = Server(name, instructions=instructions)

    @own.tool()
    def echo(text: str) -> str:
        return text

    @own.tool()
    def announce() -> str:
        """Tell every session the tool list changed: how many were told."""
        return str(own.notify_list_changed("tools"))

    return own


def born_session(c: Conn, initialized: bool = True) -> bytes:
    c.send(post(init()))
    status, headers, _ = c.response()
    assert status == 200
    extra = b"Mcp-Session-Id: " + headers[b"mcp-session-id"] + b"\r\nMCP-Protocol-Version: 2025-11-25\r\n"
    if initialized:
        c.send(post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', extra))
        assert c.response()[0] == 202
    return extra


def sid_of(extra: bytes) -> str:
    return extra.split(b"\r\n")[0].split(b": ")[1].decode()


@contextlib.contextmanager
def served_apps(**options: Any) -> Iterator[tuple[Served, Served]]:
    """A fresh app served with the lane and another (the same code) without it."""
    a, b = asgi_app(make_app("births-a"), **options), asgi_app(make_app("births-b"), **options)
    with serve_in_thread(a) as url_a, serve_in_thread(b, lane=False) as url_b:
        yield Served(a, url_a), Served(b, url_b)


def test_the_table_takes_over_a_session_for_the_first_request_the_lane_leaves() -> None:
    with served_apps() as (lane, _):
        lane_ = lane.transport.lane
        assert lane_ is not None
        c = Conn(lane.url)
        try:
            born_session(c)  # teaches the lane
            extra = born_session(c)
            sid = sid_of(extra)
            assert lane_.born == 1 and sid not in lane.transport.table.sessions
            # as the full path draws them: SESSION_ID_BYTES random bytes, base64url
            others = {sid_of(born_session(c, initialized=False)) for _ in range(50)}
            assert len(others | {sid}) == 51
            assert all(re.fullmatch(rf"[A-Za-z0-9_-]{{{SESSION_ID_BYTES * 4 // 3}}}", s) for s in others | {sid})
            assert lane_.born == 51
            c.send(post(b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}', extra))
            status, _, body = c.response()
            assert status == 200 and {t["name"] for t in json.loads(body)["result"]["tools"]} == {"echo", "announce"}
            assert lane_.born == 50
            sess = lane.transport.table.sessions[sid]
            assert sess.version == "2025-11-25" and sess.conn.session.state.value == "ready"
            before = lane.answered
            c.send(post(tool_call(6, "echo", {"text": "held now"}), extra))
            assert c.response()[0] == 200
            assert lane.answered == before + 1  # now served as a session of the table's
        finally:
            c.close()


def read_until(c: Conn, needle: bytes, seconds: float = 5.0) -> bytes:
    c.sock.settimeout(seconds)
    while needle not in c.buf:
        if not c._fill():
            break
    return c.buf


def test_the_server_speaking_to_every_session_reaches_those_the_lane_opened() -> None:
    # `announce` is a sync tool the lane serves: while it runs, the table takes over the sessions
    # the lane holds (the one calling included), so the lane must not be borrowed then.
    results = []
    with served_apps() as pair:
        for served in pair:
            a, b = Conn(served.url), Conn(served.url)
            try:
                born_session(a)
                listener = born_session(a)
                a.send(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n" + listener + b"\r\n")
                read_until(a, b"\n\n")  # the stream is open (its priming event)
                caller = born_session(b)
                before = served.answered
                b.send(post(tool_call(1, "announce", {}), caller))
                status, _, body = b.response()
                told = json.loads(body)["result"]["content"][0]["text"]
                got = read_until(a, b"notifications/tools/list_changed")
                results.append((status, told, b"notifications/tools/list_changed" in got))
                lane = served.transport.lane
                assert lane is None or (lane.born == 0 and served.answered == before + 1)
                assert len(served.transport.table.sessions) == 3
            finally:
                a.close()
                b.close()
    assert results[0] == results[1] == (200, "3", True)


def test_sessions_the_lane_opened_count_against_the_limit() -> None:
    with served_apps(max_sessions=3) as (lane, full):
        for served in (lane, full):
            c = Conn(served.url)
            try:
                sessions = [born_session(c) for _ in range(3)]
                c.send(post(init()))
                status, _, body = c.response()
                assert status == 503 and b"too many sessions" in body
                c.send(b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + sessions[1] + b"\r\n")
                assert c.response()[0] == 200
                born_session(c)
                c.send(post(init()))
                assert c.response()[0] == 503
            finally:
                c.close()
        assert lane.transport.lane is not None and lane.transport.lane.born == 2


def test_a_session_the_lane_opened_ends_when_idle() -> None:
    with served_apps(session_idle_timeout=0.3) as (lane, _):
        c = Conn(lane.url)
        try:
            born_session(c)
            extra = born_session(c)
            assert lane.transport.lane is not None and lane.transport.lane.born >= 1
            import time

            time.sleep(0.5)
            c.send(post(tool_call(1, "echo", {"text": "late"}), extra))
            assert c.response()[0] == 404
            assert lane.transport.lane.born == 0
        finally:
            c.close()


def test_a_changed_server_is_not_answered_with_the_old_reply() -> None:
    own = make_app("changing", instructions="before")
    transport = asgi_app(own)
    with serve_in_thread(transport) as url:
        served = Served(transport, url)
        c = Conn(url)
        try:
            for expected in ("before", "before"):
                c.send(post(init()))
                assert json.loads(c.response()[2])["result"]["instructions"] == expected
            own.instructions = "after"
            for _ in range(2):
                before = served.answered
                c.send(post(init()))
                assert json.loads(c.response()[2])["result"]["instructions"] == "after"
            assert served.answered == before + 1  # the first after the change taught the lane again
        finally:
            c.close()
