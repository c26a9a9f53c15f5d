"""Servers the client and wire tests share: each sample app on its framework's own server and on
``mcpfast serve --app`` over Streamable HTTP, started once per test process on first use and
stopped at the end."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import _servers
import pytest
from _servers import APPS, LIFETIME, http_command, needs
from _support import free_port, start_process, stop_process


@pytest.fixture(scope="session")
def http_url() -> Iterator[Callable[[str, str], str]]:
    """``http_url(side, app)``: the ``/mcp`` URL of ``app``'s HTTP server on ``side``, started on
    first use (and again once it has outlived its bounded lifetime, in a long test process)."""
    started: dict[tuple[str, str], tuple[Any, str, float]] = {}

    def url(side: str, app: str) -> str:
        needs(app)
        known = started.get((side, app))
        if known is not None and (known[0].poll() is not None or time.monotonic() - known[2] > LIFETIME - 60):
            stop_process(known[0])  # near the end of its lifetime: a new one, so that none ends during a test
            known = None
        if known is None:
            port = free_port()
            proc = start_process(http_command(side, app, port), port, f"{side} HTTP server of {APPS[app]}", env=_servers.env())
            known = started[side, app] = (proc, f"http://127.0.0.1:{port}/mcp", time.monotonic())
        return known[1]

    yield url
    for proc, _, _ in started.values():
        stop_process(proc)
