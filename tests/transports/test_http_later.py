"""``Later``: a reply known once a future is done, written by the native server from the future's
callback (no task), sent over ASGI when called as a deferred answer, and answered in turn when
requests are pipelined behind it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpfast import Context, Server
from mcpfast.transports.answers import Later, Reply, after
from mcpfast.transports.http_server import HttpServer

_TEXT = ((b"content-type", b"text/plain"),)


class _App:
    """A direct-HTTP app: ``/later`` waits for a future the test resolves; ``/now`` answers at once."""

    direct_http = True

    def __init__(self) -> None:
        self.futures: list[asyncio.Future[str]] = []
        self.tasks_at_answer: list[int] = []
        """How many tasks answered a request over ASGI when ``then`` ran (the native server's ``_run``)."""

    def handle(self, method: str, path: str, query: bytes, headers: dict[bytes, bytes], body: bytes) -> Any:
        if path == "/now":
            return (200, _TEXT, b"now")
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.futures.append(future)

        def then(done: asyncio.Future[str]) -> Reply | Later:
            running = [t.get_coro().__qualname__ for t in asyncio.all_tasks()]  # type: ignore[union-attr]
            self.tasks_at_answer.append(running.count("_Connection._run"))
            if path == "/boom":
                raise RuntimeError("then failed")
            if path == "/stream":  # the answer turned out to stream: a deferred answer runs from here
                return _streamed(done.result())
            if path == "/chain":  # a second wait, then the reply
                second: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                asyncio.get_running_loop().call_soon(second.set_result, None)
                return after(second, (201, _TEXT, b"chained " + done.result().encode()))
            return (200, _TEXT, b"later " + done.result().encode())

        return Later(future, then)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:  # lifespan only
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})


def _streamed(text: str) -> Any:
    async def deferred(receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"streamed ", "more_body": True})
        await send({"type": "http.response.body", "body": text.encode()})

    return deferred


