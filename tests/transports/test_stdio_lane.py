"""The stdio transport's short way (``core.StdioLane``): a plain sync tool call is answered in
the core, with the bytes the session machine would have written; every other line takes the
session machine's full path, in order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from test_stdio import INIT, INITIALIZED

from mcpfast import Server, core
from mcpfast.protocol.errors import McpError
from mcpfast.server.connection import Connection
from mcpfast.transports.stdio import serve_stdio

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(20)]

MAX_LINE = 4096
RUNS: list[str] = []
"""The tools that ran, in order (a tool runs once per call, whatever its outcome)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_app(release: asyncio.Event) -> Server:
    app = Server("lane-test")

    @app.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @app.tool()
    def shout(text: str):  # type: ignore[no-untyped-def]  # no return annotation: no output schema
        """A result that is not a str."""
        return [text.upper(), len(text)]

    @app.tool()
    def fails() -> str:
        """A tool failure: a result with isError."""
        raise ValueError("it failed")

    @app.tool()
    def refuses() -> str:
        """A JSON-RPC error from the tool."""
        raise McpError(-32001, "refused", {"why": "because"})

    @app.tool()
    def odd_data() -> str:
        """A JSON-RPC error whose data JSON cannot hold: sent without it (and logged)."""
        RUNS.append("odd_data")
        raise McpError(-32001, "refused oddly", {1, 2})

    @app.tool()
    def weird() -> str:
        """A result JSON cannot hold (a lone surrogate): -32603."""
        return "\ud800"

    @app.tool()
    async def held() -> str:
        """In flight until the input ends."""
        await release.wait()
        return "released"

    return app


def line(message: Any) -> bytes:
    return message if isinstance(message, bytes) else json.dumps(message, separators=(",", ":")).encode()


