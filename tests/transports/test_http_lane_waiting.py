"""The lane's calls of ``async def`` tools that wait (``HttpLane.allow_waiting``).

The lane runs such a tool to its first wait, then hands the call to the session it belongs to
(``Connection.adopt``: in flight in its session machine) or, for a 2026-07-28 call, to a
``Later`` of its reply; the native server writes the reply when it comes, in its turn among
the connection's replies. Every reply must be the full path's (the same app served without the
lane), whatever the outcome; the call's id is in flight meanwhile (a reused id refused, the
client's cancel honoured), the session's end cancels it, a 2026-07-28 client that goes away
cancels its tool; and a tool runs once per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcpfast import Server, core
from mcpfast.protocol.errors import McpError
from mcpfast.server import ToolResult
from mcpfast.transports.http import HttpTransport, asgi_app
from mcpfast.transports.http_testing import serve_in_thread
from mcpfast.transports.metrics import with_metrics
from tests.transports.test_http_lane import M2026, Served, init, learned, modern, modern_exchange, tool_call
from tests.transports.test_http_server import Conn, post

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not core.HAS_LANE, reason="the lane is part of the compiled core; the pure-Python core has none"),
]

app = Server("waiting-test")
RUNS: Counter[str] = Counter()
"""Calls of each tool (a tool runs once per call)."""
hold = threading.Event()
CANCELLED: list[str] = []
"""The ``w_hold`` calls cancelled, by their tag."""


async def pause() -> None:
    await asyncio.sleep(0.005)  # a real wait: the lane hands the call on


@app.tool()
def echo(text: str) -> str:
    """Return the text (at once: the lane learns the header values on it)."""
    return text


@app.tool()
async def w_text(text: str) -> str:
    """A str, after a wait."""
    RUNS["w_text"] += 1
    await pause()
    return text


@app.tool()
async def w_result() -> ToolResult:
    """A result that is not one text, after a wait."""
    await pause()
    return ToolResult(content=[{"type": "text", "text": "r"}], structured={"n": 1})


@app.tool()
async def w_boom() -> str:
    """A tool failure after a wait: a result with isError."""
    await pause()
    raise ValueError("it broke")


@app.tool()
async def w_refuse() -> str:
    """A JSON-RPC error after a wait."""
    await pause()
    raise McpError(-32042, "refused here", {"why": "testing"})


@app.tool()
async def w_odd_data() -> str:
    """A JSON-RPC error whose data JSON cannot hold, after a wait."""
    RUNS["w_odd_data"] += 1
    await pause()
    raise McpError(-32042, "refused oddly", {1, 2})


@app.tool()
async def odd_data() -> str:
    """The same without a wait (the lane answers it at once)."""
    RUNS["odd_data"] += 1
    raise McpError(-32042, "refused oddly", {1, 2})


@app.tool()
def sync_odd_data() -> str:
    """The same from a sync tool."""
    RUNS["sync_odd_data"] += 1
    raise McpError(-32042, "refused oddly", {1, 2})


@app.tool()
async def w_unencodable() -> ToolResult:
    """A result JSON cannot hold, after a wait."""
    await pause()
    return ToolResult(content=[{"type": "text", "text": "x", "bad": {1, 2}}])


@app.tool()
async def w_hold(tag: str) -> str:
    """Waits until ``hold`` is set; a cancel is recorded."""
    RUNS["w_hold"] += 1
    try:
        while not hold.is_set():
            await asyncio.sleep(0.005)
    except asyncio.CancelledError:
        CANCELLED.append(tag)
        raise
    return "held " + tag


Answer = tuple[int, list[bytes], bytes]


def learned_session(served: Served, c: Conn) -> bytes:
    """A session on ``c`` whose header values the lane has learned: its headers."""
    extra = served.session(c)
    c.send(post(tool_call(0, "echo", {"text": "learn"}), extra))
    assert c.response()[0] == 200
    return extra


@contextlib.contextmanager
def holding(served: Served) -> Iterator[tuple[Conn, Conn, bytes]]:
    """Two connections and a session learned on the first, ``w_hold`` calls held until the end."""
    hold.clear()
    CANCELLED.clear()
    a, b = Conn(served.url), Conn(served.url)
    try:
        yield a, b, learned_session(served, a)
    finally:
        hold.set()
        a.close()
        b.close()


def until(done: Callable[[], object]) -> None:
    """Wait (5 s at most) until ``done()``: the server runs in another thread."""
    deadline = time.monotonic() + 5
    while not done() and time.monotonic() < deadline:
        time.sleep(0.005)


def seen(status: int, headers: dict[bytes, bytes], body: bytes) -> Answer:
    """A reply as compared: its status, its headers but ``date`` (sorted), its body."""
    return status, sorted(k + b": " + v for k, v in headers.items() if k != b"date"), body


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[Served, Served]]:
    with_lane, without = asgi_app(app), asgi_app(app)
    with serve_in_thread(with_lane) as a, serve_in_thread(without, lane=False) as b:
        yield Served(with_lane, a), Served(without, b)


CASES = [
    tool_call(1, "w_text", {"text": "hello"}),
    tool_call("a\u0041", "w_text", {"text": 'h\u00e9 "q"'}),
    tool_call(3, "w_result", {}),
    tool_call(4, "w_boom", {}),
    tool_call(5, "w_refuse", {}),
    tool_call(6, "w_odd_data", {}),
    tool_call(7, "w_unencodable", {}),
    tool_call(8, "odd_data", {}),
    tool_call(9, "sync_odd_data", {}),
]


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_every_reply_of_a_call_that_waited_equals_the_full_paths(both: tuple[Served, Served], version: str) -> None:
    got: list[list[Answer]] = []
    answered = []
    for served in both:
        c = Conn(served.url)
        try:
            extra = served.session(c, version)
            c.send(post(tool_call(0, "w_text", {"text": "learn"}), extra))
            assert c.response()[0] == 200
            before = served.answered
            out = []
            for body in CASES:
                c.send(post(body, extra))
                out.append(seen(*c.response()))
            got.append(out)
            answered.append(served.answered - before)
        finally:
            c.close()
    for body, mine, theirs in zip(CASES, *got, strict=True):
        assert mine == theirs, body
    assert answered == [len(CASES), 0]  # every call the lane's (those that waited too); none without it
    replies = [json.loads(body) for _, _, body in got[0]]
    assert replies[0]["result"]["content"] == [{"type": "text", "text": "hello"}]
    assert replies[3]["result"]["isError"] is True
    assert replies[4]["error"] == {"code": -32042, "message": "refused here", "data": {"why": "testing"}}
    assert replies[5]["error"] == replies[7]["error"] == replies[8]["error"] == {"code": -32042, "message": "refused oddly"}
    assert replies[6]["error"]["code"] == -32603


def test_a_tool_runs_once_whatever_its_error_data(both: tuple[Served, Served], caplog: pytest.LogCaptureFixture) -> None:
    lane, _ = both
    with learned(lane) as (c, extra):
        for name in ("w_odd_data", "odd_data", "sync_odd_data"):
            RUNS.clear()
            caplog.clear()
            before = lane.answered
            c.send(post(tool_call(1, name, {}), extra))
            status, _, body = c.response()
            assert (status, json.loads(body)["error"]) == (200, {"code": -32042, "message": "refused oddly"})
            assert RUNS == {name: 1}, name
            assert lane.answered == before + 1  # answered by the lane, not handed to the full path to run again
            assert f"the error data of tools/call {name!r} cannot be encoded" in caplog.text  # the session machine's rule


MODERN = [
    modern(1, "w_text", {"text": "hello"}),
    modern(2, "w_boom", {}),
    modern(3, "w_refuse", {}),
    modern(4, "w_odd_data", {}),
    modern(5, "w_unencodable", {}),
    modern(6, "w_text", {"text": 5}),  # refused before the tool ran: nothing waits
]


def test_every_2026_reply_of_a_call_that_waited_equals_the_full_paths(both: tuple[Served, Served]) -> None:
    got: list[list[Answer]] = []
    answered = []
    for served in both:
        out, count = modern_exchange(served, MODERN)
        got.append(out)
        answered.append(count)
    for (body, _), mine, theirs in zip(MODERN, *got, strict=True):
        assert mine == theirs, body
    assert answered == [len(MODERN), 0]
    first = json.loads(got[0][0][2])
    assert first["result"]["resultType"] == "complete" and first["result"]["content"] == [{"type": "text", "text": "hello"}]
    assert json.loads(got[0][3][2])["error"] == {"code": -32042, "message": "refused oddly"}
    assert json.loads(got[0][4][2])["error"]["code"] == -32603


def pipelined(served: Served, extra: bytes) -> list[bytes]:
    return [
        post(tool_call(1, "w_text", {"text": "one"}), extra),
        post(tool_call(2, "w_text", {"text": "two"}), extra),
        post(b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}', extra),
        post(tool_call(4, "w_text", {"text": "four"}), extra),
        post(*modern(5, "w_text", {"text": "five"})),
        post(tool_call(6, "w_text", {"text": "six"}), extra),
    ]


def test_pipelined_requests_behind_a_call_that_waits_are_answered_in_order(both: tuple[Served, Served]) -> None:
    got = []
    for served in both:
        with learned(served) as (c, extra):
            c.send(post(*modern(0, "w_text", {"text": "learn the 2026 headers"})))
            assert c.response()[0] == 200
            requests = pipelined(served, extra)
            c.send(b"".join(requests))
            got.append([seen(*c.response()) for _ in requests])
    mine, theirs = got
    assert mine == theirs
    assert [json.loads(body)["id"] for _, _, body in mine] == [1, 2, 3, 4, 5, 6]


def test_a_reused_id_is_refused_and_the_clients_cancel_honoured_while_a_call_waits(both: tuple[Served, Served]) -> None:
    got = []
    for served in both:
        with holding(served) as (a, b, extra):
            before = served.answered
            a.send(post(tool_call(7, "w_hold", {"tag": "first"}), extra))
            until(lambda: RUNS["w_hold"])  # running (in flight) before the next requests come
            RUNS.clear()
            b.send(post(tool_call(7, "w_text", {"text": "same id"}), extra))
            reused = seen(*b.response())
            assert RUNS["w_text"] == 0  # refused, not run
            b.send(post(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"no"}}', extra))
            assert b.response()[0] == 202
            cancelled = seen(*a.response())  # the full path's answer to a cancelled call: a stream with no reply
            assert CANCELLED == ["first"]
            b.send(post(tool_call(7, "w_text", {"text": "free again"}), extra))
            again = seen(*b.response())
            got.append((reused, cancelled, again, served.answered - before))
    (reused, cancelled, again, answered), full = got[0], got[1]
    assert (reused, cancelled, again) == full[:3]
    assert json.loads(reused[2])["error"]["message"] == "request id already in use by a request in flight"
    assert cancelled[0] == 200 and b"content-type: text/event-stream" in cancelled[1] and b'"result"' not in cancelled[2]
    assert json.loads(again[2])["result"]["content"][0]["text"] == "free again"
    assert answered == 2  # the held call, and the call after its cancel: the rest were the full path's
    assert full[3] == 0


def test_the_sessions_end_cancels_a_call_that_waits(both: tuple[Served, Served]) -> None:
    lane, _ = both
    with holding(lane) as (a, b, extra):
        before = lane.answered
        a.send(post(tool_call(1, "w_hold", {"tag": "ended"}), extra))
        sid = extra.split(b"\r\n")[0].split(b": ")[1]
        until(lambda: lane.answered > before)
        b.send(b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: " + sid + b"\r\n\r\n")
        assert b.response()[0] == 200
        until(lambda: CANCELLED)
        assert CANCELLED == ["ended"]
        assert sid.decode() not in lane.transport.sessions


def test_a_2026_client_that_goes_away_cancels_its_call(both: tuple[Served, Served]) -> None:
    for served in both:
        hold.clear()
        CANCELLED.clear()
        RUNS.clear()
        c = Conn(served.url)
        try:
            c.send(post(*modern(0, "w_text", {"text": "learn the headers"})))
            assert c.response()[0] == 200
            c.send(post(*modern(1, "w_hold", {"tag": M2026})))
            until(lambda: RUNS["w_hold"])
        finally:
            c.close()
        until(lambda: CANCELLED)
        hold.set()
        assert CANCELLED == [M2026], served.answered


def test_a_handshake_era_call_that_waits_goes_on_when_its_connection_is_lost(both: tuple[Served, Served]) -> None:
    """As on the full path: the session's request runs to its end, its reply to no one."""
    for served in both:
        hold.clear()
        CANCELLED.clear()
        a, b = Conn(served.url), Conn(served.url)
        try:
            extra = learned_session(served, b)
            RUNS.clear()
            a.send(post(tool_call(1, "w_hold", {"tag": "lost"}), extra))
            until(lambda: RUNS["w_hold"])
            a.close()
            time.sleep(0.1)
            b.send(post(tool_call(1, "w_text", {"text": "in flight still"}), extra))
            assert json.loads(b.response()[2])["error"]["message"] == "request id already in use by a request in flight"
            hold.set()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                b.send(post(tool_call(1, "w_text", {"text": "done"}), extra))
                reply = json.loads(b.response()[2])
                if "result" in reply:
                    break
                time.sleep(0.01)
            assert reply["result"]["content"][0]["text"] == "done"
            assert CANCELLED == []
        finally:
            hold.set()
            b.close()


