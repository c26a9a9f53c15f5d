"""The in-process HTTP A/B drives each tree's native server connection and pairs the bursts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import http_inproc
from benchmarks.harness import ROOT


@pytest.mark.parametrize("mode", ["calls", "handshakes"])
def test_measure_pairs_the_tree_with_itself(mode: str) -> None:
    tree = ROOT
    out = http_inproc.measure({"old": tree, "new": tree}, mode=mode, requests=16, bursts=2, rounds=1, cpu=None)
    assert out["mode"] == mode and out["core"] in ("rust", "python")
    assert len(out["ratio_new_over_old_per_round"]) == 1
    assert 0.2 < out["ratio_new_over_old"] < 5  # the same code on both sides
    assert all(v > 0 for v in out["median_cpu_ns"].values())


def test_main_writes_json_and_markdown(tmp_path: Path) -> None:
    out = tmp_path / "http_inproc.json"
    argv = ["--baseline-src", str(ROOT), "--requests", "8", "--bursts", "1", "--rounds", "1", "--cpu", "-1"]
    assert http_inproc.main([*argv, "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["command"].startswith("python -m benchmarks.http_inproc") and len(data["loadavg_at_start"]) == 3
    assert [r["mode"] for r in data["results"]] == ["calls", "handshakes"]
    assert "per second new/old" in out.with_suffix(".md").read_text()


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown mode"):
        http_inproc.measure({"old": ROOT, "new": ROOT}, mode="nope", rounds=1)
