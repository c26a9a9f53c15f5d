"""Paths and servers shared by the client tests (a plain module: conftest.py is not importable by name)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from _support import child_env, free_port, start_process, stop_process

import mcpfast

REPO_ROOT = Path(mcpfast.__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
FAKE = str(HERE / "_fake_server.py")
SDK = str(HERE / "_sdk_server.py")
DRIVE = str(HERE / "_drive.py")


def start_http_server(script: str, tmp: Path, *args: str, lifetime: float = 90.0) -> tuple[subprocess.Popen, str]:
    """Start an HTTP test server; return (process, endpoint URL)."""
    portfile = tmp / f"port-{time.monotonic_ns()}"
    proc = subprocess.Popen(
        [sys.executable, script, "http", str(portfile), "--lifetime", str(lifetime), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=child_env(),
    )
    deadline = time.monotonic() + 30
    while not (portfile.exists() and portfile.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"test server {script} {args} did not start")
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{int(portfile.read_text())}/mcp"


def stop(proc: subprocess.Popen) -> None:
    stop_process(proc)


def start_reference_server(*args: str, lifetime: int = 150) -> tuple[subprocess.Popen, str]:
    """``mcpfast serve --transport http`` on a free 127.0.0.1 port (killed by ``timeout`` after
    ``lifetime`` s at the latest); returns (process, ``http://127.0.0.1:PORT/mcp``)."""
    port = free_port()
    serve = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port), *args]
    proc = start_process(["timeout", str(lifetime), *serve], port, "mcpfast serve --transport http", env=child_env())
    return proc, f"http://127.0.0.1:{port}/mcp"
