"""``benchmarks.http_peers`` end to end, briefly, against mcpfast only (the SDK peers run in ``make bench-http``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(300)]


def test_http_peers_quick_run(tmp_path: Path) -> None:
    out = tmp_path / "http"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.http_peers",
            "--out",
            str(out),
            "--servers",
            "mcpfast",
            "--duration",
            "1",
            "--warmup",
            "0.5",
            "--hold",
            "100",
            "--cycles",
            "2000",
            "--runners",
            "native",
            "uvicorn",
            "--rounds",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    (server,) = summary["servers"]
    assert server["server"] == "mcpfast"
    calls, shakes, memory, churn = (server[k] for k in ("calls", "handshakes", "memory", "churn"))
    # Every reply was checked by the generator; no failure, real work in each scenario.
    assert calls["calls"] > 0 and calls["calls_per_second"] > 0 and calls["server_cpu_seconds"] > 0
    assert shakes["handshakes"] > 0 and shakes["handshakes_per_second"] > 0
    # The server's CPU was read over the measured window (by pid), per operation in that window.
    for data, count in ((calls, calls["calls"]), (shakes, shakes["handshakes"])):
        cpu = data["server_cpu"]
        assert cpu["pids"] and cpu["pids"][0] > 0 and "error" not in cpu
        assert 0 < cpu["window_seconds"] <= data["server_cpu_seconds"]
        assert cpu["us_per_operation"] == pytest.approx(cpu["window_seconds"] / count * 1e6, rel=0.01, abs=0.1)
    assert memory["sessions_held"] == 100 and memory["rss_held_kb"] >= memory["rss_before_kb"] > 0
    assert memory["deleted"] == 100
    assert churn["cycles_ok"] == 2000 and len(churn["rss_samples"]) == 10
    assert all(c["failures"]["total"] == 0 for c in (calls, shakes))
    # Two rounds of each rate scenario, servers interleaved; the reported one is one of them.
    for data, key in ((calls, "calls_per_second"), (shakes, "handshakes_per_second")):
        assert len(data["rounds"]) == 2 and all(r["failures"] == 0 and r[key] > 0 for r in data["rounds"])
        assert data[key] in [r[key] for r in data["rounds"]] and "round_problems" not in data
    assert memory["failures"] == 0 and churn["failures"] == 0
    table = (out / "results.md").read_text()
    assert "tools/call echo, calls/s" in table and f"{calls['calls_per_second']:,.0f}" in table
    assert f"| server CPU µs per call | {calls['server_cpu']['us_per_operation']:,.1f} |" in table
    assert (out / "http_peers.png").stat().st_size > 10_000
    # The HTTP server comparison: each runner served the same calls, every reply checked.
    runners = summary["runners"]
    assert set(runners) == {"native", "uvicorn"}
    for name, data in runners.items():
        assert data["calls"] > 0 and data["failures"]["total"] == 0, name
        assert "--runner" in data["command"] or "--server-pid" in data["command"]
        assert f"| {name} | {data['calls_per_second']:,.0f} |" in table
    log = (out / "logs" / "server-mcpfast-runner-uvicorn.log").read_text()
    assert "--runner uvicorn" in log.splitlines()[0]


def test_median_round_picks_the_middle_and_keeps_every_round() -> None:
    from benchmarks.http_peers import median_round

    def rnd(rate: float, failures: int = 0) -> dict:
        return {"calls_per_second": rate, "failures": {"total": failures}, "server_cpu": {"us_per_operation": 1e6 / rate}}

    chosen = median_round([rnd(30.0), rnd(50.0), rnd(40.0)], "calls_per_second")
    assert chosen["calls_per_second"] == 40.0 and [r["calls_per_second"] for r in chosen["rounds"]] == [30.0, 50.0, 40.0]
    assert "round_problems" not in chosen
    even = median_round([rnd(30.0), rnd(50.0)], "calls_per_second")
    assert even["calls_per_second"] == 30.0  # the lower middle: never flattering
    bad = median_round([rnd(30.0), {"error": "server did not start"}, rnd(45.0, failures=2)], "calls_per_second")
    assert bad["round_problems"] == ["server did not start", "2 failures"]
    assert bad["rounds"][1]["error"] == "server did not start"
    assert median_round([{"error": "x"}], "calls_per_second")["error"] == "x"
