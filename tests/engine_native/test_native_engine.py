"""Smoke tests of ``mcpfast._core.NativeEngine`` against ``mcpfast serve`` over HTTP and stdio:
start / set_users / drain / stop, with the engine's counts checked against the server's own."""

from __future__ import annotations

import os
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _support import start_reference_server, stop

from mcpfast import core

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

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
def stdio_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Path]:
    """The counting app's stdio server command (the environment set for its children) and its count file."""
    count = tmp_path / "count"
    for k, v in env(count).items():
        monkeypatch.setenv(k, v)
    return [sys.executable, "-m", "mcpfast", "serve", "--transport", "stdio", "--app", APP], count


@pytest.fixture
def http_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    count = tmp_path / "count"
    for k, v in env(count).items():
        monkeypatch.setenv(k, v)
    proc, url = start_reference_server("--app", APP)
    yield url, count
    stop(proc)


def run(config: dict[str, Any], users: int, seconds: float) -> tuple[Any, dict[str, list[int]], list[Any]]:
    """Run an engine made from ``config`` (``EngineConfig``'s keyword arguments)."""
    eng = core.native_engine(core.EngineConfig(**config))
    eng.start()
    eng.set_users(users)
    rows: list[Any] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.2)
        rows += eng.drain()
    eng.stop(2.0)
    eng.stop(2.0)  # idempotent
    rows += eng.drain()
    totals: dict[str, list[int]] = {}
    for r in rows:
        t = totals.setdefault(r.name, [0, 0, 0])
        t[0] += r.num_requests
        t[1] += r.num_failures
        t[2] += sum(c for _, c in r.buckets)
    return eng, totals, rows


def check_rows(rows: list[Any], request_type: str) -> None:
    for r in rows:
        num, fails = r.num_requests, r.num_failures
        assert r.request_type == request_type and 0 <= fails <= num
        assert r.service_buckets == r.lag_buckets == []  # closed model: no service time / send lag buckets
        assert sum(c for _, c in r.buckets) == num
        assert sum(n for _, n, _ in r.per_second) == num and sum(f for _, _, f in r.per_second) == fails
        assert sum(c for _, c in r.errors) == fails == sum(c for _, c in r.failed_buckets)
        assert r.min_ms is not None and r.min_ms <= r.total_ms / num <= r.max_ms
        assert abs(r.last_ts - time.time()) < 60


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
    # a connection's opening is a row of its own, not a completed request
    assert totals["connect"][:2] == [4, 0] and "tls:handshake" not in totals
    assert status["completed"] == sum(t[0] for n, t in totals.items() if n != "connect") and status["cpu_s"] > 0
    hist = {name: sum(c for _, c in b) for _, name, b in eng.histograms()}
    assert hist["tools/call:echo"] == calls
    eng.reset()
    assert eng.histograms() == []


@needs_native
def test_stdio_calls_equal_the_servers_count(stdio_server: tuple[list[str], Path]) -> None:
    command, count = stdio_server
    cfg = {"transport": "stdio", "command": command, "inflight_per_process": 8, "arguments": {"text": "hi"}}
    eng, totals, rows = run(cfg, 2, 2.5)
    calls, failures, _ = totals["tools/call:echo"]
    assert failures == 0 and calls > 50
    assert calls == count.stat().st_size
    assert totals["initialize"][:2] == [2, 0]
    check_rows(rows, "mcp-stdio")
    assert eng.events() == []


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
@needs_native
def test_sse_streaming_holds_its_stream_beside_its_calls(version: str) -> None:
    # each session holds its long-lived stream (the GET stream, or a 2026 subscriptions/listen) on a
    # connection of its own from its start to its end: one opening per session, calls not held up
    proc, url = start_reference_server()
    try:
        eng, totals, _rows = run({"url": url, "family": "sse_streaming", "protocol_version": version}, 2, 3.0)
    finally:
        stop(proc)
    held = "GET:open" if version == "2025-11-25" else "subscriptions/listen:ack"
    assert totals[held][:2] == [2, 0], "one per session, ended at the stop without a failure"
    # the engine used to listen for 0.5 s after every 10th call: at most 20 calls/s per session,
    # 120 for this run
    calls, failures, _ = totals["tools/call:stream"]
    assert failures == 0 and calls > 600, calls
    assert sum(t[1] for t in totals.values()) == 0, totals
    status = eng.status()
    # a held stream is one request: sent once, completed by its opening, in flight until its session ended
    events = {"connect", "sse:first-event", "sse:gap", "progress:first-event", "progress:gap"}
    assert status["inflight"] == 0 and status["sent"] == status["completed"] == sum(t[0] for n, t in totals.items() if n not in events)


