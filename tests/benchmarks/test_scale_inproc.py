"""The in-process store A/B serves one tree twice, memory against a real Redis, and pairs the bursts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import scale_inproc

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is installed by `make install`")


def test_main_measures_both_stores_and_the_redis_worker_talks_to_redis(tmp_path: Path) -> None:
    out = tmp_path / "inproc.json"
    argv = ["--requests", "64", "--connections", "4", "--bursts", "2", "--rounds", "1", "--cpu", "-1", "--out", str(out)]
    assert scale_inproc.main(argv) == 0
    data = json.loads(out.read_text())
    assert data["command"].startswith("python -m benchmarks.scale_inproc") and len(data["loadavg_at_start"]) == 3
    calls, handshakes = data["results"]
    assert (calls["mode"], handshakes["mode"]) == ("calls", "handshakes")
    for r in data["results"]:
        assert all(v > 0 for v in r["median_cpu_ns"].values())
        assert len(r["redis_over_memory_per_round"]) == 1 and r["redis_over_memory"] > 0
    # the calls run made its 4 sessions in Redis, then paid no command per call (144 calls with
    # the warm-up); the handshakes run made and ended each of its 36 sessions there (at least a
    # command each way, inside the merged scripts)
    assert 1 <= calls["redis_commands"] < 64
    assert handshakes["redis_commands"] >= 2 * 36
    assert "Redis / memory" in out.with_suffix(".md").read_text()
