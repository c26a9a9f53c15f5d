"""Test helpers for the HTTP transport: a server in a thread, and a message recorder.

``serve_in_thread(app, server=...)`` runs an app on 127.0.0.1 (a free port) under the native
server or uvicorn in a background thread and yields its base URL; leaving the block stops it
(bounded wait). ``Recorder`` wraps an ASGI
app and keeps every JSON-RPC message the client POSTed and every one the server sent back
(JSON bodies and SSE ``data`` alike), so a test can check them against the schemas.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from mcpfast import core

__all__ = ["SERVERS", "Recorder", "serve_in_thread"]


class Recorder:
    """ASGI middleware that records the MCP traffic (client bodies, server messages) in order."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.client: list[bytes] = []
        self.server: list[bytes] = []
        # Under the native server a wrapped HttpTransport keeps its direct path, recorded too.
        self.direct_http = getattr(app, "direct_http", False) is True
        self.max_body = getattr(app, "max_body", None)

    def handle(self, method: str, path: str, query: bytes, headers: dict[bytes, bytes], body: bytes) -> Any:
        if body:
            self.client.append(body)
        outcome = self.app.handle(method, path, query, headers, body)
        if type(outcome) is tuple:
            status, hdrs, data = outcome
            ctype = dict(hdrs).get(b"content-type", b"")
            if data and status < 300 and ctype.startswith(b"application/json"):
                self.server.append(data)
            return outcome

        async def recorded(receive: Any, send: Any) -> None:
            await self._record_send(outcome, receive, send)

        return recorded

    async def _record_send(self, run: Any, receive: Any, send: Any) -> None:
        state: dict[str, Any] = {"sse": None, "json": bytearray(), "is_json": False}

        async def snd(message: dict[str, Any]) -> None:
            self._observe(state, message)
            await send(message)

        await run(receive, snd)

    def _observe(self, state: dict[str, Any], message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            ctype = dict(message.get("headers", [])).get(b"content-type", b"")
            if ctype.startswith(b"text/event-stream"):
                state["sse"] = core.SseDecoder()
            state["is_json"] = ctype.startswith(b"application/json") and message["status"] < 300
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            if state["sse"] is not None:
                for event in state["sse"].feed(body):
                    if isinstance(event, core.SseEvent) and event.data and event.event == "message":
                        self.server.append(event.data.encode())
            elif state["is_json"]:
                state["json"] += body
                if not message.get("more_body") and state["json"]:
                    self.server.append(bytes(state["json"]))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = {"sse": None, "json": bytearray(), "is_json": False}

        async def rcv() -> dict[str, Any]:
            message = await receive()
            body = message.get("body")
            if body:
                self.client.append(body)
            return message

        async def snd(message: dict[str, Any]) -> None:
            self._observe(state, message)
            await send(message)

        await self.app(scope, rcv, snd)


SERVERS = ("native", "uvicorn")


@contextlib.contextmanager
def serve_in_thread(
    app: Any,
    *,
    server: str = "native",
    startup_timeout: float = 10.0,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop,
    **native_options: Any,
) -> Iterator[str]:
    """Run ``app`` on 127.0.0.1 (a free port) in a thread; yields ``http://127.0.0.1:PORT``.

    ``server``: ``native`` (mcpfast's own HTTP server; an ``HttpTransport`` takes its fast
    path, any other ASGI app is served over ASGI; ``native_options`` go to ``HttpServer``, and
    it runs on a loop of ``loop_factory``: ``uvloop.new_event_loop`` as ``mcpfast serve``) or
    ``uvicorn`` (h11).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if server == "native":
        with _native_in_thread(app, sock, startup_timeout, loop_factory, native_options):
            yield f"http://127.0.0.1:{port}"
        return
    if server != "uvicorn":
        raise ValueError(f"unknown server {server!r}")
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", lifespan="on", loop="asyncio", http="h11", ws="none", timeout_graceful_shutdown=2)
    userver = uvicorn.Server(config)
    thread = threading.Thread(target=userver.run, kwargs={"sockets": [sock]}, daemon=True, name=f"uvicorn-{port}")
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not userver.started:
        if time.monotonic() > deadline or not thread.is_alive():
            userver.should_exit = True
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        userver.should_exit = True
        thread.join(timeout=10.0)
        sock.close()


@contextlib.contextmanager
def _native_in_thread(
    app: Any, sock: socket.socket, startup_timeout: float, loop_factory: Callable[[], asyncio.AbstractEventLoop], options: dict[str, Any]
) -> Iterator[None]:
    from mcpfast.transports.http_server import HttpServer

    sock.listen(512)
    loop = loop_factory()
    started = threading.Event()
    failed: list[BaseException] = []
    holder: dict[str, Any] = {}

    def main() -> None:
        asyncio.set_event_loop(loop)

        async def run() -> None:
            holder["stop"] = asyncio.Event()
            native = HttpServer(app, **options)
            try:
                await native.start(sock=sock)
            except BaseException as exc:  # reported to the caller
                failed.append(exc)
                started.set()
                return
            started.set()
            await holder["stop"].wait()
            await native.close(grace=2.0)

        loop.run_until_complete(run())
        loop.close()

    thread = threading.Thread(target=main, daemon=True, name="mcpfast-http")
    thread.start()
    if not started.wait(startup_timeout) or failed:
        raise RuntimeError(f"the native HTTP server did not start: {failed[:1]}")
    try:
        yield
    finally:
        loop.call_soon_threadsafe(holder["stop"].set)
        thread.join(timeout=10.0)
        sock.close()
