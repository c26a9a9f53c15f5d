"""Smoke tests of ``mcpfast._core.NativeEngine`` against ``mcpfast serve`` over HTTP and stdio:
start / set_users / drain / stop, with the engine's counts checked against the server's own."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcpfast import core

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent / "client"))
from _client_support import start_reference_server, stop  # noqa: E402

APP = "_counting_app:app"

# the suite also runs with MCPFAST_CORE=python, where there is no native engine (the last test checks the error)
needs_native = pytest.mark.skipif(not core.HAS_NATIVE_ENGINE, reason="the native engine needs the compiled core")


def env(count_file: Path) -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), e.get("PYTHONPATH", "")])
    e["MCPFAST_COUNT_FILE"] = str(count_file)
    e.pop("PYTHONWARNINGS", None)
    return e


@pytest.fixture
def http_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    count = tmp_path / "count"
    for k, v in env(count).items():
        monkeypatch.setenv(k, v)
    proc, url = start_reference_server("--app", APP)
    yield url, count
    stop(proc)


def run(config: dict[str, Any], users: int, seconds: float) -> tuple[Any, dict[str, list[int]], list[tuple]]:
    eng = core.native_engine(json.dumps(config).encode())
    eng.start()
    eng.set_users(users)
    rows: list[tuple] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.2)
        rows += eng.drain()
    eng.stop(2.0)
    eng.stop(2.0)  # idempotent
    rows += eng.drain()
    totals: dict[str, list[int]] = {}
    for r in rows:
        t = totals.setdefault(r[1], [0, 0, 0])
        t[0] += r[2]
        t[1] += r[4]
        t[2] += sum(c for _, c in r[9])
    return eng, totals, rows


def check_rows(rows: list[tuple], request_type: str) -> None:
    for r in rows:
        (
            rtype,
            name,
            num,
            none,
            fails,
            total_ms,
            min_ms,
            max_ms,
            length,
            buckets,
            per_second,
            last_ts,
            errors,
            failed_buckets,
            service,
            lag,
        ) = r
        assert rtype == request_type and none == 0 and 0 <= fails <= num
        assert service == lag == []  # closed model: no service time / send lag buckets
        assert sum(c for _, c in buckets) == num
        assert sum(n for _, n, _ in per_second) == num and sum(f for _, _, f in per_second) == fails
        assert sum(c for _, c in errors) == fails == sum(c for _, c in failed_buckets)
        assert min_ms is not None and min_ms <= total_ms / num <= max_ms
        assert abs(last_ts - time.time()) < 60


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
@needs_native
def test_http_calls_equal_the_servers_count(http_server, version: str) -> None:
    url, count = http_server
    eng, totals, rows = run({"url": url, "tool": "echo", "arguments": {"text": "hi"}, "protocol_version": version}, 4, 1.5)
    calls, failures, bucketed = totals["tools/call:echo"]
    assert failures == 0 and calls > 50
    assert calls == count.stat().st_size, "every call the server answered is counted once"
    assert bucketed == calls
    if version == "2025-11-25":
        assert totals["initialize"][:2] == [4, 0] and totals["notifications/initialized"][:2] == [4, 0]
        assert totals["DELETE"][:2] == [4, 0]
    else:
        assert totals["server/discover"][:2] == [4, 0] and "initialize" not in totals
    check_rows(rows, "mcp-http")
    status = eng.status()
    assert status["users"] == 4 and status["threads"] == 0 and status["inflight"] == 0
    assert status["completed"] == sum(t[0] for t in totals.values()) and status["cpu_s"] > 0
    hist = {name: sum(c for _, c in b) for _, name, b in eng.histograms()}
    assert hist["tools/call:echo"] == calls
    eng.reset()
    assert eng.histograms() == []


@needs_native
def test_stdio_calls_equal_the_servers_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = tmp_path / "count"
    for k, v in env(count).items():
        monkeypatch.setenv(k, v)
    command = [sys.executable, "-m", "mcpfast", "serve", "--transport", "stdio", "--app", APP]
    cfg = {"transport": "stdio", "command": command, "inflight_per_process": 8, "arguments": {"text": "hi"}}
    eng, totals, rows = run(cfg, 2, 2.5)
    calls, failures, _ = totals["tools/call:echo"]
    assert failures == 0 and calls > 50
    assert calls == count.stat().st_size
    assert totals["initialize"][:2] == [2, 0]
    check_rows(rows, "mcp-stdio")
    assert eng.events() == []


@needs_native
def test_events_fd_and_connect_errors() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    eng = core.NativeEngine(json.dumps({"url": f"http://127.0.0.1:{port}/mcp"}).encode())
    fd = eng.fileno()
    eng.start()
    eng.set_users(1)
    readable, _, _ = select.select([fd], [], [], 5.0)
    assert readable == [fd]
    events = eng.events()
    assert events and events[0][0] == "connect_error"
    eng.stop(1.0)
    drained = eng.drain()
    check_rows(drained, "mcp-http")
    rows = {r[1]: r for r in drained}
    assert rows["initialize"][2] == rows["initialize"][4] > 0
    assert sum(c for _, c in rows["initialize"][13]) == rows["initialize"][4]


@needs_native
def test_bad_config_and_rate() -> None:
    with pytest.raises(ValueError, match="threads"):
        core.NativeEngine(b'{"url": "http://127.0.0.1:1/mcp", "threads": 0}')
    with pytest.raises(ValueError, match="not JSON"):
        core.NativeEngine(b"{")
    eng = core.NativeEngine(b'{"url": "http://127.0.0.1:1/mcp"}')
    with pytest.raises(ValueError, match="rate"):
        eng.set_rate(0.0)
    eng.set_rate(100.0)
    eng.set_rate(None)
    assert eng.drain() == [] and eng.status()["threads"] == 0  # nothing started
    eng.stop(0.1)
    with pytest.raises(RuntimeError, match="stopped"):
        eng.start()


@needs_native
def test_an_engine_built_before_a_fork_refuses_to_start_after_it() -> None:
    eng = core.NativeEngine(b'{"url": "http://127.0.0.1:1/mcp"}')
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            eng.start()
        except RuntimeError as exc:
            os._exit(0 if "another process" in str(exc) else 2)
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_without_the_compiled_core_the_engine_is_a_clear_error() -> None:
    code = (
        "from mcpfast import core\nassert not core.HAS_NATIVE_ENGINE and core.NativeEngine is None\n"
        "try:\n    core.native_engine(b'{}')\nexcept RuntimeError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "MCPFAST_CORE": "python"}, capture_output=True, text=True, timeout=60, check=True
    )
    assert "compiled core" in out.stdout
