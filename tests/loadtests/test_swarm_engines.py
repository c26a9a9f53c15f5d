"""Locust headless runs on both engines, checked against the servers' own counts: every output of a
run (CSV, console, µs histograms, HTML) counts the same requests, the server answered exactly the
calls the swarm counted, with 0 failures; ``--processes 2``, master + 2 workers and a
``LoadTestShape`` on the native engine; a run without ``--csv`` writes nothing into its directory."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _counting_servers import answered_between
from _loadtest_support import (
    LOADTESTS,
    Run,
    all_counts,
    child_env,
    start_counting_server,
    stdio_counting_command,
    stop,
)
from _support import free_port, locust_master_args, stdio_start_seconds

from mcpfast.locust.hlog import read_log, tag_of
from mcpfast.locust.options import native_available

needs_native = pytest.mark.skipif(not native_available(), reason="mcpfast._core has no NativeEngine (not built)")
TOOLS_CALL = str(Path(LOADTESTS) / "tools_call.py")
BASE = ["--headless", "--only-summary", "--exit-code-on-error", "0", "--stop-timeout", "3"]


def locust(tmp: Path, *args: str, name: str = "r", csv: bool = True, timeout: float = 90.0) -> tuple[Run, Path]:
    prefix = tmp / name
    html = tmp / f"{name}.html"
    out = ["--csv", str(prefix), "--html", str(html)] if csv else []
    cmd = [sys.executable, "-m", "locust", *BASE, *out, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=child_env(), cwd=tmp)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    return Run(prefix, proc), html


def assert_agree(run: Run, html: Path, countfile: Path | None = None, rtype: str = "mcp-http") -> dict:
    counts = all_counts(run, html)
    csv = counts["csv"]
    for source, got in counts.items():
        assert got == csv, (source, got, csv)
    assert not run.failures(), (run.failures(), run.errors())
    calls = csv.get((rtype, "tools/call:counted"), 0)
    assert calls > 0, csv
    if countfile is not None:  # the server's own count of calls equals the swarm's
        assert countfile.stat().st_size == calls, (countfile.stat().st_size, csv)
    return csv


@pytest.fixture
def counting_server(tmp_path: Path):
    started = []

    def start(kind: str = "mcpfast", *args: str):
        proc, url, countfile = start_counting_server(kind, tmp_path, *args)
        started.append(proc)
        return url, countfile

    yield start
    for proc in started:
        stop(proc)


ENGINES = ["python", pytest.param("native", marks=needs_native)]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_output_counts_what_the_server_answered(tmp_path: Path, counting_server, engine: str) -> None:
    url, countfile = counting_server("mcpfast")
    # --json-file too: Locust's serialisation clears its entries, the CSV rows must be final before it
    run, html = locust(
        tmp_path,
        "-f",
        TOOLS_CALL,
        "-u",
        "8",
        "-r",
        "8",
        "-t",
        "5s",
        "--host",
        url,
        "--mcp-tool",
        "counted",
        "--mcp-engine",
        engine,
        "--json-file",
        str(tmp_path / "r_locust"),
        "--csv-full-history",
    )
    counts = all_counts(run, html)
    assert "json" in counts and "console" not in counts  # --json-file: JSON instead of the console table
    csv = assert_agree(run, html, countfile)
    # the interval log follows the requests as they complete: on the native engine too, no second
    # holds what the one before it completed (its drains run before each interval closes). Each
    # interval holds what the server answered in the same second of wall-clock time, the rate however
    # the machine's other work moves it; the slack is the calls in flight across its two edges.
    text = Path(f"{run.prefix}_histograms.hlog").read_text()
    tag = tag_of("mcp-http", "tools/call:counted")
    intervals = [(start, length, h.total_count) for t, start, length, _max, h in read_log(text.splitlines()) if t == tag and length >= 0.5]
    answered = answered_between(countfile, [(start, start + length) for start, length, _n in intervals])
    logged = [n for _start, _length, n in intervals]
    assert len(intervals) >= 3 and sum(logged) > 1000, (logged, answered)
    assert all(abs(n - a) <= 0.15 * a + 50 for n, a in zip(logged, answered, strict=True)), (logged, answered)
    assert csv[("mcp-http", "DELETE")] == 8  # the users' on_stop requests are in the CSV too
    # the last history row of each name holds the final count
    import csv as csvmod

    with open(f"{run.prefix}_stats_history.csv", newline="") as fh:
        last = {(r["Type"], r["Name"]): int(r["Total Request Count"]) for r in csvmod.DictReader(fh) if r["Name"] != "Aggregated"}
    assert last == csv
    text = Path(f"{run.prefix}_histograms.hlog").read_text()
    assert text.startswith("#[Histogram log format version 1.3]") and "Tag=mcp-http:tools/call:counted," in text
    # the interval log's intervals add up to the run's histograms, key by key
    per_tag: dict[str, int] = {}
    for tag, _start, _length, _max, h in read_log(text.splitlines()):
        per_tag[tag] = per_tag.get(tag, 0) + h.total_count
    hist = run.histograms()
    expected = {tag_of(h["type"], h["name"]): h["n"] for h in hist["histograms"]}
    expected.update({tag_of(h["type"], h["name"], failed=True): h["n"] for h in hist["failed_histograms"]})
    assert per_tag == expected


@needs_native
def test_reset_stats_restarts_every_output_together(tmp_path: Path, counting_server) -> None:
    url, countfile = counting_server("mcpfast")
    run, html = locust(
        tmp_path,
        "-f",
        TOOLS_CALL,
        "-u",
        "4",
        "-r",
        "2",
        "-t",
        "4s",
        "--reset-stats",
        "--host",
        url,
        "--mcp-tool",
        "counted",
        "--mcp-engine",
        "native",
    )
    counts = all_counts(run, html)
    for source, got in counts.items():
        assert got == counts["csv"], (source, got, counts["csv"])
    calls = counts["csv"][("mcp-http", "tools/call:counted")]
    assert 0 < calls < countfile.stat().st_size  # the calls of the ramp-up were reset away


@pytest.mark.parametrize("engine", ENGINES)
def test_without_csv_nothing_is_written_into_the_directory(tmp_path: Path, counting_server, engine: str) -> None:
    url, _countfile = counting_server("mcpfast")
    work = tmp_path / "cwd"
    work.mkdir()
    run, _ = locust(
        work, "-f", TOOLS_CALL, "-u", "2", "-r", "2", "-t", "2s", "--host", url, "--mcp-tool", "counted", "--mcp-engine", engine, csv=False
    )
    assert list(work.iterdir()) == []
    assert "mcpfast latency percentiles" in run.output and "not written" in run.output


@needs_native
def test_native_engine_against_the_official_sdk_server(tmp_path: Path, counting_server) -> None:
    url, countfile = counting_server("sdk")
    run, html = locust(
        tmp_path, "-f", TOOLS_CALL, "-u", "4", "-r", "4", "-t", "3s", "--host", url, "--mcp-tool", "counted", "--mcp-engine", "native"
    )
    assert_agree(run, html, countfile)


@needs_native
def test_native_engine_over_stdio(tmp_path: Path) -> None:
    countfile = tmp_path / "count-stdio"
    countfile.write_bytes(b"")
    # long enough for the three server processes to start and call (a fixed 3 s made none at load 8)
    start = stdio_start_seconds(shlex.split(stdio_counting_command(tmp_path / "count-probe")), env=child_env())
    run, html = locust(
        tmp_path,
        "-f",
        TOOLS_CALL,
        "-u",
        "3",
        "-r",
        "3",
        "-t",
        f"{min(max(3.0, 3 * start + 1), 15.0):.0f}s",
        "--mcp-tool",
        "counted",
        "--mcp-command",
        stdio_counting_command(countfile),
        "--mcp-engine",
        "native",
        "--mcp-stdio-inflight",
        "4",
    )
    assert_agree(run, html, countfile, rtype="mcp-stdio")


@needs_native
def test_native_engine_with_two_processes(tmp_path: Path, counting_server) -> None:
    url, countfile = counting_server("mcpfast")
    run, html = locust(
        tmp_path,
        "-f",
        TOOLS_CALL,
        "--processes",
        "2",
        *locust_master_args(),  # not the default 5557 another suite's master may hold
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "3s",
        "--host",
        url,
        "--mcp-tool",
        "counted",
        "--mcp-engine",
        "native",
    )
    assert_agree(run, html, countfile)
    hist = run.histograms()
    assert hist["runner"] == "master" and hist["complete"] and len(hist["workers"]) == 2


@needs_native
def test_native_engine_master_and_two_workers(tmp_path: Path, counting_server) -> None:
    url, countfile = counting_server("mcpfast")
    port = free_port()
    worker_cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        TOOLS_CALL,
        "--worker",
        "--master-host",
        "127.0.0.1",
        "--master-port",
        str(port),
        "--mcp-engine",
        "native",
    ]
    workers = [
        subprocess.Popen(worker_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=child_env(), cwd=tmp_path) for _ in range(2)
    ]
    try:
        run, html = locust(
            tmp_path,
            "-f",
            TOOLS_CALL,
            "--master",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            str(port),
            "--expect-workers",
            "2",
            "-u",
            "4",
            "-r",
            "4",
            "-t",
            "3s",
            "--host",
            url,
            "--mcp-tool",
            "counted",
            "--mcp-engine",
            "native",
        )
    finally:
        for w in workers:
            try:
                w.wait(timeout=15)
            except subprocess.TimeoutExpired:
                w.kill()
    assert_agree(run, html, countfile)
    assert len(run.histograms()["workers"]) == 2


SHAPE = '''
import sys
sys.path.insert(0, {loadtests!r})
from locust import LoadTestShape
from tools_call import ToolsCallUser  # noqa: F401 - the family, on the engine from --mcp-engine


class Steps(LoadTestShape):
    """2 users, then 5, then 1, then stop."""

    def tick(self):
        t = self.get_run_time()
        for end, users in ((1.0, 2), (2.0, 5), (3.0, 1)):
            if t < end:
                return users, 50
        return None
'''


@needs_native
def test_native_engine_follows_a_load_test_shape(tmp_path: Path, counting_server) -> None:
    url, countfile = counting_server("mcpfast")
    shape = tmp_path / "shape.py"
    shape.write_text(SHAPE.format(loadtests=LOADTESTS))
    run, html = locust(tmp_path, "-f", str(shape), "--host", url, "--mcp-tool", "counted", "--mcp-engine", "native")
    csv = assert_agree(run, html, countfile)
    # every session the shape opened got its handshake: 5 at the peak
    assert csv[("mcp-http", "initialize")] >= 5


FAMILY_NAMES_HTTP = {
    "initialize",
    "notifications/initialized",
    "tools/call:echo (first)",
    "DELETE",
    "tools/call:echo",
    "tools/list",
    "tools/call:stream",
    "sse:first-event",
    "sse:gap",
    "progress:first-event",
    "progress:gap",
    "GET:open",  # sse_streaming: the session's standalone GET stream, held beside its calls
}


@needs_native
@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_every_family_on_the_native_engine_names_rows_like_the_python_users(tmp_path: Path, counting_server, version: str) -> None:
    url, _countfile = counting_server("mcpfast")
    run, html = locust(
        tmp_path,
        "-f",
        LOADTESTS,
        "-u",
        "5",
        "-r",
        "5",
        "-t",
        "4s",
        "--host",
        url,
        "--mcp-engine",
        "native",
        "--mcp-protocol-version",
        version,
    )
    counts = all_counts(run, html)
    for source, got in counts.items():
        assert got == counts["csv"], (source, got, counts["csv"])
    assert not run.failures(), (run.failures(), run.errors())
    names = {name for (_t, name) in counts["csv"]}
    if version == "2026-07-28":  # stateless: server/discover instead of the handshake, no DELETE
        expected = (FAMILY_NAMES_HTTP - {"initialize", "notifications/initialized", "DELETE", "GET:open"}) | {
            "server/discover",
            "subscriptions/listen:ack",  # sse_streaming: the held listen
        }
    else:
        expected = FAMILY_NAMES_HTTP
    assert expected <= names, (expected - names, names)


@needs_native
def test_native_session_churn_counters_match_the_rows(tmp_path: Path, counting_server) -> None:
    import json

    # churn abandons half its sessions on purpose: at the native engine's rate a 3 s run opens
    # more than the default cap of 10,000, so the server gets a cap it will not reach
    url, _countfile = counting_server("mcpfast", "--max-sessions", "1000000")
    run, html = locust(
        tmp_path,
        "-f",
        str(Path(LOADTESTS) / "session_churn.py"),
        "--processes",
        "2",
        *locust_master_args(),
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "3s",
        "--host",
        url,
        "--mcp-engine",
        "native",
        "--mcp-churn-delete-share",
        "0.5",
    )
    counts = all_counts(run, html)
    assert counts["csv"] == counts["console"] == counts["histograms"] == counts["html"]
    assert not run.failures(), (run.failures(), run.errors())
    churn = json.loads((tmp_path / "r_churn.json").read_text())
    assert churn["workers"] == 2 and churn["complete"], churn
    assert churn["sessions_opened"] == counts["csv"][("mcp-http", "tools/call:echo (first)")] > 0
    assert churn["sessions_deleted"] == counts["csv"][("mcp-http", "DELETE")] > 0
    assert churn["sessions_deleted"] + churn["sessions_abandoned"] == churn["sessions_opened"]
    assert 0.3 <= churn["delete_share"] <= 0.7, churn


@needs_native
def test_a_config_the_engine_refuses_fails_the_run_with_its_reason(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "locust",
        *BASE,
        "-f",
        TOOLS_CALL,
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "2s",
        "--host",
        "http://127.0.0.1:9/mcp",
        "--mcp-engine",
        "native",
        "--mcp-protocol-version",
        "auto",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=child_env(), cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    out = proc.stdout + proc.stderr
    assert "mcpfast native engine (tools_call)" in out and "protocol_version" in out, out[-3000:]


@needs_native
def test_native_open_model_keeps_service_time_and_send_lag(tmp_path: Path, counting_server) -> None:
    """``--mcp-rate`` on the native engine: the pacer block counts the engine's arrivals (one send
    lag each), and ``service_histograms`` holds one service time (actual send to end) per call."""
    url, countfile = counting_server("mcpfast")
    run, html = locust(
        tmp_path,
        "-f",
        TOOLS_CALL,
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "3s",
        "--host",
        url,
        "--mcp-tool",
        "counted",
        "--mcp-engine",
        "native",
        "--mcp-rate",
        "200",
    )
    csv = assert_agree(run, html, countfile)
    calls = csv[("mcp-http", "tools/call:counted")]
    hist = run.histograms()
    pacer = hist["pacer"]
    assert hist["latency_origin"].startswith("intended send time")
    # every call of the open model is one arrival: sent, with its send lag recorded
    assert pacer["sent"] == calls == pacer["lag"]["n"], (pacer["sent"], calls, pacer["lag"]["n"])
    assert pacer["late"] >= 0 and pacer["dropped"] >= 0
    service = {(h["type"], h["name"]): h for h in hist["service_histograms"]}
    svc = service[("mcp-http", "tools/call:counted")]
    assert svc["n"] == calls
    ok = {(h["type"], h["name"]): h for h in hist["histograms"]}[("mcp-http", "tools/call:counted")]
    # the service time cannot exceed the latency from the intended send time
    assert svc["summary"]["max"] <= ok["summary"]["max"]
    # the rate bounds the calls (3 s at 200/s, plus the stop's grace)
    assert 0 < calls <= 200 * 3 + 50
