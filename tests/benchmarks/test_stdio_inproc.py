"""The in-process stdio A/B runs its workers in the trees it is given and pairs their bursts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import stdio_inproc
from benchmarks.harness import ROOT


@pytest.mark.parametrize("mode", ["line", "engine", "chunk"])
def test_measure_pairs_old_and_new(mode: str) -> None:
    tree = ROOT
    out = stdio_inproc.measure({"old": tree, "new": tree}, mode=mode, messages=64, bursts=2, rounds=1, cpu=None)
    assert out["mode"] == mode and out["core"] in ("rust", "python")
    assert len(out["ratio_new_over_old_per_round"]) == 1 and out["ratio_new_over_old"] > 0
    assert all(v > 0 for v in out["median_cpu_ns"].values())


def test_main_writes_json_and_markdown(tmp_path: Path) -> None:
    out = tmp_path / "inproc.json"
    argv = ["--baseline-src", str(ROOT), "--modes", "line", "--messages", "32", "--bursts", "1", "--rounds", "1", "--cpu", "-1"]
    assert stdio_inproc.main([*argv, "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["command"].startswith("python -m benchmarks.stdio_inproc") and len(data["loadavg_at_start"]) == 3
    assert [r["mode"] for r in data["results"]] == ["line"]
    assert "calls/s new/old" in out.with_suffix(".md").read_text()


def test_a_failing_worker_is_reported(tmp_path: Path) -> None:
    (tmp_path / "mcpfast").mkdir()  # a tree whose mcpfast has no server: the worker dies on import
    (tmp_path / "mcpfast" / "__init__.py").write_text("")
    with pytest.raises(RuntimeError, match="died"):
        stdio_inproc.measure({"old": tmp_path, "new": ROOT}, messages=8, bursts=1, rounds=1, cpu=None)
