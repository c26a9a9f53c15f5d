"""`make check-light`: ``pip install .`` into a fresh venv is the light server package.

It must pull no Locust, gevent, geventhttpclient, matplotlib, numpy or uvicorn; ``mcpfast serve``
must answer an ``initialize`` over stdio and over HTTP (the native server); a command that needs
an extra must say which one to install. Every step is bounded in time.

Usage: python tests/packaging/light_install.py VENV_DIR  (the venv is created, or reused when
``--reuse`` is given and it exists).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("locust", "gevent", "geventhttpclient", "matplotlib", "numpy", "uvicorn", "httptools")
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "light", "version": "1"}},
}


def check(ok: bool, what: str) -> None:
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        sys.exit(1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str]) -> int:
    target = Path(argv[0]).resolve()
    reuse = "--reuse" in argv
    python = target / "bin" / "python"
    if not (reuse and python.exists()):
        venv.EnvBuilder(clear=True, with_pip=True).create(target)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(ROOT)], check=True, timeout=1800)
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], check=True, capture_output=True, text=True, timeout=120)
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    check("mcpfast" in installed, "mcpfast is installed")
    heavy = sorted(set(HEAVY) & installed)
    check(not heavy, f"no swarm/bench/uvicorn dependency pulled (found: {heavy or 'none'})")
    mcpfast = str(target / "bin" / "mcpfast")

    line = json.dumps(INIT) + "\n"
    out = subprocess.run([mcpfast, "serve"], input=line, capture_output=True, text=True, timeout=60)
    reply = json.loads(out.stdout.splitlines()[0]) if out.stdout else {}
    check(reply.get("id") == 1 and "serverInfo" in reply.get("result", {}), "mcpfast serve (stdio) answers initialize")

    port = free_port()
    server = subprocess.Popen(
        [mcpfast, "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        answer: dict[str, object] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not answer:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/mcp",
                data=json.dumps(INIT).encode(),
                method="POST",
                headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=5) as r:
                    answer = json.loads(r.read())
            except OSError:
                time.sleep(0.2)
        check(answer.get("id") == 1, "mcpfast serve --transport http (native) answers initialize")
    finally:
        server.terminate()
        server.wait(timeout=10)

    out = subprocess.run([mcpfast, "bench", "--quick"], capture_output=True, text=True, timeout=60)
    check(out.returncode == 2 and "pip install 'mcpfast[swarm]'" in out.stderr, "mcpfast bench names the swarm extra")
    out = subprocess.run([mcpfast, "serve", "--transport", "http", "--runner", "uvicorn"], capture_output=True, text=True, timeout=60)
    check(out.returncode == 2 and "pip install 'mcpfast[uvicorn]'" in out.stderr, "--runner uvicorn names the uvicorn extra")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
