"""A POST stream whose client goes away as its last events arrive: nothing is lost, a resuming
client gets every event the server did not send."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcpfast import Context, Server
from mcpfast.transports.http import asgi_app

_HEADERS = [(b"host", b"127.0.0.1"), (b"accept", b"application/json, text/event-stream"), (b"content-type", b"application/json")]


def _scope(method: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": "/mcp", "query_string": b"", "headers": _HEADERS + headers, "root_path": ""}


class _Exchange:
    """One ASGI request: its body, then a disconnect only when ``drop`` is called."""

    def __init__(self, body: bytes) -> None:
        self.sent: list[dict[str, Any]] = []
        self.body = body
        self.gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def receive(self) -> dict[str, Any]:
        if self.body is not None:
            body, self.body = self.body, None  # type: ignore[assignment]
            return {"type": "http.request", "body": body, "more_body": False}
        await self.gone
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def drop(self) -> None:
        self.gone.set_result(None)

    @property
    def text(self) -> str:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body").decode()

    def header(self, name: bytes) -> str:
        start = next(m for m in self.sent if m["type"] == "http.response.start")
        return next(v for k, v in start["headers"] if k == name).decode()


async def _request(app: Any, method: str, message: dict[str, Any] | None, headers: list[tuple[bytes, bytes]]) -> _Exchange:
    exchange = _Exchange(json.dumps(message).encode() if message is not None else b"")
    exchange.drop()  # read at once to the end: a plain request
    await app(_scope(method, headers), exchange.receive, exchange.send)
    return exchange


def _events(text: str) -> list[tuple[str, str]]:
    """(id, data) of each SSE event with data."""
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
        if fields.get("data"):
            out.append((fields.get("id", ""), fields["data"]))
    return out


def test_the_result_that_arrives_with_the_disconnect_is_kept_for_the_resuming_client() -> None:
    server = Server("dropped")
    release = asyncio.Event()

    @server.tool()
    async def wait_then_answer(ctx: Context) -> str:
        ctx.report_progress(1, 2)
        await release.wait()
        return "the answer"

    async def run() -> list[tuple[str, str]]:
        app = asgi_app(server)
        await app.startup()
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize"}
        init["params"] = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        opened = await _request(app, "POST", init, [])
        session = [(b"mcp-session-id", opened.header(b"mcp-session-id").encode()), (b"mcp-protocol-version", b"2025-11-25")]
        await _request(app, "POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        call["params"] = {"name": "wait_then_answer", "arguments": {}, "_meta": {"progressToken": "p"}}
        stream = _Exchange(json.dumps(call).encode())
        post = asyncio.ensure_future(app(_scope("POST", session), stream.receive, stream.send))
        for _ in range(200):  # until the progress event went out
            await asyncio.sleep(0.005)
            if "notifications/progress" in stream.text:
                break
        sent = _events(stream.text)
        assert [json.loads(data).get("method") for _, data in sent] == ["notifications/progress"], stream.text
        # The answer and the disconnect, in the same turn of the loop: the stream's writer wakes
        # once, to both.
        release.set()
        stream.drop()
        await asyncio.wait_for(post, 5)
        assert "the answer" not in stream.text  # not sent: the client had gone
        resumed = _Exchange(b"")
        last = [(b"last-event-id", sent[-1][0].encode())]
        replay = asyncio.ensure_future(app(_scope("GET", session + last), resumed.receive, resumed.send))
        await asyncio.wait_for(replay, 5)
        await app.aclose()
        return _events(resumed.text)

    replayed = asyncio.run(run())
    assert [json.loads(data).get("result", {}).get("content") for _, data in replayed] == [[{"type": "text", "text": "the answer"}]]
