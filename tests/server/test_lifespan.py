"""``Server(lifespan=...)``: entered once when serving starts, left when it stops, on every transport."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from mcpfast.server import Server
from mcpfast.transports.http import asgi_app


def _server(log: list[str], fail: bool = False) -> Server:
    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[dict[str, Any]]:
        log.append("enter")
        if fail:
            raise RuntimeError("no database")
        try:
            yield {"db": "connected"}
        finally:
            log.append("exit")

    return Server("life", lifespan=lifespan)


def test_nested_starts_enter_once_and_the_last_stop_leaves() -> None:
    log: list[str] = []
    server = _server(log)

    async def run() -> None:
        await server.start()
        await server.start()  # a second transport on the same server
        assert server.lifespan_state == {"db": "connected"}
        await server.stop()
        assert log == ["enter"] and server.lifespan_state == {"db": "connected"}
        await server.stop()
        assert log == ["enter", "exit"] and server.lifespan_state is None
        await server.stop()  # one stop too many does nothing
        assert log == ["enter", "exit"]

    asyncio.run(run())


def test_a_failing_lifespan_stops_the_start() -> None:
    log: list[str] = []
    server = _server(log, fail=True)

    async def run() -> None:
        with pytest.raises(RuntimeError, match="no database"):
            await server.start()
        await server.stop()  # nothing was started

    asyncio.run(run())
    assert log == ["enter"]


async def _asgi_lifespan(transport: Any) -> list[dict[str, Any]]:
    """The ASGI lifespan messages the transport sends for a startup then a shutdown."""
    sent: list[dict[str, Any]] = []
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for kind in ("lifespan.startup", "lifespan.shutdown"):
        inbox.put_nowait({"type": kind})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await transport({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send)
    return sent


@pytest.mark.parametrize("fail", [False, True])
def test_the_asgi_lifespan_enters_and_leaves_it(fail: bool) -> None:
    log: list[str] = []
    sent = asyncio.run(_asgi_lifespan(asgi_app(_server(log, fail=fail))))
    if fail:
        assert sent[0]["type"] == "lifespan.startup.failed" and "no database" in sent[0]["message"]
        assert log == ["enter"]
    else:
        assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
        assert log == ["enter", "exit"]
