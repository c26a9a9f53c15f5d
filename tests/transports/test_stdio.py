"""The stdio transport: concurrency, ordering, bad input, limits, backpressure, EOF."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from _support import until

from mcpfast import Context, Server
from mcpfast.protocol import TranscriptValidator
from mcpfast.transports.stdio import serve_stdio

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(20)]

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Probe:
    """Counts what the test app's handlers saw."""

    def __init__(self) -> None:
        self.calls = 0
        self.running = 0
        self.peak = 0
        self.cancelled = 0


def make_app(probe: Probe) -> Server:
    app = Server("transport-test")

    @app.tool()
    def echo(text: str) -> str:
        """Return the text."""
        probe.calls += 1
        return text

    @app.tool()
    async def slow(seconds: float, ctx: Context) -> str:
        """Sleep, counting concurrency and cancellations."""
        probe.running += 1
        probe.peak = max(probe.peak, probe.running)
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            probe.cancelled += 1
            raise
        finally:
            probe.running -= 1
        return f"slept {seconds}"

    @app.tool()
    async def count(n: int, ctx: Context) -> str:
        """Report n progress steps."""
        for i in range(n):
            ctx.report_progress(i + 1, n)
            await asyncio.sleep(0)
        return "counted"

    return app


class FakeWriter:
    """A stdout whose reader can stop reading (``drain`` blocks while the gate is closed)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.gate = asyncio.Event()
        self.gate.set()
        self.closed = False
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.data += data
        self.writes += 1

    async def drain(self) -> None:
        await self.gate.wait()

    def close(self) -> None:
        self.closed = True

    def messages(self) -> list[Any]:
        return [orjson.loads(line) for line in bytes(self.data).splitlines()]


class Harness:
    def __init__(self, probe: Probe | None = None, **options: Any) -> None:
        self.probe = probe or Probe()
        self.app = make_app(self.probe)
        self.reader = asyncio.StreamReader()
        self.writer = FakeWriter()
        self.sent: list[bytes] = []
        self.task = asyncio.get_running_loop().create_task(serve_stdio(self.app, self.reader, self.writer, **options))  # type: ignore[arg-type]

    def send(self, *messages: Any) -> None:
        for message in messages:
            line = message if isinstance(message, bytes) else orjson.dumps(message)
            self.sent.append(line)
            self.reader.feed_data(line + b"\n")

    def call(self, rid: Any, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> None:
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if meta:
            params["_meta"] = meta
        self.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})

    async def wait_for(self, predicate: Any, timeout: float = 15.0) -> list[Any]:
        async with asyncio.timeout(timeout):
            while True:
                messages = self.writer.messages()
                if predicate(messages):
                    return messages
                await asyncio.sleep(0.005)

    async def reply(self, rid: Any) -> dict[str, Any]:
        messages = await self.wait_for(lambda ms: any(m.get("id", object()) == rid and "method" not in m for m in ms))
        return next(m for m in messages if m.get("id", object()) == rid and "method" not in m)

    async def close(self) -> list[Any]:
        self.reader.feed_eof()
        await asyncio.wait_for(self.task, 10)
        messages = self.writer.messages()
        checker = TranscriptValidator()
        for line in self.sent:
            try:
                checker.client(line)
            except ValueError:
                pass  # the malformed lines of the bad-input tests
        for message in messages:
            checker.server(message)
        return messages


async def test_many_in_flight_answered_out_of_order() -> None:
    h = Harness()
    h.send(INIT, INITIALIZED)
    h.call(1, "slow", {"seconds": 0.3})
    h.call(2, "echo", {"text": "fast"})
    fast = await h.reply(2)
    assert fast["result"]["content"][0]["text"] == "fast"
    assert "id" not in [m.get("id") for m in h.writer.messages() if m.get("id") == 1]
    slow = await h.reply(1)
    assert slow["result"]["content"][0]["text"] == "slept 0.3"
    await h.close()


async def test_bad_input_is_answered_and_the_stream_goes_on() -> None:
    h = Harness()
    h.send(INIT, INITIALIZED)
    h.call(1, "slow", {"seconds": 0.2})
    h.send(
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call",',  # truncated JSON
        b"\xff\xfe not utf-8",
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[1,2]}',  # params must be an object
        b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":5}}',  # name must be a string
        b'{"jsonrpc":"2.0","id":5,"method":"no/such/method"}',
        b'{"jsonrpc":"2.0","id":true,"method":"ping"}',  # bool id
        b'{"jsonrpc":"2.0","id":6}',  # neither request nor reply
        b"[]",  # empty batch
        b'"just a string"',
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":3}}}',
        b'{"jsonrpc":"2.0","id":8,"method":"ping"}',
    )
    slow = await h.reply(1)
    assert slow["result"]["content"][0]["text"] == "slept 0.2"
    messages = await h.close()
    # Engine-level errors go out at once, handler-level ones when their task runs: any order.
    errors = sorted(((m.get("id"), m["error"]["code"]) for m in messages if "error" in m), key=str)
    assert errors == sorted(
        [
            (None, -32700),
            (None, -32700),
            (3, -32602),
            (4, -32602),
            (5, -32601),
            (None, -32600),
            (6, -32600),
            (None, -32600),
            (None, -32600),
        ],
        key=str,
    )
    bad_args = next(m for m in messages if m.get("id") == 7)
    assert bad_args["result"]["isError"] is True  # 2025-11-25: input validation is a tool error
    assert next(m for m in messages if m.get("id") == 8)["result"] == {}


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_every_handshake_version_speaks_its_own_schema(version: str) -> None:
    h = Harness()
    h.send({**INIT, "params": {**INIT["params"], "protocolVersion": version}}, INITIALIZED)
    assert (await h.reply(0))["result"]["protocolVersion"] == version
    h.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    h.call(3, "count", {"n": 2}, progressToken="t")
    h.call(4, "echo", {"text": "v"})
    for rid in (1, 2, 3, 4):
        await h.reply(rid)
    await h.close()  # every message checked against the schema of `version`


async def test_input_errors_are_protocol_errors_before_2025_11_25() -> None:
    h = Harness()
    h.send({**INIT, "params": {**INIT["params"], "protocolVersion": "2025-06-18"}}, INITIALIZED)
    h.call(1, "echo", {"text": 3})
    assert (await h.reply(1))["error"]["code"] == -32602
    await h.close()


async def test_requests_before_initialize() -> None:
    h = Harness()
    h.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert (await h.reply(1))["error"]["code"] == -32600
    assert (await h.reply(2))["result"] == {}
    h.send(INIT)
    assert (await h.reply(0))["result"]["protocolVersion"] == "2025-11-25"
    await h.close()


async def test_cancelled_initialize_is_still_answered() -> None:
    h = Harness()
    h.send(INIT, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}, INITIALIZED)
    assert (await h.reply(0))["result"]["serverInfo"]["name"] == "transport-test"
    h.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert "tools" in (await h.reply(1))["result"]
    await h.close()


async def test_cancellation_stops_work_and_suppresses_the_reply() -> None:
    h = Harness()
    h.send(INIT, INITIALIZED)
    h.call(1, "slow", {"seconds": 30}, progressToken="p")
    assert await until(lambda: h.probe.running == 1)  # the cancel reaches a handler that is running
    h.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "enough"}})
    h.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})  # twice: ignored
    h.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    await h.reply(2)
    await h.wait_for(lambda _: h.probe.cancelled == 1)
    messages = await h.close()
    assert not any(m.get("id") == 1 for m in messages)


async def test_oversized_line_is_answered_and_skipped() -> None:
    h = Harness(max_line=1000)
    h.send(INIT, INITIALIZED)
    h.call(1, "echo", {"text": "x" * 5000})
    h.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert (await h.reply(2))["result"] == {}
    messages = await h.close()
    oversize = [m for m in messages if "error" in m]
    assert len(oversize) == 1 and oversize[0]["id"] is None and oversize[0]["error"]["code"] == -32600


async def test_in_flight_bound() -> None:
    h = Harness(max_in_flight=2)
    h.send(INIT, INITIALIZED)
    for i in range(6):
        h.call(i + 1, "slow", {"seconds": 0.05})
    for i in range(6):
        await h.reply(i + 1)
    assert h.probe.peak == 2
    await h.close()


async def test_client_that_stops_reading_pauses_input() -> None:
    h = Harness()
    h.send(INIT, INITIALIZED)
    await h.reply(0)
    h.writer.gate.clear()  # the client stops reading stdout
    text = "y" * 1000
    for i in range(1, 1001):
        h.call(i, "echo", {"text": text})
    previous = -1
    for _ in range(50):  # until no call was taken for 0.3 s (15 s at most): where the server stopped
        if h.probe.calls == previous:
            break
        previous = h.probe.calls
        await asyncio.sleep(0.3)
    stalled = h.probe.calls
    assert stalled < 200  # the server stopped reading input instead of buffering every reply
    h.writer.gate.set()
    await h.wait_for(lambda ms: len(ms) == 1001)
    assert h.probe.calls == 1000
    await h.close()


async def test_eof_cancels_work_in_flight() -> None:
    h = Harness(shutdown_grace=0.1)
    h.send(INIT, INITIALIZED)
    h.call(1, "slow", {"seconds": 30})
    h.call(2, "slow", {"seconds": 0.01})
    await h.reply(2)
    loop = asyncio.get_running_loop()
    start = loop.time()
    messages = await h.close()
    assert loop.time() - start < 10  # the 30 s call was cancelled after the grace, not awaited
    assert h.probe.cancelled == 1 and h.writer.closed
    assert not any(m.get("id") == 1 for m in messages)


async def test_undeclared_feature_is_method_not_found() -> None:
    h = Harness()
    h.send(INIT, INITIALIZED)
    h.send({"jsonrpc": "2.0", "id": 1, "method": "resources/list"})
    assert (await h.reply(1))["error"]["code"] == -32601  # the test app offers no resources
    await h.close()


async def test_progress_goes_out_before_the_reply() -> None:
    h = Harness()
    h.send(INIT, INITIALIZED)
    h.call(1, "count", {"n": 3}, progressToken=7)
    await h.reply(1)
    messages = await h.close()
    kinds = [m.get("method", "reply") for m in messages if m.get("id") != 0]
    assert kinds == ["notifications/progress"] * 3 + ["reply"]


async def test_batch_in_2025_03_26() -> None:
    h = Harness()
    h.send({**INIT, "params": {**INIT["params"], "protocolVersion": "2025-03-26"}}, INITIALIZED)
    await h.reply(0)
    h.send(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 0.05}}},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/whatever"},
        ]
    )
    messages = await h.wait_for(lambda ms: any(isinstance(m, list) for m in ms))
    (batch,) = [m for m in messages if isinstance(m, list)]
    assert sorted(r["id"] for r in batch) == [1, 2]
    await h.close()


async def test_stateless_2026_requests() -> None:
    h = Harness()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    h.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}})
    h.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}, "_meta": meta}})
    discover = await h.reply(1)
    assert discover["result"]["supportedVersions"] == ["2026-07-28"]
    called = await h.reply(2)
    assert called["result"]["resultType"] == "complete"
    await h.close()


async def test_replies_of_one_chunk_go_out_in_one_write() -> None:
    h = Harness()
    h.send(INIT, INITIALIZED)
    await h.reply(0)
    writes = h.writer.writes
    chunk = b"".join(
        orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": str(i)}}}) + b"\n"
        for i in range(1, 33)
    )
    h.sent += chunk.splitlines()
    h.reader.feed_data(chunk)
    await h.wait_for(lambda ms: len(ms) == 33)
    assert h.writer.writes == writes + 1  # 32 inline replies, one write
    await h.close()


async def test_blocking_tool_leaves_the_stream_responsive() -> None:
    import threading

    h = Harness()
    release = threading.Event()

    @h.app.tool(blocking=True)
    def nap(seconds: float) -> str:
        """Block the worker thread (until the test saw the other call answered)."""
        release.wait(seconds)
        return "rested"

    h.send(INIT, INITIALIZED)
    h.call(1, "nap", {"seconds": 30})
    h.call(2, "echo", {"text": "quick"})
    assert (await h.reply(2))["result"]["content"][0]["text"] == "quick"
    assert not any(m.get("id") == 1 for m in h.writer.messages())
    release.set()
    assert (await h.reply(1))["result"]["content"][0]["text"] == "rested"
    await h.close()


# --------------------------------------------------------- a real subprocess


async def test_real_process_stdout_carries_only_protocol() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mcpfast", "serve", "--transport", "stdio", "--app", "stdio_app:app",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=str(ROOT), env=env,
    )  # fmt: skip
    assert proc.stdin is not None
    lines = [
        INIT,
        INITIALIZED,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "noisy", "arguments": {"text": "quiet"}}},
    ]
    proc.stdin.write(b"".join(orjson.dumps(line) + b"\n" for line in lines) + b"garbage\n")
    await proc.stdin.drain()
    assert proc.stdout is not None
    # the three answers (0, 1 and the parse error) before the EOF: an EOF cancels work in flight
    early = [await asyncio.wait_for(proc.stdout.readline(), 30) for _ in range(3)]
    proc.stdin.close()
    rest, stderr = await asyncio.wait_for(proc.communicate(), 10)
    stdout = b"".join(early) + rest
    assert proc.returncode == 0
    checker = TranscriptValidator()
    for line in lines:
        checker.client(orjson.dumps(line))
    replies = [orjson.loads(line) for line in stdout.splitlines()]
    for reply in replies:
        checker.server(reply)
    assert sorted(replies, key=lambda r: str(r.get("id")))[0]["id"] == 0
    assert {r.get("id") for r in replies} == {0, 1, None} and len(replies) == 3
    assert next(r for r in replies if r.get("id") == 1)["result"]["content"][0]["text"] == "quiet"
    assert b"this print must not reach the protocol stream" in stderr
    assert b"neither must this" in stderr
