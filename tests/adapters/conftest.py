"""Servers the client and wire tests share: each sample app on its framework's own server and on
``mcpfast serve --app`` over Streamable HTTP, started once per test process on first use and
stopped at the end."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import _servers
import pytest
from _servers import APPS, LIFETIME, SIDES, http_command, needs
from _support import free_port, stop_process, wait_port_named


@pytest.fixture(scope="session")
def http_url() -> Iterator[Callable[[str, str], str]]:
    """``http_url(side, app)``: the ``/mcp`` URL of ``app``'s HTTP server on ``side``. The first
    use for an app starts its servers on both sides at once (the tests compare them); a server
    near the end of its bounded lifetime is replaced first, so that none ends during a test."""
    started: dict[tuple[str, str], tuple[subprocess.Popen[Any], str, float]] = {}

    def url(side: str, app: str) -> str:
        needs(app)
        starting: dict[tuple[str, str], tuple[subprocess.Popen[Any], int]] = {}
        for key in [(each, app) for each in SIDES]:
            known = started.get(key)
            if known is not None and (known[0].poll() is not None or time.monotonic() - known[2] > LIFETIME - 60):
                stop_process(known[0])
                known = None
            if known is None:
                port = free_port()
                proc = subprocess.Popen(http_command(*key, port), env=_servers.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                starting[key] = (proc, port)
        try:
            for key, (proc, port) in starting.items():
                wait_port_named(port, proc, f"{key[0]} HTTP server of {APPS[app]}", timeout=30.0)
                started[key] = (proc, f"http://127.0.0.1:{port}/mcp", time.monotonic())
        except RuntimeError:
            for proc, _port in starting.values():
                stop_process(proc)
            raise
        return started[side, app][1]

    yield url
    for proc, _, _ in started.values():
        stop_process(proc)
