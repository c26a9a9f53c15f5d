"""A short run of the stdio benchmark: mcpfast and the official SDK's low-level server.

Correctness is asserted (every call answered, matched by id, no error); speed only as a sanity
check (mcpfast ahead of the SDK). The numbers themselves come from
``python -m benchmarks.stdio_bench`` (bench_results/stdio/).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from benchmarks import stdio_bench

pytestmark = pytest.mark.timeout(60)

pytest.importorskip("mcp")


def _cpu(index: int) -> int | None:
    # Pin like the benchmark does when there are two CPUs to pin to; otherwise let the OS place.
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return index
    return None


def test_short_run_both_servers(tmp_path: Path) -> None:
    runs: dict[str, list[dict[str, object]]] = {}
    for name in ("mcpfast", "python-sdk"):
        result = stdio_bench.run_server(stdio_bench.server_command(name, _cpu(1)), duration=1.5, warmup=0.3, inflight=32)
        assert result["calls"] > 0, name
        assert result["errors"] == 0 and result["unexpected_ids"] == 0, name
        assert result["p50_ms"] <= result["p99_ms"], name
        runs[name] = [result]
    summary = stdio_bench.summarise(runs)
    assert summary["ratio_mcpfast_over_sdk"] > 1, summary
    data = {
        "command": "pytest tests/benchmarks/test_stdio_bench.py",
        "config": {"duration": 1.5, "warmup": 0.3, "inflight": 32, "rounds": 1, "server_cpu": 1, "client_cpu": -1},
        "commands": {n: stdio_bench.server_command(n, _cpu(1)) for n in runs},
        "machine": stdio_bench.machine(),
        "runs": runs,
        "summary": summary,
        "client_bound_runs": [],
    }
    stdio_bench.write_report(tmp_path, data)
    assert json.loads((tmp_path / "results.json").read_text())["summary"]["ratio_mcpfast_over_sdk"] > 1
    assert "| mcpfast |" in (tmp_path / "results.md").read_text()


def test_error_replies_are_counted() -> None:
    # The client's reply check notices an error reply (so a broken server cannot pass as fast).
    result = stdio_bench.run_server(
        stdio_bench.server_command("mcpfast", None) + ["--app", "tests_stdio_bench_app:app"],
        duration=0.3,
        warmup=0.0,
        inflight=4,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])},
    )
    assert result["errors"] >= result["calls"] > 0  # errors are counted over the whole run
