"""Test helpers for the HTTP transport: a uvicorn server in a thread, and a message recorder.

``serve_in_thread(app)`` runs any ASGI app on 127.0.0.1 (a free port) in a background thread
and yields its base URL; leaving the block stops it (bounded wait). ``Recorder`` wraps an ASGI
app and keeps every JSON-RPC message the client POSTed and every one the server sent back
(JSON bodies and SSE ``data`` alike), so a test can check them against the schemas.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from mcpfast import core

__all__ = ["Recorder", "serve_in_thread"]


class Recorder:
    """ASGI middleware that records the MCP traffic (client bodies, server messages) in order."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.client: list[bytes] = []
        self.server: list[bytes] = []

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
            await send(message)

        await self.app(scope, rcv, snd)


@contextlib.contextmanager
def serve_in_thread(app: Any, *, startup_timeout: float = 10.0) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 in a thread; yields ``http://127.0.0.1:PORT``."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", loop="asyncio", http="h11", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"uvicorn-{port}")
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10.0)
        sock.close()
