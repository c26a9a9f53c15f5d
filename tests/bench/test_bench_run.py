"""``mcpfast bench --quick`` end to end over stdio (shortened to 3 s per family with ``--duration``:
about 20 s), then ``report`` and ``compare`` on
its output; a short HTTP run when the installed CLI serves HTTP; the non-zero exit on failures.

Every bench runs as a child process (``python -m mcpfast``), which itself runs one
``locust`` child per family: Locust's monkey-patching never reaches pytest.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from results import hdrh_log

from mcpfast.locust import intervals as iv
from mcpfast.results import files, plots

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = ("handshake", "tools_call", "sse_streaming", "session_churn")
PNG = b"\x89PNG\r\n\x1a\n"
QUICK_TEST_DURATION = 3.0

pytestmark = pytest.mark.slow
ENGINE_ARGS = tuple(os.environ.get("MCPFAST_TEST_BENCH_ENGINE", "") and ("--engine", os.environ["MCPFAST_TEST_BENCH_ENGINE"]))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _cli(*args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpfast", *args],
        capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT,
    )  # fmt: skip


def _is_png(path: Path) -> bool:
    data = path.read_bytes()
    return len(data) > 1000 and data.startswith(PNG)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]]:
    out = tmp_path_factory.mktemp("bench") / "quick"
    # --duration overrides --quick's 8 s per family (the rest of --quick stays): the same checks, a shorter run
    proc = _cli(
        "bench", "--quick", "--duration", str(QUICK_TEST_DURATION), "--transport", "stdio", "--out", str(out), *ENGINE_ARGS, timeout=170
    )
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    yield out, proc, summary


@pytest.mark.timeout(200)
def test_quick_bench_succeeds_and_writes_the_summary(quick_run: tuple[Path, Any, dict[str, Any]]) -> None:
    _out, proc, summary = quick_run
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert summary["ok"] is True and summary["problems"] == []
    assert summary["wall_time_s"] < 120
    cfg = summary["config"]
    assert (cfg["quick"], cfg["users"], cfg["duration_s"], cfg["transports_run"]) == (True, 4, QUICK_TEST_DURATION, ["stdio"])
    m = summary["machine"]
    assert m["nproc"] >= 1 and m["python"] and m["mcpfast_version"] and m["mcpfast_core"] in ("rust", "python")
    assert "bench" in summary["command_line"] and "--quick" in summary["command_line"]
    assert [(f["family"], f["transport"], f["status"]) for f in summary["families"]] == [(f, "stdio", "ok") for f in FAMILIES]
    # the table is printed; the progress lines go to stderr
    assert "p99.9 ms" in proc.stdout and "OK: every family ran" in proc.stdout
    for family in FAMILIES:
        assert f"{family}/stdio" in proc.stderr and "done" in proc.stderr
    # the generator's CPU per family: the Locust process over the test, against its cores
    assert "gen cpu" in proc.stdout
    for fam in summary["families"]:
        gen = fam["generator"]
        assert gen["processes"] == 1 and gen["cores"] >= 1 and gen["cpu_s"] > 0, gen
        assert 0 < gen["cpu_share"] < 1.5 and gen["bound"] == (gen["cpu_share"] > 0.9), gen
        assert (gen["note"] == "generator-bound: this figure is a floor") == gen["bound"]
        assert fam["engine"] == cfg["engine"]


@pytest.mark.timeout(200)
def test_quick_bench_numbers_are_non_zero_and_consistent(quick_run: tuple[Path, Any, dict[str, Any]]) -> None:
    out, _proc, summary = quick_run
    rows = summary["rows"]
    for family in FAMILIES:
        fam_rows = [r for r in rows if r["family"] == family]
        assert fam_rows, family
        assert {r["type"] for r in fam_rows} == {"mcp-stdio"}
        assert "initialize" in {r["name"] for r in fam_rows}
        # Locust's final count of each name equals the samples in the µs histograms
        locust = {e["name"]: e for e in json.loads((out / f"{family}-stdio_locust.json").read_text())}
        hist = json.loads((out / f"{family}-stdio_histograms.json").read_text())
        hist_counts: dict[str, int] = {}
        for e in hist["histograms"] + hist["failed_histograms"]:
            hist_counts[e["name"]] = hist_counts.get(e["name"], 0) + e["n"]
        assert set(locust) == set(hist_counts) == {r["name"] for r in fam_rows}
        for r in fam_rows:
            assert r["count"] > 0 and r["failures"] == 0 and r["histogram_failures"] == 0, r
            assert r["count"] == r["locust_count"] == locust[r["name"]]["num_requests"] == hist_counts[r["name"]], r
            assert r["rps"] > 0
            assert 0 < r["p50_us"] <= r["p90_us"] <= r["p99_us"] <= r["p99.9_us"] <= r["max_us"], r
    by_name = {(r["family"], r["name"]): r for r in rows}
    assert by_name[("tools_call", "tools/call:echo")]["count"] > 1000
    assert by_name[("sse_streaming", "progress:first-event")]["count"] == by_name[("sse_streaming", "tools/call:stream")]["count"]
    churn = next(f for f in summary["families"] if f["family"] == "session_churn")
    assert churn["churn"]["sessions_opened"] > 0 and churn["memory_samples"] > 0


@pytest.mark.timeout(200)
def test_quick_bench_keeps_locust_files_and_draws_every_plot(quick_run: tuple[Path, Any, dict[str, Any]]) -> None:
    out, _proc, summary = quick_run
    for family in FAMILIES:
        for suffix in ("_stats.csv", "_stats_history.csv", "_failures.csv", ".html", "_histograms.json", "_locust.json"):
            path = out / f"{family}-stdio{suffix}"
            assert path.exists() and path.stat().st_size > 0, path
        # The log goes to the ignored logs/ folder, not beside the results.
        assert (out / "logs" / f"{family}-stdio.log").stat().st_size > 0
        assert not (out / f"{family}-stdio.log").exists()
        assert not (out / f"{family}-stdio_report.html").exists()  # one page for the bench: report.html
    assert (out / "session_churn-stdio_memory.csv").stat().st_size > 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.index("OK: 4 family runs") < page.index("<table") and page.count("<svg") >= 3 * len(FAMILIES)
    expected = {f"{kind}-{family}-stdio.png" for kind in ("latency", "timeline") for family in FAMILIES}
    expected |= {"handshake-phases.png", "sse.png", "churn-memory.png"}
    assert set(summary["plots"]) == expected
    for name in expected:
        assert _is_png(out / name), name


def _nearest_rank(h: Any, p: float) -> int:
    """The ceil(p/100 * n)-th smallest value of an hdrh histogram, from its own decoded counts.
    HdrHistogram's get_value_at_percentile rounds the rank to the nearest instead, so on a few
    hundred samples it can name the sample next to the one a nearest-rank percentile means."""
    rank = max(1, math.ceil(p / 100.0 * h.get_total_count() - 1e-9))
    for item in h.get_recorded_iterator():
        if item.total_count_to_this_value >= rank:
            return int(h.get_highest_equivalent_value(item.value_iterated_to))
    raise AssertionError("rank beyond the histogram's count")


@pytest.mark.timeout(200)
def test_quick_bench_timelines_draw_the_interval_histograms(quick_run: tuple[Path, Any, dict[str, Any]]) -> None:
    """Read back from each timeline's figure (not its pixels): every name with requests has a p99
    line and a rate above 0 and never a p99 of 0; tools/call:echo's p99 line is, interval by
    interval, the p99 HdrHistogram's own decoder reads in the .hlog."""
    out, proc, summary = quick_run
    assert summary.get("ok"), (proc.stdout + proc.stderr)[-4000:]  # a run that failed is that test's finding, said here too
    hdrh = pytest.importorskip("hdrh.histogram")
    for family in FAMILIES:
        prefix = out / f"{family}-stdio"
        log = files.interval_log(prefix)
        assert log is not None, family
        data = json.loads(Path(f"{prefix}_histograms.json").read_text())
        series = iv.series(log, files.histograms(prefix), data["start_time"])
        fig = plots.timeline_figure(series, family)
        rates, p99 = ({line.get_label(): line for line in ax.get_lines()} for ax in fig.axes)
        for row in (r for r in summary["rows"] if r["family"] == family and r["ok"]):
            name = row["name"]
            assert name in p99 and name in rates, (family, name, sorted(p99))
            assert min(p99[name].get_ydata()) > 0 and max(rates[name].get_ydata()) > 0, (family, name)
        if family != "tools_call":
            continue
        raw: list[tuple[float, float, Any]] = []
        for s, n, h in hdrh_log.histograms(f"{prefix}_histograms.hlog")["mcp-stdio:tools/call:echo"]:
            # a short interval (the stop's, or a tick that came late on a busy machine) joins the one it follows
            if raw and n < iv.MIN_LENGTH and abs(raw[-1][0] + raw[-1][1] - s) < 0.05:
                start, _length, joined = raw[-1]
                joined.add(h)
                raw[-1] = (start, s + n - start, joined)
            else:
                raw.append((s, n, h))
        line = p99["tools/call:echo"]
        assert list(line.get_xdata()) == pytest.approx([s + n - data["start_time"] for s, n, _ in raw], abs=1e-3)
        # within the encoding's resolution (a slot is 1/1024 of its value wide above 2 ms)
        assert list(line.get_ydata()) == [pytest.approx(_nearest_rank(h, 99), rel=1 / 1024, abs=1) for _, _, h in raw]
        assert raw and isinstance(raw[0][2], hdrh.HdrHistogram)


