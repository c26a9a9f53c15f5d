"""``--mcp-prometheus-port`` scraped by a real Prometheus (Debian's, ``make prometheus-install``),
one of the test's own on a free port, every second: after a headless run the values Prometheus
stored per row equal ``_stats.csv`` (requests, failures, the latency histogram's count) and the
buckets equal the run's ``_histograms.json`` cut at the same bounds - on both engines, and on a
master that merges a worker's reports.  Bad input: a taken port stops the run with exit code 2
before any request; a worker given the option says once that it ignores it."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _loadtest_support import LOADTESTS, Run, child_env, locust_command, start_counting_server, stop
from _support import free_port, start_process, wait_until

from mcpfast.locust.histogram import Histogram
from mcpfast.locust.options import native_available
from mcpfast.locust.prometheus import BUCKETS_US, add_to_buckets, cumulative

pytestmark = pytest.mark.slow

TOOLS_CALL = str(Path(LOADTESTS) / "tools_call.py")
DURATION = "mcpfast_swarm_request_duration_microseconds"
LOAD = ("-u", "2", "-r", "2", "-t", "4s", "--mcp-prometheus-linger", "4")


class Prometheus:
    """A ``prometheus`` process of the test's own: temporary config and storage, 127.0.0.1 on a
    free port, scraping ``target`` every second (not the package's service, if one runs)."""

    def __init__(self, folder: Path, target: str) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is not installed (make test installs Debian's prometheus)")
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            f"scrape_configs:\n  - job_name: swarm\n    static_configs:\n      - targets: ['{target}']\n"
        )
        self.port = free_port()
        self.log = folder / "prometheus.log"
        argv = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        with open(self.log, "wb") as log:
            self.proc = start_process(argv, self.port, "prometheus", stdout=log, stderr=subprocess.STDOUT)
        assert wait_until(self.ready, timeout=30), self.log.read_text()[-3000:]
        # Prometheus hands new targets to its scrape loop only every 5 s: until its first try at the
        # swarm's port (refused, since no swarm listens yet), a run would go unscraped
        assert wait_until(self.tried_target, timeout=30), self.log.read_text()[-3000:]

    def _get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as resp:  # 127.0.0.1 only
            return resp.read()

    def ready(self) -> bool:
        try:
            self._get("/-/ready")
            return True
        except OSError:
            return False

    def tried_target(self) -> bool:
        targets = json.loads(self._get("/api/v1/targets"))["data"]["activeTargets"]
        return any(t["health"] != "unknown" for t in targets)

    def values(self, expr: str, *labels: str) -> dict[tuple[str, ...], float]:
        """An instant query's result: ``{(label values...): value}``."""
        data = json.loads(self._get("/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
        assert data["status"] == "success", data
        return {tuple(r["metric"].get(k, "") for k in labels): float(r["value"][1]) for r in data["data"]["result"]}

    def last(self, metric: str, testid: str, *labels: str) -> dict[tuple[str, ...], float]:
        """The last value stored for each series of ``metric`` in ``testid``. A range over the
        run, because the target is gone by now and its series are marked stale."""
        return self.values(f'last_over_time({metric}{{testid="{testid}"}}[10m])', *labels)

    def stop(self) -> None:
        stop(self.proc)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[int], Prometheus]]:
    """``prometheus(port)``: a Prometheus scraping the swarm's endpoint at 127.0.0.1:``port``."""
    started: list[Prometheus] = []

    def start(port: int) -> Prometheus:
        started.append(Prometheus(tmp_path / f"prometheus-{port}", f"127.0.0.1:{port}"))
        return started[-1]

    yield start
    for p in started:
        p.stop()


@pytest.fixture
def counting_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    proc, url, countfile = start_counting_server("mcpfast", tmp_path)
    yield url, countfile
    stop(proc)


def run(tmp_path: Path, name: str, *args: str, engine: str = "python") -> subprocess.CompletedProcess:
    prefix = tmp_path / name
    cmd = locust_command(TOOLS_CALL, prefix, "--exit-code-on-error", "0", "--mcp-engine", engine, *args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=child_env(), cwd=tmp_path)


def assert_prometheus_has_the_run(prom: Prometheus, result: Run, testid: str) -> dict[tuple[str, ...], int]:
    csv = result.stats()
    requests = {key: int(row["Request Count"]) for key, row in csv.items()}
    assert requests and all(requests.values()), requests
    assert prom.last("mcpfast_swarm_requests_total", testid, "type", "name") == requests
    assert prom.last("mcpfast_swarm_failures_total", testid, "type", "name") == {key: int(row["Failure Count"]) for key, row in csv.items()}
    assert prom.last(f"{DURATION}_count", testid, "type", "name") == requests
    # the buckets are the run's µs histograms cut at BUCKETS_US
    hist = result.histograms()
    counts: dict[tuple[str, str], list[int]] = {}
    for entry in hist["histograms"] + hist["failed_histograms"]:
        add_to_buckets(Histogram.from_dict(entry), counts.setdefault((entry["type"], entry["name"]), [0] * (len(BUCKETS_US) + 1)))
    expected = {(t, n, float(le)): v for (t, n), c in counts.items() for le, v in cumulative(c)}
    got = {(t, n, float(le)): v for (t, n, le), v in prom.last(f"{DURATION}_bucket", testid, "type", "name", "le").items()}
    assert got == expected
    # scraped while the users ran, not only at the end
    assert prom.values(f'max_over_time(mcpfast_swarm_users{{testid="{testid}"}}[10m])') == {(): 2.0}
    return requests


def test_prometheus_stores_what_stats_csv_counts(tmp_path: Path, counting_server, prometheus) -> None:
    url, countfile = counting_server
    port = free_port()
    prom = prometheus(port)
    proc = run(tmp_path, "py", *LOAD, "--host", url, "--mcp-tool", "counted", "--mcp-prometheus-port", str(port), "--mcp-testid", "py-1")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    assert "testid=py-1" in proc.stderr
    requests = assert_prometheus_has_the_run(prom, Run(tmp_path / "py", proc), "py-1")
    assert requests[("mcp-http", "tools/call:counted")] == countfile.stat().st_size > 0  # the server's own count


@pytest.mark.skipif(not native_available(), reason="mcpfast._core has no NativeEngine (not built)")
def test_native_engine_rows_and_failures_reach_prometheus(tmp_path: Path, counting_server, prometheus) -> None:
    url, _countfile = counting_server
    port = free_port()
    prom = prometheus(port)
    # a tool the server does not have: every call is a failure row
    proc = run(tmp_path, "native", *LOAD, "--host", url, "--mcp-tool", "missing", "--mcp-prometheus-port", str(port), engine="native")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    found = re.search(r"testid=(\S+)", proc.stderr)  # made at start and logged
    assert found, proc.stderr[-3000:]
    result = Run(tmp_path / "native", proc)
    assert_prometheus_has_the_run(prom, result, found.group(1))
    failures = prom.last("mcpfast_swarm_failures_total", found.group(1), "type", "name")
    assert failures[("mcp-http", "tools/call:missing")] > 0, failures


def test_a_taken_port_stops_the_run_before_any_load(tmp_path: Path, counting_server) -> None:
    url, countfile = counting_server
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run(tmp_path, "taken", *LOAD, "--host", url, "--mcp-tool", "counted", "--mcp-prometheus-port", str(port))
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-5000:]
    assert f"--mcp-prometheus-port: cannot listen on 0.0.0.0:{port}" in proc.stderr
    assert countfile.stat().st_size == 0  # the server answered no call