@needs_native
def test_sse_streaming_times_the_events_on_its_held_get_stream() -> None:
    # the conformance fixture's test_trigger_tool_change notifies every session (tools/list_changed)
    # on its GET stream: each call is an event on both sessions' held streams
    proc, url = start_reference_server("--fixture", "conformance")
    try:
        eng = core.native_engine(
            core.EngineConfig(url=url, family="sse_streaming", stream_tool="test_trigger_tool_change", stream_arguments={})
        )
        eng.start()
        eng.set_users(2)
        time.sleep(1.5)
        # beside each session's call in flight (or none), its held stream
        assert 2 <= eng.status()["inflight"] <= 4
        time.sleep(1.0)
        eng.stop(2.0)
    finally:
        stop(proc)
    totals: dict[str, list[int]] = {}
    for r in eng.drain():
        t = totals.setdefault(r.name, [0, 0])
        t[0] += r.num_requests
        t[1] += r.num_failures
    calls = totals["tools/call:test_trigger_tool_change"][0]
    assert totals["GET:open"] == [2, 0]
    assert totals["GET:event"][0] >= calls > 600 and totals["GET:event"][1] == 0


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for c in map(int, children):
            out += [c, *_descendants(c)]
    return out


def _stdio_servers() -> list[int]:
    """The ``mcpfast serve --transport stdio`` processes this test process started (through the engine)."""
    found = []
    for pid in _descendants(os.getpid()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and b"stdio" in argv:
            found.append(pid)
    return found


@needs_native
def test_a_stdio_server_that_dies_is_reported_and_restarted(stdio_server: tuple[list[str], Path]) -> None:
    command, count = stdio_server
    cfg = {"transport": "stdio", "command": command, "inflight_per_process": 8, "arguments": {"text": "hi"}}
    eng = core.native_engine(core.EngineConfig(**cfg))
    eng.start()
    eng.set_users(1)
    rows: list[Any] = []
    events: list[tuple[str, str]] = []

    def wait_for(done: Any) -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end and not done():
            time.sleep(0.05)
            rows.extend(eng.drain())
            events.extend(eng.events())

    def answered() -> int:
        return sum(r.num_requests - r.num_failures for r in rows if r.name == "tools/call:echo")

    try:
        wait_for(lambda: answered() >= 20)
        (first,) = _stdio_servers()
        os.kill(first, 9)
        wait_for(lambda: any(k == "child_exited" for k, _ in events))
        before = answered()
        wait_for(lambda: answered() >= before + 20)  # the run goes on with a new child
        servers = _stdio_servers()
    finally:
        eng.stop(2.0)
    rows += eng.drain()
    events += eng.events()
    (exit_message,) = [m for k, m in events if k == "child_exited"]
    assert f"pid {first} exited" in exit_message and "signal: 9" in exit_message, exit_message
    assert len(servers) == 1 and servers[0] != first
    assert answered() >= before + 20
    inits = [r for r in rows if r.name == "initialize"]
    assert sum(r.num_requests for r in inits) == 2 and sum(r.num_failures for r in inits) == 0
    reasons = {reason for r in rows for reason, _ in r.errors}
    assert reasons <= {"stdio server exited"}, reasons
    # the engine counts what the servers answered: calls in flight when the child died fail
    calls = sum(r.num_requests - r.num_failures for r in rows if r.name == "tools/call:echo")
    assert calls <= count.stat().st_size <= calls + 8
    check_rows(rows, "mcp-stdio")


@needs_native
def test_a_stdio_reply_over_the_size_bound_fails_at_once(stdio_server: tuple[list[str], Path]) -> None:
    command, count = stdio_server
    # every echo reply carries 2,000 bytes of text: over a 1,024-byte bound; the timeout is far away
    cfg = {
        "transport": "stdio",
        "command": command,
        "inflight_per_process": 4,
        "arguments": {"text": "x" * 2000},
        "max_reply_bytes": 1024,
        "timeout_s": 60,
    }
    eng, totals, rows = run(cfg, 1, 1.5)
    calls, failures, _ = totals["tools/call:echo"]
    assert calls == failures > 10 and totals["initialize"][:2] == [1, 0]
    reasons: dict[str, int] = {}
    for r in rows:
        for reason, n in r.errors:
            reasons[reason] = reasons.get(reason, 0) + n
    assert reasons == {"reply line too large": failures}
    assert calls == count.stat().st_size  # every call was answered (too large), none lost
    events = eng.events()
    assert events and all(k == "limit" and "over max_reply_bytes (1024)" in m for k, m in events), events[:3]
    assert len(events) < 10, "one event a second, not one per line"  # the failures count the lines
    check_rows(rows, "mcp-stdio")


@needs_native
def test_events_fd_and_connect_errors() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    eng = core.NativeEngine(core.EngineConfig(url=f"http://127.0.0.1:{port}/mcp"))
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
    rows = {r.name: r for r in drained}
    assert rows["initialize"].num_requests == rows["initialize"].num_failures > 0
    assert sum(c for _, c in rows["initialize"].failed_buckets) == rows["initialize"].num_failures


@needs_native
@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"transport": "x"}, "transport"),
        ({"family": "everything"}, "family"),
        ({"new_connection": "never"}, "new_connection"),
        ({"arrivals": "bursty"}, "arrivals"),
        ({"url": "ftp://x/"}, "url"),
        ({"threads": 0}, "threads"),
        ({"threads": -1}, "threads"),
        ({"max_reply_bytes": 10}, "max_reply_bytes"),
        ({"rate": -1.0}, "rate"),
        ({"rate": float("nan")}, "rate"),
        ({"worker_index": 2, "worker_count": 2}, "worker_index"),
        ({"worker_count": 0}, "worker_count"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"churn_delete_share": 2.0}, "churn_delete_share"),
        ({"progress_every": 0}, "progress_every"),
        ({"headers": {"A": "b\r\nc"}}, "headers"),
        ({"headers": {"A": 1}}, "headers"),
        ({"headers": {"Authorization": "x"}, "bearer_tokens": ["t"]}, "headers"),
        ({"bearer_tokens": ["a", ""]}, "bearer_tokens"),
        ({"connect_to": ["x:1:y"]}, "connect_to"),
        ({"client_cert": "/c.pem"}, "client_cert"),
        ({"protocol_version": "1999"}, "protocol_version"),
        ({"family": "mixed"}, "mix"),
        ({"family": "mixed", "mix": [{"method": "initialize"}]}, "mix[0]"),
        ({"family": "mixed", "mix": [{"tool": "echo"}, {"method": "tools/list", "stream": True}]}, "mix[1]"),
        ({"transport": "stdio", "url": None}, "command"),
    ],
)
def test_config_errors_name_the_field(fields: dict[str, Any], field: str) -> None:
    mix = [core.MixItem(**item) for item in fields.get("mix", ())]
    with pytest.raises(ValueError, match=f"^engine config: {re.escape(field)}: "):
        core.EngineConfig(**{"url": "http://127.0.0.1:1/mcp", **fields, "mix": mix})


