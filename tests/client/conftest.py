"""Fixtures for the MCP client tests.

Only ``test_client_session.py`` runs in this process (the sans-IO session imports no gevent).  The
adapters need gevent, and Locust/gevent monkey-patch the interpreter, so they run in a child
interpreter (``_drive.py``) and the tests read its JSON output.  Servers are child processes
bound to 127.0.0.1 that exit by themselves after ``--lifetime`` seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from _support import DRIVE, REPO_ROOT, child_env, start_http_server, stop


@pytest.fixture
def drive() -> Callable[..., dict]:
    """Run ``_drive.py`` with a spec; return its JSON output."""

    def run(spec: dict, timeout: float = 60.0) -> dict:
        proc = subprocess.run(
            [sys.executable, DRIVE, json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=child_env(),
            cwd=str(REPO_ROOT),
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return run


@pytest.fixture(scope="module")
def http_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """Lazily started HTTP servers, shared by a module: ``url = http_servers(script, *args)``."""
    tmp = tmp_path_factory.mktemp("servers")
    running: dict[tuple, tuple[subprocess.Popen, str]] = {}

    def get(script: str, *args: str) -> str:
        key = (script, *args)
        if key not in running:
            running[key] = start_http_server(script, tmp, *args)
        return running[key][1]

    yield get
    for proc, _url in running.values():
        stop(proc)
