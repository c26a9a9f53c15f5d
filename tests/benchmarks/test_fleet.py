"""``benchmarks.fleet`` end to end in its ``--quick`` mode, a fleet too large for the open-file
limit stopped by the agents' own check, and the think-time window."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import fleet
from benchmarks.harness import ROOT
from mcpfast.locust.histogram import Histogram


@pytest.mark.alone  # its background load's seconds need a core: another test's load leaves it none
@pytest.mark.timeout(120)
def test_quick_run_measures_every_phase(tmp_path: Path) -> None:
    code = fleet.main(["--quick", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["command"] == f"flock /tmp/mcpfast-bench.lock python -m benchmarks.fleet --quick --out {tmp_path}"
    assert data["refused"] is None and data["failure_total"] == 0 and data["failures"] == []
    assert set(data["exits"].values()) == {0}, data["exits"]
    assert code in (0, 1)  # 1 only when a verdict fails on a busy machine; the figures are below
    phases = data["phases"]
    assert list(phases) == ["small", "sessions", "streams"]
    # the phases hold what they were asked to: no stream without hold_stream, about half with 0.5
    sessions, streams = phases["sessions"]["plateau"], phases["streams"]["plateau"]
    assert sessions["sessions"] > 0 and sessions["streams"] == 0
    assert 0.3 * streams["sessions"] <= streams["streams"] <= 0.7 * streams["sessions"]
    assert streams["fds"] > streams["sessions"] + streams["streams"]  # a connection per agent, one per stream
    assert streams["generator_fds"] > streams["sessions"]
    # with no agent, no session but the few the agents' pre-run checks opened
    assert all(r["sessions"] <= 3 and r["streams"] == 0 for r in data["idle"].values())
    memory = data["server_memory"]
    assert memory["idle_rss_kib"] > 0 and memory["kib_per_idle_session"] is not None and memory["kib_per_held_stream"] is not None
    assert data["generator_kib_per_agent"] > 0
    # think times: the window's, against the configured log-normal (a tenth of the real one)
    think = data["think"]
    assert think["configured_ms"] == {"p50": 200.0, "p90": 800.0} and think["count"] > 500
    assert abs(think["off"]["p50"]) < 0.25 and abs(think["off"]["p90"]) < 0.25
    assert think["within"] == (abs(think["off"]["p50"]) <= 0.05 and abs(think["off"]["p90"]) <= 0.05)
    # the background load ran in every phase at its rate, its p99 and the ratio taken
    for label in ("small", "sessions", "streams"):
        bg = phases[label]["background"]
        assert bg["exit"] == 0 and bg["pacer"]["achieved_rate"] > 150
        assert bg["tools_call_us"]["count"] > 100 and bg["tools_call_us"]["p99_per_second"]
    p99 = data["background_p99_us"]
    assert data["background_p99_ratio"] == pytest.approx(p99["n"] / p99["small"], abs=1e-3)
    md = (tmp_path / "results.md").read_text()
    assert "## Why N is 200 here, not 100,000" in md and data["command"] in md and "hold_stream = 0.5" in md
    assert not list(tmp_path.glob("*.csv"))  # Locust's files go to logs/
    assert (tmp_path / "logs" / "streams_histograms.json").exists()


def _low_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


@pytest.mark.timeout(120)
def test_a_fleet_over_the_open_file_limit_is_refused_by_the_agents_check(tmp_path: Path) -> None:
    # 1,000 agents half streaming need about 1,756 open files: more than 1,024
    argv = [sys.executable, "-m", "benchmarks.fleet", "--quick", "--small-agents", "1000", "--out", str(tmp_path)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=110, preexec_fn=_low_limit, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    data = json.loads((tmp_path / "results.json").read_text())
    assert "open-file limit (RLIMIT_NOFILE) is 1024" in data["refused"]
    assert list(data["phases"]) == ["small"] and data["phases"]["small"]["exit"] == 2
    assert data["limits"]["rlimit_nofile"] == [1024, 1024]
    assert "**The run stopped before any load**, the agents' check: the open-file limit" in (tmp_path / "results.md").read_text()


def test_the_window_counts_the_thinks_that_ended_in_it() -> None:
    before, after = Histogram(), Histogram()
    for ms in (100, 100, 5000):  # before the window: short ones, and one long
        before.record(ms)
        after.record(ms)
    for ms in [2000] * 50 + [8000] * 10 + [1000] * 40:  # in the window
        after.record(ms)
    got = fleet.think_window(after.to_dict(), before.to_dict(), (2.0, 8.0))
    assert got["count"] == 100 and got["ms"]["p50"] == pytest.approx(2000, rel=1e-3)
    assert got["ms"]["p90"] == pytest.approx(2000, rel=1e-3) and got["within"] is False  # the 91st of 100 is 8 s
    assert fleet.think_window(after.to_dict(), None, (2.0, 8.0))["count"] == 103
    assert fleet.think_window(before.to_dict(), before.to_dict(), (2.0, 8.0))["count"] == 0


def test_workload_and_think_option() -> None:
    text = fleet.workload((2.0, 8.0), 0.5)
    assert 'think = {dist = "lognormal", median = 2, p90 = 8}' in text and "hold_stream = 0.5" in text
    assert 'idle = {dist = "exponential", mean = 2}' in text and "abandon = 0" in text
    assert fleet.parse_think("0.5:2") == (0.5, 2.0)
    assert fleet.lognormal_mean(2.0, 8.0) == pytest.approx(3.59, abs=0.01)
    assert fleet.per_user(12_000) == 100 and fleet.per_user(250) == 50 and fleet.per_user(7) == 7
