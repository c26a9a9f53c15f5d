"""Fixtures for scale-out tests: a real ``redis-server`` and real ``mcpfast serve`` processes.

``redis`` (from ``tests/conftest.py``) starts Debian's ``redis-server`` on a free 127.0.0.1 port, without persistence, in a
temporary directory (``make test`` installs the package when it is missing). ``servers``
starts ``mcpfast serve --transport http --fixture conformance --store redis://…`` processes,
each on its own port. Nothing is mocked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _support import RedisServer, free_port, wait_port_named
from scale_client import Mcp


class Serve:
    """One ``mcpfast serve --transport http`` process."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.port = free_port()
        self.args = args
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "mcpfast",
            "serve",
            "--transport",
            "http",
            "--fixture",
            "conformance",
            "--port",
            str(self.port),
            *self.args,
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log.open("ab") as log:  # the process's stderr, for a failing test to show
            self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
        wait_port_named(self.port, self.proc, "mcpfast serve")

    def client(self) -> Mcp:
        return Mcp(self.port)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def servers(redis: RedisServer, tmp_path: Path) -> Iterator[Callable[..., list[Serve]]]:
    started: list[Serve] = []

    def start(n: int = 2, *extra: str) -> list[Serve]:
        batch = [
            Serve(["--store", redis.url, "--session-idle-timeout", "30", *extra], tmp_path / f"serve{len(started) + i}.log")
            for i in range(n)
        ]
        for s in batch:
            s.start()
            started.append(s)
        return batch

    try:
        yield start
    finally:
        for s in started:
            s.stop()
        for s in started:  # shown with a failing test's captured output
            sys.stderr.write(s.log.read_text(errors="replace")[-4000:])