@pytest.mark.timeout(200)
def test_report_and_compare_on_the_quick_run(quick_run: tuple[Path, Any, dict[str, Any]], tmp_path: Path) -> None:
    out, _proc, summary = quick_run
    (out / "sse.png").unlink()
    proc = _cli("report", str(out), timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _is_png(out / "sse.png") and f"{len(summary['plots'])} plots written" in proc.stdout
    proc = _cli("compare", str(out), str(out), "--out", str(tmp_path), timeout=90)
    # 3 s a family: two or three windows a side, which can never reach 99%: nothing judged, exit 2
    assert proc.returncode == 2, proc.stdout + proc.stderr[-3000:]
    assert "verdict: nothing could be judged" in proc.stdout and "the change is unknown, not zero (exit 2)" in proc.stdout
    proc = _cli("compare", str(out), str(out), "--out", str(tmp_path), "--confidence", "0.5", timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert _is_png(tmp_path / "compare-quick-vs-quick.png")
    saved = json.loads((tmp_path / "compare-quick-vs-quick.json").read_text())
    assert saved["exit_code"] == 0 and len(saved["judgements"]) == 3 * len([r for r in summary["rows"] if r["ok"]])
    assert {j["verdict"] for j in saved["judgements"]} == {"within noise", "not judged"}  # a run against itself
    assert all(j["change"] == 0 for j in saved["judgements"])
    assert "verdict: no regression beyond noise above +10%" in proc.stdout


@pytest.mark.timeout(120)
def test_bench_exits_non_zero_and_names_the_failing_family(tmp_path: Path) -> None:
    dead = f"{sys.executable} -c 'import sys; sys.exit(3)'"  # a stdio "server" that never answers
    proc = _cli("bench", "--target-command", dead, "--family", "tools_call", "--duration", "2", "--users", "1",
                "--out", str(tmp_path / "fail"), "--no-plots", timeout=90)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED" in proc.stdout and "tools_call/stdio" in proc.stdout and "failures" in proc.stdout
    summary = json.loads((tmp_path / "fail" / "summary.json").read_text())
    assert summary["ok"] is False and summary["families"][0]["status"] == "failed"


def _http_available() -> bool:
    from mcpfast.bench.procs import reference_server

    try:
        with reference_server(sys.executable, Path(os.devnull)).start(timeout=15):
            return True
    except RuntimeError:
        return False


@pytest.mark.timeout(150)
def test_http_bench_measures_server_memory_per_session(tmp_path: Path) -> None:
    if not _http_available():
        pytest.skip("`mcpfast serve --transport http` is not available yet")
    out = tmp_path / "http"
    proc = _cli("bench", "--transport", "http", "--family", "tools_call", "--family", "session_churn",
                "--duration", "4", "--users", "2", "--out", str(out), timeout=120)  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["transports_run"] == ["http"] and summary["config"]["http_target"] == "embedded"
    churn = next(f for f in summary["families"] if f["family"] == "session_churn")
    pid = churn["server_pid"]
    assert pid and churn["churn"]["server_pid"] == pid and churn["churn"]["sessions_abandoned"] > 0
    assert churn["churn"]["server_rss_kib_start"] and churn["memory_samples"] > 4
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()  # server stopped
    names = {r["name"] for r in summary["rows"] if r["family"] == "session_churn"}
    assert {"initialize", "DELETE"} <= names and {r["type"] for r in summary["rows"]} == {"mcp-http"}
    assert _is_png(out / "churn-memory.png")


@pytest.mark.timeout(150)
def test_bench_thresholds_pass_and_fail(tmp_path: Path) -> None:
    """``--threshold`` on each family's histograms: one passing and one failing gate in one run,
    both in summary.json with their measured values; the failing one makes the exit code 1."""
    proc = _cli("bench", "--transport", "stdio", "--family", "tools_call", "--duration", "5", "--users", "2",
                "--out", str(tmp_path / "gate"), "--no-plots", "--threshold", "fail_ratio<0.01",
                "--threshold", "tools/call:echo p99<1us", *ENGINE_ARGS, timeout=120)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = json.loads((tmp_path / "gate" / "summary.json").read_text())
    gates = {g["threshold"]: g for g in summary["thresholds"]}
    assert gates["fail_ratio<0.01"]["passed"] and gates["fail_ratio<0.01"]["run"] == "tools_call/stdio"
    assert not gates["tools/call:echo p99<1us"]["passed"] and gates["tools/call:echo p99<1us"]["measured"] >= 1
    assert "FAIL  tools/call:echo p99<1us [tools_call/stdio]" in proc.stdout
    assert summary["families"][0]["status"] == "ok"  # the family itself ran clean: only the gate failed
