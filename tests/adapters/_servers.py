"""The sample apps' servers the adapter tests start: each app on its framework's own server
(own_server.py) and on ``mcpfast serve --app``, over stdio or Streamable HTTP."""

from __future__ import annotations

import http.client
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from _support import child_env

HERE = Path(__file__).resolve().parent

APPS = {"sdk": "sdk_app:mcp", "fastmcp": "fastmcp_app:mcp", "fastmcp-edges": "fastmcp_edges:served"}
"""The sample apps, by the framework they are written for."""

SIDES = ("own", "mcpfast")
"""``own``: the framework's own server (tests/adapters/own_server.py); ``mcpfast``: ``mcpfast serve --app``."""

LIFETIME = 300
"""Seconds an HTTP server lives at most (``timeout``): a test process that dies leaves nothing behind."""


def env() -> dict[str, str]:
    """A child interpreter's environment: this checkout's mcpfast, the sample apps, and wherever
    this interpreter finds fastmcp (it may be outside the venv)."""
    out = child_env()
    paths = [str(HERE)]
    try:
        import fastmcp

        paths.append(str(Path(fastmcp.__file__).resolve().parent.parent))
    except ImportError:
        pass
    out["PYTHONPATH"] = os.pathsep.join([*paths, out["PYTHONPATH"]])
    return out


def needs(app: str) -> None:
    if app.startswith("fastmcp"):
        pytest.importorskip("fastmcp", reason="the sdk extra: pip install 'mcpfast[sdk]'")


def stdio_command(side: str, app: str) -> list[str]:
    """The command line of ``app``'s stdio server on ``side``."""
    if side == "own":
        return [sys.executable, str(HERE / "own_server.py"), APPS[app], "stdio"]
    return [sys.executable, "-m", "mcpfast", "serve", "--transport", "stdio", "--app", APPS[app]]


def http_command(side: str, app: str, port: int) -> list[str]:
    """The command line of ``app``'s HTTP server on ``side``, on 127.0.0.1:``port``, path ``/mcp``."""
    bounded = ["timeout", str(LIFETIME), sys.executable]
    if side == "own":
        return [*bounded, str(HERE / "own_server.py"), APPS[app], "http", str(port)]
    return [*bounded, "-m", "mcpfast", "serve", "--transport", "http", "--port", str(port), "--app", APPS[app]]


def post(
    url: str, body: dict[str, Any] | None, headers: dict[str, str], method: str = "POST"
) -> tuple[http.client.HTTPResponse, list[dict[str, Any]]]:
    """One HTTP request to a server's MCP endpoint: the response (read) and the JSON-RPC messages
    of its body, whether a JSON body or an SSE stream (its ``data:`` lines, in order)."""
    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=30)
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    try:
        conn.request(method, where.path, json.dumps(body).encode() if body is not None else None, sent)
        response = conn.getresponse()
        data = response.read().decode()
    finally:
        conn.close()
    if response.getheader("content-type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in data.splitlines() if line.startswith("data:") and line[5:].strip()]
    else:
        messages = [json.loads(data)] if data.strip() else []
    return response, messages
