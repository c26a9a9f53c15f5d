"""With the web UI (not --headless) the native engine's numbers show live: Locust's own
``/stats/requests`` endpoint, polled while the test runs, reports the engine's rates, percentiles
and failures (with their reason)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from _loadtest_support import LOADTESTS, child_env, start_counting_server, stop
from _support import free_port

from mcpfast.locust.options import native_available

pytestmark = pytest.mark.skipif(not native_available(), reason="mcpfast._core has no NativeEngine (not built)")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as resp:  # 127.0.0.1 only
        return json.loads(resp.read())


def _poll(web: int, seconds: float, ok) -> tuple[dict, list[dict]]:
    seen: list[dict] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(1.0)
        try:
            data = _get(f"http://127.0.0.1:{web}/stats/requests")
        except OSError:
            continue
        seen.append(data)
        rows = {r["name"]: r for r in data["stats"]}
        if data["state"] == "running" and ok(data, rows):
            return data, seen
    pytest.fail(f"no live native figures in /stats/requests: {seen[-1:] if seen else 'no answer'}")


def test_web_ui_shows_native_rates_percentiles_and_failures(tmp_path: Path) -> None:
    server, url, _count = start_counting_server("mcpfast", tmp_path)
    web = free_port()
    # the demo's stream tool with a 3 ms delay per step: two steps, about 6 ms a call
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(Path(LOADTESTS) / "tools_call.py"),
        "--autostart",
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "60s",
        "--web-host",
        "127.0.0.1",
        "--web-port",
        str(web),
        "--host",
        url,
        "--mcp-engine",
        "native",
        "--mcp-tool",
        "stream",
        "--mcp-tool-args",
        '{"n": 2, "delay": 0.003}',
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env(), cwd=tmp_path)
    name = "tools/call:stream"
    try:
        live, _ = _poll(
            web,
            30,
            lambda d, rows: name in rows and rows[name]["current_rps"] > 0 and (rows[name]["response_time_percentile_0.95"] or 0) >= 5,
        )
        rows = {r["name"]: r for r in live["stats"]}
        assert rows[name]["num_failures"] == 0 and rows["initialize"]["num_requests"] >= 4
        assert 5 <= rows[name]["median_response_time"] < 1000
        assert live["user_count"] == 4 and live["current_response_time_percentiles"]
        stop(server)  # the server goes away mid-run: failures, with their reason, show up live
        failing, _ = _poll(web, 30, lambda d, rows: d["current_fail_per_sec"] > 0 and d["errors"])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        stop(server)
    assert failing["stats"][-1]["num_failures"] > 0
    assert all(e["error"] and e["occurrences"] > 0 for e in failing["errors"])
