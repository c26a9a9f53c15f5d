"""The sample apps' servers the adapter tests start: each app on its framework's own server
(own_server.py) and on ``mcpfast serve --app``, over stdio or Streamable HTTP."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from _support import child_env

HERE = Path(__file__).resolve().parent

APPS = {"sdk": "sdk_app:mcp", "fastmcp": "fastmcp_app:mcp"}
"""The sample apps, by the framework they are written for."""

SIDES = ("own", "mcpfast")
"""``own``: the framework's own server (tests/adapters/own_server.py); ``mcpfast``: ``mcpfast serve --app``."""

LIFETIME = "300"
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
    if app == "fastmcp":
        pytest.importorskip("fastmcp", reason="the sdk extra: pip install 'mcpfast[sdk]'")


def stdio_command(side: str, app: str) -> list[str]:
    """The command line of ``app``'s stdio server on ``side``."""
    if side == "own":
        return [sys.executable, str(HERE / "own_server.py"), APPS[app], "stdio"]
    return [sys.executable, "-m", "mcpfast", "serve", "--transport", "stdio", "--app", APPS[app]]


def http_command(side: str, app: str, port: int) -> list[str]:
    if side == "own":
        return ["timeout", LIFETIME, sys.executable, str(HERE / "own_server.py"), APPS[app], "http", str(port)]
    return ["timeout", LIFETIME, sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--port", str(port), "--app", APPS[app]]