@needs_native
def test_config_types_and_mix_items() -> None:
    with pytest.raises(TypeError, match="threads"):
        core.EngineConfig(url="http://127.0.0.1:1/mcp", threads="2")
    with pytest.raises(TypeError, match="arguments"):
        core.EngineConfig(url="http://127.0.0.1:1/mcp", arguments={"x": {1, 2}})
    with pytest.raises(TypeError, match="mix"):
        core.EngineConfig(url="http://127.0.0.1:1/mcp", family="mixed", mix=[{"tool": "echo"}])
    for bad in (
        {},
        {"tool": "a", "method": "b"},
        {"method": "tools/list", "arguments": {}},
        {"tool": "a", "params": {}},
        {"tool": "a", "weight": -1},
    ):
        with pytest.raises(ValueError, match=r"^engine config: mix item: "):
            core.MixItem(**bad)
    item = core.MixItem(method="resources/read", params={"uri": "file:///a"}, weight=3)
    assert (item.tool, item.method, item.params, item.weight, item.stream) == (None, "resources/read", {"uri": "file:///a"}, 3, False)
    cfg = core.EngineConfig(url="http://127.0.0.1:1/mcp", family="mixed", mix=[core.MixItem(tool="echo", arguments={"text": "x"}), item])
    assert cfg.mix[1] is item and cfg.mix[0].arguments == {"text": "x"}


