"""``benchmarks.server_canned`` end to end in a few seconds, and its canned responder under a real MCP client."""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import server_canned
from benchmarks.canned_responder import json_value
from benchmarks.server_canned import FIGURES, SIDES, exchange, start

ECHO = {"content": [{"type": "text", "text": "hello"}]}


@pytest.mark.timeout(180)
def test_tiny_run_writes_every_side_ratio_and_figure(tmp_path: Path) -> None:
    argv = [
        "--seconds",
        "0.5",
        "--warmup",
        "0.2",
        "--rounds",
        "1",
        "--workers-rounds",
        "1",
        "--workers-rate",
        "3000",
        "--out",
        str(tmp_path),
    ]
    assert server_canned.main(argv) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["command"] == "flock /tmp/mcpfast-bench.lock python -m benchmarks.server_canned " + " ".join(argv)
    assert len(data["loadavg_at_start"]) == 3 and len(data["loadavg_at_end"]) == 3 and isinstance(data["machine_was_busy"], bool)
    assert data["machine"]["nproc"] >= 1 and data["pinning"] == {"server": "0", "generator": "1"}
    # the two sides answered one MCP session alike: status, header names, header and body bytes
    assert data["reply_shapes"]["identical"] is True
    for side in SIDES:
        (row,) = data["sides"][side]["rounds"]
        assert row["failures"] == 0 and "error" not in row
        assert all(row[key] > 0 for key in FIGURES), (side, row)
        assert row["calls"]["server_cpu"]["pids"] and row["handshakes"]["handshakes"] > 0
        assert set(data["sides"][side]["median"]) >= set(FIGURES)
    for key in FIGURES:
        assert data["ratios"][key]["median"] > 0 and len(data["ratios"][key]["per_round"]) == 1
    workers = data["workers"]
    for model in ("closed", "open"):
        rounds = workers[model]["rounds"]
        assert [len(rounds[n][0]["per_worker"]) for n in ("2", "1")] == [2, 1]
        for n in ("2", "1"):
            (row,) = rounds[n]
            assert row["failures"] == 0 and row["calls_per_second"] > 0
            assert "--stateless-only --workers " + n in row["server_argv"] and row["server_argv"].startswith(
                f"{shutil.which('taskset')} -c 0,1 "
            )
            assert all(w["cpu_us_per_call"] > 0 for w in row["per_worker"])
            assert sum(w["share_of_calls"] for w in row["per_worker"]) == pytest.approx(1.0, abs=0.001)
        assert workers[model]["ratios"]["workers_measured"] == 2 and workers[model]["ratios"]["pooled"]["median"] > 0
    assert "--rate 6000.0" in workers["open"]["rounds"]["2"][0]["calls"]["command"]
    table = (tmp_path / "results.md").read_text()
    assert "| server | calls/s | CPU/call µs | handshakes/s | CPU/handshake µs | tools/call p50 µs | p99 µs |" in table
    assert "| **mcpfast / canned, median** |" in table and "| mcpfast / canned, min – max |" in table
    assert f"| mcpfast serve (demo app) | {data['sides']['mcpfast']['median']['calls_per_second']:,.0f} |" in table
    assert "`--workers 2` against `--workers 1`" in table and data["command"] in table


def test_canned_responder_serves_an_mcp_client_session(tmp_path: Path) -> None:
    opts = argparse.Namespace(python=sys.executable)
    with start("canned", opts, tmp_path) as server:
        steps = exchange("127.0.0.1", server.port)
        assert [(s["step"], s["status"]) for s in steps] == [
            ("initialize", 200),
            ("notifications/initialized", 202),
            ("tools/call", 200),
            ("DELETE", 200),
        ]
        assert steps[0]["headers"] == ["mcp-session-id", "content-type", "content-length", "date"]
        assert steps[2]["result"] == ECHO
        # the id is copied as sent (a string here), whatever the spacing; unknown methods get -32601
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        for request, expected in (
            ({"jsonrpc": "2.0", "id": "a-1", "method": "tools/call", "params": {"name": "echo"}}, {"id": "a-1", "result": ECHO}),
            ({"jsonrpc": "2.0", "method": "ping", "id": 7}, {"id": 7, "result": {}}),
            ({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}, {"id": 8, "error": {"code": -32601, "message": "Method not found"}}),
        ):
            conn.request("POST", "/mcp", body=json.dumps(request), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read()) == {"jsonrpc": "2.0", **expected}
        conn.request("GET", "/mcp")
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (405, b"")
        conn.request("POST", "/other", body=b"{}")
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (404, b"")
        conn.close()


def test_json_value_finds_members_by_bytes() -> None:
    body = b'{"jsonrpc": "2.0", "method" : "tools/call", "params": {"name": "echo"}, "id": 42}'
    assert json_value(body, b'"id"') == b"42"
    assert json_value(body, b'"method"') == b'"tools/call"'
    assert json_value(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', b'"id"') is None
    # a quoted "id" that is a value, not a member name, is passed over
    assert json_value(b'{"x":"id","id":"s-1"}', b'"id"') == b'"s-1"'


def test_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.server_canned", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0 and "--quick" in proc.stdout and "--workers-rate" in proc.stdout