def call(rid: Any, name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


# One read per entry: the session's whole life, with every kind of line the lane must leave alone.
READS: list[bytes] = [
    line(call("early", "echo", {"text": "before initialize"})) + b"\n",
    line(INIT) + b"\n" + line(INITIALIZED) + b"\n",
    line(call(1, "echo", {"text": "one"})) + b"\n",
    b"".join(line(call(rid, "echo", {"text": str(rid)})) + b"\n" for rid in ("two", 2**70, 3)),
    line(call(4, "echo")) + b"\n",  # no arguments: text is missing
    line(call(5, "echo", {"text": 5})) + b"\n",  # a bad argument
    line(call(6, "echo", {"text": "x", "extra": 1})) + b"\n",  # an argument the function does not take
    line(call(7, "no-such-tool", {})) + b"\n",
    line(call(8, "shout", {"text": "loud"})) + b"\n",
    line(call(9, "fails", {})) + b"\n",
    line(call(10, "refuses", {})) + b"\n",
    line(call(11, "weird", {})) + b"\n",
    line(call(12, "echo", {"text": "progress"}, _meta={"progressToken": "p"})) + b"\n",
    line(call(13, "echo", {"text": "task"}, task={})) + b"\n",
    b"[" + line(call(14, "echo", {"text": "batch"})) + b"]\n",
    b'{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"echo","arguments":{"text":"cut"}\n',  # bad JSON
    line(call(16, "held")) + b"\n",
    line(call(16, "echo", {"text": "same id as the held call"})) + b"\n",
    line(call(17, "echo", {"text": "a"}))
    + b"\n"
    + line({"jsonrpc": "2.0", "id": 18, "method": "ping"})
    + b"\n"
    + line(call(19, "echo", {"text": "b"}))
    + b"\n",
    line(call(20, "echo", {"text": "x" * MAX_LINE})) + b"\n" + line(call(21, "echo", {"text": "after the long line"})) + b"\n",
    line(call(23, "odd_data", {})) + b"\n",
    line(call(22, "echo", {"text": "the last line, unterminated"})),
]
"""Lines of these ids the lane answers (the compiled core's: the pure-Python one answers none)."""
ANSWERED = {1, "two", 2**70, 3, 4, 5, 8, 9, 10, 11, 17, 22, 23}


class Reads:
    """stdin: each read returns one entry of ``READS``; then EOF, which lets the held call finish."""

    def __init__(self, release: asyncio.Event) -> None:
        self.reads = list(READS)
        self.release = release

    async def read(self, n: int) -> bytes:
        await asyncio.sleep(0)  # let what the last read started run, as between real reads
        if self.reads:
            return self.reads.pop(0)
        self.release.set()
        return b""


class Out:
    def __init__(self) -> None:
        self.data = bytearray()
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.data += data
        self.writes += 1

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def fed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The ids of the lines that reached the session machine (``Connection.feed``)."""
    seen: list[Any] = []
    feed = Connection.feed

    def recording(self: Connection, data: bytes, tag: object = None) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            message = "not JSON"
        seen.append(message.get("id") if isinstance(message, dict) else "batch" if isinstance(message, list) else message)
        feed(self, data, tag)

    monkeypatch.setattr(Connection, "feed", recording)
    yield seen


async def serve(lane: bool) -> bytes:
    release = asyncio.Event()
    out = Out()
    await serve_stdio(make_app(release), Reads(release), out, max_line=MAX_LINE, shutdown_grace=5.0, lane=lane)  # type: ignore[arg-type]
    return bytes(out.data)


LINES = [part for part in b"".join(READS).split(b"\n") if part]


async def test_the_lane_writes_the_session_machines_bytes(fed: list[Any]) -> None:
    full = await serve(lane=False)
    assert len(fed) == len(LINES) - 1  # every line but the long one (the framer reports it)
    short = await serve(lane=True)
    assert short == full
    replies = [json.loads(reply) for reply in full.splitlines()]
    by_id = {reply.get("id"): reply for reply in replies}
    assert by_id["early"]["error"]["code"] == -32600
    assert by_id[1]["result"] == {"content": [{"type": "text", "text": "one"}]}
    assert by_id[2**70]["result"]["content"][0]["text"] == str(2**70)
    assert by_id[5]["result"]["isError"] is True
    assert by_id[8]["result"]["content"][0]["text"] == '["LOUD",4]'
    assert by_id[9]["result"]["isError"] is True
    assert by_id[10]["error"] == {"code": -32001, "message": "refused", "data": {"why": "because"}}
    assert by_id[11]["error"]["code"] == -32603 and "cannot be encoded" in by_id[11]["error"]["message"]
    assert by_id[23]["error"] == {"code": -32001, "message": "refused oddly"}
    order = [reply.get("id") for reply in replies]
    assert order.index(17) < order.index(18) < order.index(19)
    too_long = next(i for i, r in enumerate(replies) if "exceeds the limit" in r.get("error", {}).get("message", ""))
    assert too_long < order.index(21)
    assert order[-1] == 16 and by_id[16]["result"]["content"][0]["text"] == "released"
    assert [r["error"]["message"] for r in replies if r.get("id") == 16 and "error" in r] == [
        "request id already in use by a request in flight"
    ]


@pytest.mark.skipif(core.IMPLEMENTATION != "rust", reason="the pure-Python core's StdioLane answers no line: it frames")
async def test_plain_sync_calls_do_not_reach_the_session_machine(fed: list[Any]) -> None:
    await serve(lane=True)
    assert not ANSWERED & set(fed)
    assert len(fed) == len(LINES) - 1 - len(ANSWERED)
    assert set(fed) == {"early", 0, None, 6, 7, 12, 13, "batch", "not JSON", 16, 18, 19, 21}


def test_the_lane_frames_as_the_line_framer_until_it_serves() -> None:
    lane = core.StdioLane(16, lambda name, arguments, version: "x", lambda rid, exc, what: b"", lambda rid, code, message, data, what: b"")
    framer = core.LineFramer(16)
    data = b"one\r\ntwo\n" + b"y" * 20 + b"\nthr"
    assert lane.feed(data) == (b"", framer.feed(data))
    assert lane.close() == (b"", framer.close())
    with pytest.raises(ValueError, match="max_line"):
        core.StdioLane(0, lambda name, arguments, version: None, lambda rid, exc, what: b"", lambda rid, code, message, data, what: b"")


@pytest.mark.skipif(core.IMPLEMENTATION != "rust", reason="the pure-Python core's StdioLane answers no line: it frames")
def test_the_lane_answers_a_read_of_plain_calls_at_once() -> None:
    seen: list[tuple[str, Any, str]] = []

    def run_tool(name: str, arguments: Any, version: str) -> str | None:
        seen.append((name, arguments, version))
        return None if name == "other" else f"{name}:{arguments['text']}"

    lane = core.StdioLane(1024, run_tool, lambda rid, exc, what: b"", lambda rid, code, message, data, what: b"")
    lane.serve("2025-11-25", {7: "in flight"})
    calls = b"".join(line(call(rid, "echo", {"text": str(rid)})) + b"\n" for rid in (1, 2))
    assert lane.feed(calls) == (
        b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"echo:1"}]}}\n'
        b'{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"echo:2"}]}}\n'
    )
    assert lane.answered == 2 and seen == [("echo", {"text": "1"}, "2025-11-25"), ("echo", {"text": "2"}, "2025-11-25")]
    # A reused id, then a tool run_tool does not serve: left, with what follows them.
    reused = line(call(7, "echo", {"text": "7"}))
    other = line(call(8, "other", {"text": "8"}))
    after = line(call(9, "echo", {"text": "9"}))
    replies, rest = lane.feed(calls[: calls.index(b"\n") + 1] + reused + b"\n" + after + b"\n")  # type: ignore[misc]
    assert replies.count(b"\n") == 1 and rest == [reused, after]
    replies, rest = lane.feed(other + b"\n" + after + b"\n")  # type: ignore[misc]
    assert replies == b"" and rest == [other, after] and seen[-1][0] == "other"
    assert lane.answered == 3


async def test_a_tool_runs_once_whatever_its_error_data(caplog: pytest.LogCaptureFixture) -> None:
    for lane in (False, True):
        RUNS.clear()
        caplog.clear()
        await serve(lane=lane)
        assert RUNS == ["odd_data"], lane  # answered where it ran: never handed on to run again
        # the session machine's rule and log line (``error_reply``), whoever wrote the reply
        assert "the error data of tools/call 'odd_data' cannot be encoded" in caplog.text, lane
