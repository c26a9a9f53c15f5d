"""Fixtures of the HTTP transport tests: each module gives a ``transport``, ``client`` serves it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2 as httpx
import pytest

from mcpfast.transports.http import HttpTransport
from mcpfast.transports.http_testing import serve_in_thread


@pytest.fixture(params=["asgi", "native"])
async def client(request: pytest.FixtureRequest, transport: HttpTransport) -> AsyncIterator[httpx.AsyncClient]:
    """The module's ``transport`` called in-process over ASGI, and served by the native HTTP server
    over a real socket (the default ``mcpfast serve`` path): every rule must give the same answer."""
    if request.param == "asgi":
        async with httpx.AsyncClient(transport=httpx.ASGITransport(transport), base_url="http://127.0.0.1") as c:
            yield c
        return
    with serve_in_thread(transport) as base:
        async with httpx.AsyncClient(base_url=base) as c:
            yield c
