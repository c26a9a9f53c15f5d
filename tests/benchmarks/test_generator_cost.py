"""A shortened generator-cost benchmark (``python -m benchmarks.generator_cost``): both locust
runs (MCP user, FastHttpUser) complete with zero failures and a ratio comes out.  No speed
assertion: two shared cores make rates meaningless in a test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from _support import child_env


def test_generator_cost_short_run(tmp_path: Path) -> None:
    out = tmp_path / "swarm"
    cmd = [sys.executable, "-m", "benchmarks.generator_cost", "--out", str(out), "--users", "4", "--seconds", "2", "--repeats", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=child_env(), cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    result = json.loads((out / "generator_cost.json").read_text())
    runs = {r["kind"]: r for r in result["runs"]}
    assert set(runs) == {"mcp", "fasthttp"}
    for run in runs.values():
        assert run["returncode"] == 0 and run["failures"] == 0, run
        assert run["requests"] > 0 and run["rps"] > 0, run
    ratio = result["summary"]["ratio_median"]
    assert isinstance(ratio, float) and ratio > 0
    assert result["summary"]["cpu_ratio_median"] is not None
    assert (out / "generator_cost.md").read_text().startswith("# Generator cost")
    assert (out / "generator_cost.png").stat().st_size > 0
