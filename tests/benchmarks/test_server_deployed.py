"""``benchmarks.server_deployed`` end to end in a few seconds, its count check, its canned stdio responder and its apps."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import canned_stdio, server_deployed
from benchmarks.deployed_apps import async_echo, plain
from benchmarks.server_deployed import SIDES, YARDSTICK, generator_counts, metrics_counts, stdio_replies

VERSION = "2025-11-25"


@pytest.mark.serial  # its 1 s runs read CPU in clock ticks: a busy machine leaves a side none
@pytest.mark.timeout(240)
def test_tiny_run_measures_every_side_and_checks_every_count(tmp_path: Path) -> None:
    argv = ["--seconds", "1", "--warmup", "0.3", "--rounds", "1", "--connections", "4", "--out", str(tmp_path)]
    assert server_deployed.main(argv) == 0
    text = (tmp_path / "results.json").read_text()
    data = json.loads(text)
    assert data["command"] == "flock /tmp/mcpfast-bench.lock python -m benchmarks.server_deployed " + " ".join(argv)
    assert len(data["loadavg_at_start"]) == 3 and isinstance(data["machine_was_busy"], bool)
    assert data["orders"] == [[side.label for side in SIDES]]
    for side in SIDES:
        (row,) = data["rounds"][side.label]
        assert "error" not in row and row["failures"] == 0 and row["cpu_us_per_call"] > 0, (side.label, row)
    # the yardstick's CPU is haproxy's and the server's, both measured
    for proxied in YARDSTICK.values():
        (row,) = data["rounds"][proxied]
        assert row["haproxy_us_per_call"] > 0 and row["server_us_per_call"] > 0
        assert row["cpu_us_per_call"] == pytest.approx(row["haproxy_us_per_call"] + row["server_us_per_call"], abs=0.01)
    assert set(data["versus"]) == {side.label for side in SIDES if side.base} and set(data["yardstick"]) == set(YARDSTICK)
    assert all(isinstance(v["holds"], bool) and v["median"] > 0 for v in [*data["versus"].values(), *data["yardstick"].values()])
    # TLS sides were served over https with the private CA; the token never reaches the results
    assert data["rounds"]["tls swarm"][0]["url"].startswith("https://") and data["rounds"]["tls swarm"][0]["rows"]["tls:handshake"] == 4
    assert "--tls-cert" in data["rounds"]["tls wrk"][0]["server_argv"]
    combined = data["rounds"]["async+oauth+metrics"][0]
    assert "--token $TOKEN " in combined["calls"]["command"] and "eyJ" not in text
    # /metrics after each metrics side: every request the generator made, exactly, three times over
    assert [c["side"] for c in data["metrics_checks"]] == ["metrics", "async+oauth+metrics"]
    for check in data["metrics_checks"]:
        assert check["equal"] is True and len(check["steps"]) == 3
        first, context, shakes = (step["generator"] for step in check["steps"])
        assert first["tools/call 200"] > 0 and first["initialize 200"] == 4
        assert context["tools/call 200"] > first["tools/call 200"] and shakes["DELETE 200"] > context["DELETE 200"]
    assert data["stdio_replies"]["identical"] is True
    md = (tmp_path / "results.md").read_text()
    assert "| `mcpfast serve` with | client | µs server CPU per tools/call |" in md and data["command"] in md
    assert data["tree"]["commit"] and f"Checkout `{data['tree']['commit'][:12]}`" in md
    assert "## TLS in the server against haproxy in front of the plain server" in md and "## stdio" in md


def test_counts_compare_the_generator_with_the_page() -> None:
    summary = {
        "failures": {"total": 0},
        "requests": {
            "initialize": {"ok_in_window": 0, "ok_total": 4},
            "notifications/initialized": {"ok_in_window": 0, "ok_total": 4},
            "tools/call": {"ok_in_window": 90, "ok_total": 100},
            "delete": {"ok_in_window": 4, "ok_total": 4},
        },
    }
    page = (
        "# HELP mcpfast_http_requests_total requests\n# TYPE mcpfast_http_requests_total counter\n"
        'mcpfast_http_requests_total{method="initialize",status="200"} 8.0\n'
        'mcpfast_http_requests_total{method="notifications/initialized",status="202"} 8.0\n'
        'mcpfast_http_requests_total{method="tools/call",status="200"} 200.0\n'
        'mcpfast_http_requests_total{method="DELETE",status="200"} 8.0\n'
        'mcpfast_http_requests_created{method="DELETE",status="200"} 1.7e9\n'
        "# HELP mcpfast_sessions_open sessions\n# TYPE mcpfast_sessions_open gauge\nmcpfast_sessions_open 0.0\n"
    )
    counts = metrics_counts(page)
    assert counts == {"initialize 200": 8, "notifications/initialized 202": 8, "tools/call 200": 200, "DELETE 200": 8}
    assert generator_counts([summary, summary]) == counts
    assert generator_counts([summary]) != counts
    # a request the server counted under another status is a difference, not a match
    assert metrics_counts(page + 'mcpfast_http_requests_total{method="tools/call",status="401"} 1.0\n') != counts
    with pytest.raises(ValueError, match="failed requests"):
        generator_counts([{**summary, "failures": {"total": 1}}])
    with pytest.raises(ValueError, match="phase"):
        generator_counts([{"requests": {"cycle": {"ok_total": 3}}}])


def test_canned_stdio_answers_as_mcpfast_does() -> None:
    replies = stdio_replies(sys.executable)
    assert replies["identical"] is True, replies
    assert [json.loads(line)["id"] for line in replies["sides"]["stdio canned"]["replies"]] == [0, 1, 2, 3]
    # a string id is copied as sent; a notification gets nothing; another method -32601
    lines = [
        b'{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}',
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        b'{"jsonrpc":"2.0","id":9,"method":"tools/list"}',
    ]
    out = [json.loads(line) for line in canned_stdio.replies(lines).splitlines()]
    assert out[0]["id"] == "a-1" and out[0]["result"]["content"][0]["type"] == "text"
    assert out[1:] == [{"jsonrpc": "2.0", "id": 9, "error": {"code": -32601, "message": "Method not found"}}]


def test_apps_offer_echo_on_the_short_path_and_echo_context_off_it() -> None:
    assert plain.run_plain_tool("echo", {"text": "hi"}, VERSION) == "hi"
    assert async_echo.run_plain_tool("echo", {"text": "hi"}, VERSION) is None  # async: not a plain sync tool

    async def inline() -> None:  # an async def tool runs on the running loop
        assert async_echo.run_tool_inline("echo", {"text": "hi"}, VERSION) == "hi"
        for app in (plain, async_echo):
            # a tool that takes the context is never run by the short path: nothing ran
            assert app.run_tool_inline("echo_context", {"text": "hi"}, VERSION) is None

    asyncio.run(inline())


def test_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.server_deployed", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0 and "--quick" in proc.stdout and "--only" in proc.stdout
