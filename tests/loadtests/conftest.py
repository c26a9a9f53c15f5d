"""Fixtures for the headless Locust runs of ``loadtests/`` (each run is a ``locust`` child process:
Locust monkey-patches the interpreter, so it never runs inside pytest)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _loadtest_support import LOCUSTS_DIR, Run, child_env, locust_command, start_http_server, start_reference_server, stop


@pytest.fixture
def run_locust(tmp_path: Path) -> Callable[..., Run]:
    """``run_locust(*args, locustfile=..., timeout=...)`` -> :class:`Run` (CSV prefix in tmp_path)."""
    counter = iter(range(1000))

    def run(*args: str, locustfile: str = LOCUSTS_DIR, timeout: float = 90.0) -> Run:
        prefix = tmp_path / f"run{next(counter)}"
        if not any(a == "--mcp-engine" or a.startswith("--mcp-engine=") for a in args):
            args = ("--mcp-engine", "python", *args)  # these tests are about the Python users
        cmd = locust_command(locustfile, prefix, "--exit-code-on-error", "0", *args)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=child_env(), cwd=tmp_path)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
        return Run(prefix, proc)

    return run


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen, str]]]:
    """``proc, url = http_server(script, *args)``; stopped at teardown."""
    started: list[subprocess.Popen] = []

    def start(script: str, *args: str) -> tuple[subprocess.Popen, str]:
        proc, url = start_http_server(script, tmp_path, *args, lifetime=90)
        started.append(proc)
        return proc, url

    yield start
    for proc in started:
        stop(proc)


@pytest.fixture
def reference_server() -> Iterator[Callable[..., tuple[subprocess.Popen, str]]]:
    """``proc, url = reference_server(*serve_args)``: ``mcpfast serve --transport http``; stopped at teardown."""
    started: list[subprocess.Popen] = []

    def start(*args: str) -> tuple[subprocess.Popen, str]:
        proc, url = start_reference_server(*args)
        started.append(proc)
        return proc, url

    yield start
    for proc in started:
        stop(proc)
