"""Two server processes alone and together: each one's CPU per call, and Redis's own count of
the commands the session calls made while timed."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import workers_inproc


def test_both_modes_time_each_worker_alone_and_together_and_the_session_calls_skip_redis(tmp_path: Path) -> None:
    argv = ["--requests", "200", "--connections", "4", "--bursts", "2", "--rounds", "1", "--out", str(tmp_path)]
    assert workers_inproc.main(argv) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["command"].startswith("flock /tmp/mcpfast-bench.lock python -m benchmarks.workers_inproc")
    assert set(data["results"]) == {"stateless", "calls"}
    for mode, result in data["results"].items():
        (only,) = result["rounds"]
        assert set(only["workers"]) == {"A", "B"}
        for worker in only["workers"].values():
            assert worker["alone_ns"] > 0 and worker["together_ns"] > 0 and worker["together_over_alone"] > 0
        assert result["workers_measured"] == 2
        assert result["store"] == ("redis" if mode == "calls" else "memory")
    # the sessions were made in Redis before the timed bursts (the untimed first burst); the
    # 800 timed calls per worker made no command there
    assert data["results"]["calls"]["redis_commands_while_timed"] == 0
    assert data["results"]["stateless"]["redis_commands_while_timed"] is None
    assert "together / alone" in (tmp_path / "results.md").read_text()
