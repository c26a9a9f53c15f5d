"""Servers the client and wire tests share: each sample app on its framework's own server and on
``mcpfast serve --app`` over Streamable HTTP, started once per test process on first use and
stopped at the end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import _servers
import pytest
from _servers import APPS, http_command, needs
from _support import free_port, start_process, stop_process


@pytest.fixture(scope="session")
def http_url() -> Iterator[Callable[[str, str], str]]:
    """``http_url(side, app)``: the ``/mcp`` URL of ``app``'s HTTP server on ``side``, started on first use."""
    started: dict[tuple[str, str], tuple[Any, str]] = {}

    def url(side: str, app: str) -> str:
        needs(app)
        if (side, app) not in started:
            port = free_port()
            proc = start_process(http_command(side, app, port), port, f"{side} HTTP server of {APPS[app]}", env=_servers.env())
            started[side, app] = (proc, f"http://127.0.0.1:{port}/mcp")
        return started[side, app][1]

    yield url
    for proc, _ in started.values():
        stop_process(proc)