def test_a_worker_ignores_the_option_and_the_master_serves_the_merged_figures(tmp_path: Path, counting_server, prometheus) -> None:
    url, _countfile = counting_server
    master, port = free_port(), free_port()
    prom = prometheus(port)
    worker_log = tmp_path / "worker.log"
    with socket.socket() as taken, open(worker_log, "w") as log:
        taken.bind(("127.0.0.1", 0))
        taken.listen()  # a worker that tried to serve would stop with exit code 2
        worker = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", TOOLS_CALL, "--worker", "--master-host", "127.0.0.1", "--master-port", str(master)]
            + ["--mcp-engine", "python", "--mcp-prometheus-port", str(taken.getsockname()[1])],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env(),
            cwd=tmp_path,
        )
        try:
            master_args = ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master), "--expect-workers", "1"]
            serve = ["--mcp-prometheus-port", str(port), "--mcp-testid", "m-1"]
            proc = run(tmp_path, "master", *master_args, *LOAD, "--host", url, "--mcp-tool", "counted", *serve)
        finally:
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    text = worker_log.read_text()
    assert worker.returncode == 0, text[-3000:]
    assert text.count("--mcp-prometheus-port is ignored on a worker") == 1, text[-3000:]
    result = Run(tmp_path / "master", proc)
    assert result.histograms()["runner"] == "master" and len(result.histograms()["workers"]) == 1
    assert_prometheus_has_the_run(prom, result, "m-1")