@needs_native
def test_config_reads_back_with_the_engines_defaults() -> None:
    cfg = core.EngineConfig(url="http://127.0.0.1:1/mcp", headers={"x-api-key": "k"}, arguments={"text": "hi"})
    assert (cfg.transport, cfg.url, cfg.family, cfg.new_connection, cfg.arrivals) == (
        "http",
        "http://127.0.0.1:1/mcp",
        "tools_call",
        "keep",
        "uniform",
    )
    assert (cfg.headers, cfg.arguments, cfg.client_capabilities, cfg.stream_arguments) == (
        {"x-api-key": "k"},
        {"text": "hi"},
        {},
        {"n": 10},
    )
    assert (cfg.threads, cfg.rate, cfg.timeout_s, cfg.max_reply_bytes, cfg.max_sessions) == (1, None, 30.0, 16 * 1024 * 1024, 100_000)
    assert (cfg.protocol_version, cfg.tool, cfg.stream_tool, cfg.request_type, cfg.seed) == (
        "2025-11-25",
        "echo",
        "stream",
        "mcp-http",
        24301,
    )
    assert (cfg.cookies, cfg.retry_after, cfg.insecure, cfg.handshake_call, cfg.cycle_latency, cfg.hold_delete) == (
        True,
        False,
        False,
        True,
        False,
        True,
    )
    assert (cfg.iterations, cfg.progress_every, cfg.late_after_s, cfg.hold_stream) == (None, None, 0.001, True)
    assert (cfg.worker_index, cfg.worker_count) == (0, 1)
    second = core.EngineConfig(url="http://127.0.0.1:1/mcp", worker_index=1, worker_count=2)
    assert (second.worker_index, second.worker_count) == (1, 2)
    assert (cfg.inflight_per_process, cfg.max_inflight, cfg.churn_delete_share, cfg.mix, cfg.command) == (32, 4096, 1.0, (), [])
    # None keeps a default, as leaving the argument out does
    assert core.EngineConfig(url="http://127.0.0.1:1/mcp", threads=None, family=None).threads == 1
    stdio = core.EngineConfig(transport="stdio", command=["srv"], threads=2, rate=50.0)
    assert (stdio.request_type, stdio.url, stdio.threads, stdio.rate) == ("mcp-stdio", None, 2, 50.0)
    assert "stdio" in repr(stdio) and "srv" in repr(stdio)


@needs_native
def test_bad_rate_and_a_stopped_engine() -> None:
    eng = core.NativeEngine(core.EngineConfig(url="http://127.0.0.1:1/mcp"))
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
    eng = core.NativeEngine(core.EngineConfig(url="http://127.0.0.1:1/mcp"))
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
        "from mcpfast import core\nassert not core.HAS_NATIVE_ENGINE and core.NativeEngine is core.EngineConfig is None\n"
        "try:\n    core.require_native_engine()\nexcept RuntimeError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "MCPFAST_CORE": "python"}, capture_output=True, text=True, timeout=60, check=True
    )
    assert "compiled core" in out.stdout