def _asgi_channels() -> tuple[list[dict[str, Any]], Any, Any]:
    """ASGI ``receive`` (never read here) and ``send``, with the list of what was sent."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        raise AssertionError("not read")

    return sent, receive, send


async def _read_replies(reader: asyncio.StreamReader, n: int) -> list[tuple[int, bytes]]:
    replies = []
    for _ in range(n):
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        lines = head.decode().split("\r\n")
        length = next(int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length"))
        replies.append((int(lines[0].split()[1]), await reader.readexactly(length)))
    return replies


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


async def _serving(app: _App) -> tuple[HttpServer, asyncio.StreamReader, asyncio.StreamWriter]:
    server = HttpServer(app)
    await server.start("127.0.0.1", 0)
    assert server.bound is not None
    reader, writer = await asyncio.open_connection(*server.bound)
    return server, reader, writer


async def _until(condition: Any) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in 5 s")


def test_native_server_writes_a_later_reply_from_its_callback_and_keeps_pipelined_order() -> None:
    async def main() -> None:
        app = _App()
        server, reader, writer = await _serving(app)
        try:
            writer.write(_get("/later") + _get("/now") + _get("/chain") + _get("/now"))
            await _until(lambda: len(app.futures) == 1)
            await asyncio.sleep(0.05)
            assert len(app.futures) == 1  # /now waits its turn behind the unanswered /later
            app.futures[0].set_result("one")
            await _until(lambda: len(app.futures) == 2)  # /now answered, /chain reached
            app.futures[1].set_result("two")
            replies = await _read_replies(reader, 4)
            assert replies == [(200, b"later one"), (200, b"now"), (201, b"chained two"), (200, b"now")]
            # no task was made to wait for either answer
            assert app.tasks_at_answer == [0, 0]
        finally:
            writer.close()
            await server.close(grace=1)

    asyncio.run(main())


def test_a_failing_then_is_answered_500_and_the_connection_goes_on() -> None:
    async def main() -> None:
        app = _App()
        server, reader, writer = await _serving(app)
        try:
            writer.write(_get("/boom") + _get("/now"))
            await _until(lambda: len(app.futures) == 1)
            app.futures[0].set_result("x")
            assert await _read_replies(reader, 2) == [(500, b"internal error"), (200, b"now")]
        finally:
            writer.close()
            await server.close(grace=1)

    asyncio.run(main())


def test_a_later_called_as_a_deferred_answer_sends_its_reply_over_asgi() -> None:
    async def main() -> None:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        later = Later(future, lambda f: (202, _TEXT, b"%d" % f.result()))
        sent, receive, send = _asgi_channels()

        waiting = asyncio.ensure_future(later(receive, send))
        await asyncio.sleep(0)
        assert sent == [] and later.reply is None
        future.set_result(7)
        await waiting
        assert sent[0]["status"] == 202 and (b"content-length", b"1") in sent[0]["headers"]
        assert sent[1] == {"type": "http.response.body", "body": b"7"}

    asyncio.run(main())


def test_then_runs_even_when_nobody_waits_any_more() -> None:
    async def main() -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ran: list[str] = []
        later = Later(future, lambda f: ran.append("then") or (200, (), b""))  # type: ignore[func-returns-value]
        got: list[Reply] = []
        later.listen(got.append)
        later.cancel()  # the connection closed
        future.set_result(None)
        await asyncio.sleep(0)
        assert ran == ["then"] and got == [] and later.reply == (200, (), b"")
        late: list[Reply] = []
        later.listen(late.append)  # known now: called at once
        assert late == [(200, (), b"")]

    asyncio.run(main())


@pytest.mark.parametrize("outcome", ["exception", "cancelled"])
def test_then_sees_a_failed_future(outcome: str) -> None:
    async def main() -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        later = Later(future, lambda f: (503, (), b"cancelled" if f.cancelled() else str(f.exception()).encode()))
        if outcome == "cancelled":
            future.cancel()
        else:
            future.set_exception(OSError("down"))
        await asyncio.sleep(0)
        assert later.reply == (503, (), b"cancelled" if outcome == "cancelled" else b"down")

    asyncio.run(main())


def test_a_later_may_turn_into_a_deferred_answer_that_runs_in_turn() -> None:
    async def main() -> None:
        app = _App()
        server, reader, writer = await _serving(app)
        try:
            writer.write(_get("/stream") + _get("/now"))
            await _until(lambda: len(app.futures) == 1)
            app.futures[0].set_result("three")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding: chunked" in head.lower()
            body = b""
            while True:  # the chunks of the streamed answer, then its end
                size = int((await asyncio.wait_for(reader.readuntil(b"\r\n"), 5)).strip(), 16)
                chunk = await reader.readexactly(size + 2)
                if size == 0:
                    break
                body += chunk[:-2]
            assert body == b"streamed three"
            assert await _read_replies(reader, 1) == [(200, b"now")]  # the pipelined request after it
        finally:
            writer.close()
            await server.close(grace=1)

    asyncio.run(main())


def test_a_later_turned_deferred_runs_it_over_asgi() -> None:
    async def main() -> None:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        later = Later(future, lambda f: _streamed(f.result()))
        sent, receive, send = _asgi_channels()

        waiting = asyncio.ensure_future(later(receive, send))
        await asyncio.sleep(0)
        future.set_result("four")
        await waiting
        assert [m.get("body") for m in sent] == [None, b"streamed ", b"four"]

    asyncio.run(main())


def _tool_app() -> Any:
    app = Server("later-tools")
    answer_tasks: list[int] = []

    @app.tool()
    async def aecho(text: str) -> str:
        await asyncio.sleep(0)  # a handler that waits: its reply comes after handle returned
        answer_tasks.append(sum(t.get_coro().__qualname__ == "_Connection._run" for t in asyncio.all_tasks()))  # type: ignore[union-attr]
        return text

    @app.tool()
    async def steps(ctx: Context) -> str:
        await asyncio.sleep(0)
        ctx.report_progress(1, 2)
        return "done"

    return app, answer_tasks


@pytest.mark.parametrize("metrics", [False, True])
def test_an_async_tools_reply_alone_is_json_without_an_answer_task_and_progress_streams(metrics: bool) -> None:
    import json

    from mcpfast.transports.http import asgi_app
    from mcpfast.transports.http_testing import serve_in_thread
    from mcpfast.transports.metrics import with_metrics
    from tests.transports.test_http_lane import Served, tool_call
    from tests.transports.test_http_server import Conn, post

    app, answer_tasks = _tool_app()
    transport = asgi_app(app)
    with serve_in_thread(with_metrics(transport) if metrics else transport) as url:
        c = Conn(url)
        try:
            extra = Served(transport, url).session(c)
            c.send(post(tool_call(1, "aecho", {"text": "later"}), extra))
            status, headers, body = c.response()
            assert (status, headers[b"content-type"]) == (200, b"application/json")
            assert json.loads(body)["result"]["content"][0]["text"] == "later"
            # the native server wrote it from the stream's callback: the lane took the call
            # (with metrics too, which count it when written), and the full path's answer task
            # never ran
            assert answer_tasks == [0]
            progress = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"steps","_meta":{"progressToken":"p"}}}'
            c.send(post(progress, extra))
            status, headers, body = c.response()
            assert (status, headers[b"content-type"]) == (200, b"text/event-stream")
            assert b"notifications/progress" in body and b'"done"' in body
            c.send(post(tool_call(3, "aecho", {"text": "again"}), extra))  # the connection goes on
            assert json.loads(c.response()[2])["result"]["content"][0]["text"] == "again"
        finally:
            c.close()