def test_a_call_that_waits_is_counted_when_its_reply_is_written() -> None:
    counted = with_metrics(asgi_app(app))
    with serve_in_thread(counted) as url:
        transport: HttpTransport = counted.transport
        lane = transport.lane
        assert lane is not None
        with learned(Served(transport, url)) as (c, extra):

            def calls() -> int:
                tally = lane.tally()
                assert tally is not None
                return sum(n for label, status, n in tally[0] if (label, status) == ("tools/call", 200))

            hold.clear()
            before = calls()
            c.send(post(tool_call(1, "w_hold", {"tag": "counted"}), extra))
            time.sleep(0.2)
            assert calls() == before  # not answered yet: not counted
            hold.set()
            assert json.loads(c.response()[2])["result"]["content"][0]["text"] == "held counted"
            assert calls() == before + 1
            tally = lane.tally()
            assert tally is not None
            _, bounds, buckets, nanos = tally
            # its time is the request's, from its read to its reply (over 0.2 s): past the bounds below it
            slow = sum(n for bound, n in zip([*bounds, None], buckets, strict=True) if bound is None or bound > 100_000_000)
            assert slow >= 1 and nanos >= 200_000_000


def test_a_call_that_waits_runs_only_with_a_token_the_full_path_verified(tmp_path: Path) -> None:
    from mcpfast.auth import ResourceServer
    from mcpfast.auth.tokens import mint_token, new_key

    resource, issuer = "http://127.0.0.1/mcp", "https://as.example.test"
    new_key(tmp_path / "k.pem", tmp_path / "k.json")
    new_key(tmp_path / "other.pem")

    def bearer(key: str, subject: str = "alice") -> bytes:
        token = mint_token(tmp_path / key, issuer=issuer, audience=resource, subject=subject, ttl=300)
        return b"Authorization: Bearer " + token.encode() + b"\r\n"

    transport = asgi_app(app, auth=ResourceServer(str(tmp_path / "k.json"), resource, issuer=issuer))
    with serve_in_thread(transport) as url:
        served = Served(transport, url)
        c = Conn(url)
        try:
            alice = bearer("k.pem")
            c.send(post(init(), alice))
            status, headers, _ = c.response()
            assert status == 200
            extra = alice + b"Mcp-Session-Id: " + headers[b"mcp-session-id"] + b"\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            c.send(post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', extra))
            assert c.response()[0] == 202
            c.send(post(tool_call(0, "echo", {"text": "learn"}), extra))  # the full path verifies the token, the lane learns it
            assert c.response()[0] == 200
            RUNS.clear()
            before = served.answered
            c.send(post(tool_call(1, "w_text", {"text": "admitted"}), extra))
            assert json.loads(c.response()[2])["result"]["content"][0]["text"] == "admitted"
            assert served.answered == before + 1 and RUNS["w_text"] == 1  # the lane's, waited, with the token it holds
            forged = extra.replace(alice, bearer("other.pem"))  # a token no key of the server's signed
            c.send(post(tool_call(2, "w_text", {"text": "refused"}), forged))
            assert c.response()[0] == 401
            assert served.answered == before + 1 and RUNS["w_text"] == 1  # refused before the tool ran
            bob = extra.replace(alice, bearer("k.pem", "bob"))  # a good token, another subject's session
            c.send(post(tool_call(3, "w_text", {"text": "not his"}), bob))
            assert c.response()[0] == 404
            assert RUNS["w_text"] == 1
        finally:
            c.close()
