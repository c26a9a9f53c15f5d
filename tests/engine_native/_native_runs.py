"""Helpers of the native engine's family tests: run engines against a real server, read its
``/metrics`` (a uniquely named plain module: test directories have no ``__init__.py``)."""

from __future__ import annotations

import time
import urllib.request
from typing import Any


def run_engines(engines: list[Any], users: list[int], seconds: float, grace: float = 2.0) -> list[dict[str, list[int]]]:
    """Start the engines with these users, drain while they run, stop them; each engine's
    ``{row: [requests, failures]}``."""
    for eng, n in zip(engines, users, strict=True):
        eng.start()
        eng.set_users(n)
    rows: list[list[Any]] = [[] for _ in engines]
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.25)
        for i, eng in enumerate(engines):
            rows[i] += eng.drain()
    for i, eng in enumerate(engines):
        eng.stop(grace)
        rows[i] += eng.drain()
    out = []
    for got in rows:
        totals: dict[str, list[int]] = {}
        for r in got:
            t = totals.setdefault(r.name, [0, 0])
            t[0] += r.num_requests
            t[1] += r.num_failures
        out.append(totals)
    return out


def scrape(url: str) -> str:
    """The Prometheus text of the server whose MCP endpoint (or base URL) is ``url``."""
    base = url.removesuffix("/mcp")
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        return str(resp.read().decode())
