"""``--workers N``: N processes on one port, restarted when they die, drained on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _support import free_port, metric, wait_port_named
from scale_client import Mcp

pytestmark = pytest.mark.timeout(120)


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _serve(port: int, *args: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "mcpfast", "serve", "--transport", "http", "--fixture", "conformance", "--port", str(port), *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_workers_need_a_shared_store() -> None:
    proc = _serve(free_port(), "--workers", "2")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert b"--workers 2 needs a shared session store" in err


def test_workers_share_a_port_restart_and_drain(redis) -> None:
    port = free_port()
    sup = _serve(port, "--workers", "2", "--store", redis.url, "--grace", "2")
    try:
        wait_port_named(port, sup, "mcpfast serve --workers 2")
        deadline = time.monotonic() + 20
        while len(_children(sup.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _children(sup.pid)
        assert len(workers) == 2
        client = Mcp(port)
        client.initialize()
        for _ in range(20):  # new connections each time: the kernel spreads them, the store makes it one server
            assert client.call("ping")[0] == 200
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            now = _children(sup.pid)
            if len(now) == 2 and victim not in now:
                break
            time.sleep(0.05)
        now = _children(sup.pid)
        assert victim not in now and len(now) == 2  # restarted
        for _ in range(20):
            assert client.call("ping")[0] == 200
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(30) == 0
        assert not _children(sup.pid)
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()
        if sup.stderr is not None:
            sup.stderr.close()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_metrics_count_every_request_once(redis, workers: str) -> None:
    import urllib.request

    port = free_port()
    sup = _serve(port, "--workers", workers, "--store", redis.url, "--metrics")
    try:
        wait_port_named(port, sup, "mcpfast serve --workers 2 --metrics")
        client = Mcp(port)
        client.initialize()
        for _ in range(30):
            assert client.call("tools/call", {"name": "test_simple_text", "arguments": {}})[0] == 200
        assert client.call("tools/list")[0] == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            assert resp.headers["content-type"].startswith("text/plain")
            text = resp.read().decode()
        # initialize + initialized + 31 calls, whichever worker served them: counted once each, by method
        assert metric(text, "mcpfast_http_requests_total", method="initialize", status="200") == 1
        assert metric(text, "mcpfast_http_requests_total", method="notifications/initialized", status="202") == 1
        assert metric(text, "mcpfast_http_requests_total", method="tools/call", status="200") == 30
        assert metric(text, "mcpfast_http_requests_total", method="tools/list", status="200") == 1
        assert metric(text, "mcpfast_http_request_seconds_count") == 33
        assert metric(text, "mcpfast_store_round_trips_total") >= 1  # at least the session's creation
    finally:
        sup.send_signal(signal.SIGTERM)
        sup.wait(30)
        if sup.stderr is not None:
            sup.stderr.close()
