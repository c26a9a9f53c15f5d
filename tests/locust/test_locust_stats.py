"""Locust wiring: local and distributed runs write merged µs histograms and a percentile table.

The runs happen in child interpreters (see conftest.py for why); each is bounded to a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import configargparse
import pytest
from _support import locust_master_args

from mcpfast.locust.histogram import Histogram
from mcpfast.locust.options import DEFAULTS, add_arguments, option

LOCUSTFILE = textwrap.dedent(
    """
    import locust  # noqa: F401  (first, so gevent patches the stdlib early)
    import os

    from locust import User, constant, events, task

    from mcpfast.locust import stats as mstats

    COUNT = {"n": 0}


    class CliRecorder(User):
        wait_time = constant(0.005)

        @task
        def call(self):
            s = mstats.get(self.environment)
            s.pacer.wait()
            s.record("test", "tools/call:echo", 200 + COUNT["n"] % 500)
            COUNT["n"] += 1


    @events.test_stop.add_listener
    def dump_count(environment, **kw):
        if environment.parsed_options.worker:
            path = os.path.join(os.environ["MCPFAST_TEST_OUT"], f"worker-{os.getpid()}.count")
            with open(path, "w") as fh:
                fh.write(str(COUNT["n"]))
    """
)


def test_options_register_in_one_group_with_defaults_and_checks() -> None:
    parser = configargparse.ArgumentParser()
    add_arguments(parser)
    parsed = parser.parse_args([])
    assert (parsed.mcp_histogram_out, parsed.mcp_rate, parsed.mcp_validate_share) == (None, 0.0, 0.01)
    parsed = parser.parse_args(["--mcp-rate", "250", "--mcp-validate-share", "0.5", "--mcp-histogram-out", "x/run"])
    assert (parsed.mcp_histogram_out, parsed.mcp_rate, parsed.mcp_validate_share) == ("x/run", 250.0, 0.5)
    for bad in (["--mcp-validate-share", "1.5"], ["--mcp-rate", "-1"], ["--mcp-rate", "nan"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)

    class Env:
        parsed_options = None

    assert option(Env(), "mcp_validate_share") == DEFAULTS["mcp_validate_share"]


def _check_table(table: str) -> None:
    assert "p50" in table and "p99.9" in table and "p99.99" in table and "max" in table
    assert "test tools/call:echo" in table and "Aggregated" in table
    assert "open model: target 400/s" in table
    assert "schema checks:" in table


def test_local_run_writes_histograms_and_table(run_scenario, tmp_path: Path) -> None:
    result = run_scenario("local")
    path = Path(result["path"])
    assert path == tmp_path / "local_histograms.json"
    data = json.loads(path.read_text())
    assert data["format"] == "mcpfast-histograms" and data["runner"] == "local" and data["complete"]
    ok = sum(h["n"] for h in data["histograms"])
    failed = sum(h["n"] for h in data["failed_histograms"])
    assert result["records"] > 50
    assert ok + failed == result["records"]
    assert failed == result["records"] // 50  # every 50th call is recorded as failed
    h = Histogram.from_dict(data["histograms"][0])
    assert h.min >= 100  # synthetic service time 100..1099 µs plus schedule lag
    assert data["histograms"][0]["summary"]["p50"] == h.value_at_percentile(50)
    assert data["pacer"]["target_rate"] == 400.0
    assert data["pacer"]["sent"] == result["records"]
    assert data["pacer"]["lag"]["n"] == result["records"]
    assert data["validation"]["checked"] == data["validation"]["seen"] // 10  # --mcp-validate-share 0.1
    assert result["schedule"] == [0, 1, 400.0]
    # report() also fed Locust's own statistics
    assert (result["locust_requests"], result["locust_failures"]) == (result["records"], failed)
    _check_table(result["table"])


def test_distributed_run_merges_worker_histograms_exactly(run_scenario, tmp_path: Path) -> None:
    result = run_scenario("distributed")
    assert [run["finish"] for run in result["runs"]] == ["stop", "quit"]
    for run in result["runs"]:
        assert run["worker_records"] > 50
        assert run["ok"] + run["failed"] == run["worker_records"]  # merged count == sum of workers' records
        assert run["complete"] is True
        assert run["workers"] == 2
        assert run["pacer"]["sent"] == run["worker_records"]
        assert run["validation"]["seen"] == run["worker_records"]
        # --mcp-rate 400 split over two workers: 200/s each, indexes 0 and 1 of 2
        assert run["schedules"] == [[0, 2, 200.0], [1, 2, 200.0]]
    _check_table(result["table"])


def test_output_prefix_and_waiting_for_final_deltas(run_scenario, tmp_path: Path) -> None:
    result = run_scenario("units")
    assert result["prefixes"] == ["run/x", f"{tmp_path}/units", None]  # None: no files written
    assert result["after_one"] is None  # one of two workers reported: keep waiting
    assert result["incomplete"] == [False, ["w2"], 1]  # written at quitting, flagged
    assert result["complete"] == [True, [], 2]
    assert result["flush_again"] is None


@pytest.mark.slow
def test_cli_processes_run_merges_forked_workers(tmp_path: Path, child_env) -> None:
    locustfile = tmp_path / "swarm.py"
    locustfile.write_text(LOCUSTFILE)
    out = tmp_path / "out" / "cli"
    args = ["-f", str(locustfile), "--headless", "-u", "4", "-r", "100", "-t", "2s", "--processes", "2", *locust_master_args()]
    args += ["--mcp-rate", "300", "--mcp-histogram-out", str(out), "--only-summary", "--exit-code-on-error", "0"]
    proc = subprocess.run(
        [sys.executable, "-m", "locust", *args],
        capture_output=True,
        text=True,
        timeout=40,
        env=child_env(MCPFAST_TEST_OUT=str(tmp_path)),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    data = json.loads((tmp_path / "out" / "cli_histograms.json").read_text())
    counts = [int(p.read_text()) for p in tmp_path.glob("worker-*.count")]
    assert len(counts) == 2 and all(counts)
    assert data["runner"] == "master" and data["complete"] is True and len(data["workers"]) == 2
    assert sum(h["n"] for h in data["histograms"]) == sum(counts)
    assert data["pacer"]["sent"] == sum(counts)
    table = proc.stdout + proc.stderr
    assert "mcpfast latency percentiles" in table and "test tools/call:echo" in table


def test_pure_modules_do_not_import_locust_or_gevent(child_env) -> None:
    # Importing Locust monkey-patches the interpreter; the measurement core must stay free of it.
    code = (
        "import sys\n"
        "import mcpfast.locust, mcpfast.locust.histogram, mcpfast.locust.pacing\n"
        "import mcpfast.client.validate, mcpfast.locust.options\n"
        "print(sorted(m for m in ('locust', 'gevent') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=child_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
