"""``mcpfast bench`` pieces on small synthetic data: summary rows, table, plots, report (fast;
nothing is spawned). ``mcpfast compare`` has its tests in tests/results."""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from results import hdrh_log

from mcpfast.bench import procs, run
from mcpfast.bench.cli import COMMANDS, add_subcommands, run_subcommand
from mcpfast.locust import intervals as iv
from mcpfast.locust.histogram import Histogram
from mcpfast.locust.hlog import IntervalLog, tag_of
from mcpfast.results import files, plots, report
from mcpfast.results.noise import least_squares

PNG = b"\x89PNG\r\n\x1a\n"


def _hist(values: list[int]) -> Histogram:
    h = Histogram()
    for v in values:
        h.record(v)
    return h


def _entry(kind: str, name: str, h: Histogram) -> dict[str, Any]:
    return {"type": kind, "name": name, "summary": {"count": h.total_count}, **h.to_dict()}


def _write_family(
    directory: Path,
    family: str,
    transport: str,
    names: dict[str, list[int]],
    failed: dict[str, list[int]] | None = None,
    duration: float = 10.0,
    start: float = 1_000_000.0,
    hlog: bool = True,
) -> None:
    """The files one locust run leaves: histograms and their interval log (each name's values
    spread over the seconds in turn), Locust's final JSON, history, memory."""
    kind = f"mcp-{transport}"
    failed = failed or {}
    prefix = directory / f"{family}-{transport}"
    if hlog:
        log = IntervalLog()
        for n, values in names.items():
            for second in range(int(duration)):
                log.add(tag_of(kind, n), start + second, start + second + 1, _hist(values[second :: int(duration)]))
        log.start_time = start
        log.write(f"{prefix}_histograms.hlog")
    hist = {
        "format": "mcpfast-histograms",
        "format_version": 1,
        "start_time": start,
        "duration_s": duration,
        "latency_origin": "actual send time (closed model)",
        "complete": True,
        "histograms": [_entry(kind, n, _hist(v)) for n, v in names.items()],
        "failed_histograms": [_entry(kind, n, _hist(v)) for n, v in failed.items()],
    }
    (directory / f"{prefix.name}_histograms.json").write_text(json.dumps(hist))
    locust = [
        {"name": n, "method": kind, "num_requests": len(v) + len(failed.get(n, [])), "num_failures": len(failed.get(n, []))}
        for n, v in names.items()
    ]
    (directory / f"{prefix.name}_locust.json").write_text(json.dumps(locust))
    cols = ["Timestamp", "User Count", "Type", "Name", "Requests/s", "Failures/s", "99%", "Total Request Count"]
    with open(f"{prefix}_stats_history.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        w.writerow([int(start), 0, "", "Aggregated", 0, 0, "N/A", 0])
        for i in range(1, int(duration) + 1):
            total = 0
            for n, v in names.items():
                count = len(v) * i // int(duration)
                total += count
                w.writerow([int(start) + i, 2, kind, n, 1.0, 0, 3, count])
            w.writerow([int(start) + i, 2, "", "Aggregated", 1.0, 0, 3, total])
    with open(f"{prefix}_memory.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["timestamp", "rss_kib", "processes"])
        for i in range(4 * int(duration)):
            t = start + i / 4
            w.writerow(
                [f"{t:.3f}", 40_000 + 6 * int(len(names.get("initialize", [])) * (i / 4) / duration), 1 if transport == "http" else 2]
            )


def _summary(directory: Path, families: list[tuple[str, str]]) -> dict[str, Any]:
    fams, rows = [], []
    for family, transport in families:
        res = run.family_result(directory / f"{family}-{transport}")
        fams.append(
            {"family": family, "transport": transport, "status": "ok", "problems": [], "requests": res["requests"],
             "failures": res["failures"], "prefix": f"{family}-{transport}", "churn": None}
        )  # fmt: skip
        rows += [{"family": family, "transport": transport, **r} for r in res["rows"]]
    return {
        "format": "mcpfast-bench",
        "format_version": 1,
        "run": directory.name,
        "config": {"users": 2, "duration_s": 10.0, "model": "closed", "transports_run": sorted({t for _, t in families})},
        "machine": {"nproc": 2},
        "families": fams,
        "rows": rows,
        "notes": [],
        "problems": [],
        "ok": True,
    }


@pytest.fixture
def synthetic_run(tmp_path: Path) -> Path:
    rng = random.Random(7)
    d = tmp_path / "synthetic"
    d.mkdir()
    hs = {
        "initialize": [rng.randint(500, 3000) for _ in range(300)],
        "notifications/initialized": [rng.randint(200, 900) for _ in range(300)],
        "tools/call:echo (first)": [rng.randint(300, 1500) for _ in range(300)],
        "DELETE": [rng.randint(200, 800) for _ in range(300)],
    }
    _write_family(d, "handshake", "http", hs)
    _write_family(d, "tools_call", "http", {"tools/call:echo": [rng.randint(100, 5000) for _ in range(2000)]})
    _write_family(
        d,
        "sse_streaming",
        "http",
        {
            "sse:first-event": [rng.randint(400, 2000) for _ in range(200)],
            "sse:gap": [rng.randint(1, 60) for _ in range(1800)],
            "tools/call:stream": [rng.randint(500, 3000) for _ in range(200)],
        },
    )
    churn = {"initialize": [rng.randint(500, 3000) for _ in range(1000)], "DELETE": [rng.randint(200, 800) for _ in range(500)]}
    _write_family(d, "session_churn", "http", churn)
    summary = _summary(d, [("handshake", "http"), ("tools_call", "http"), ("sse_streaming", "http"), ("session_churn", "http")])
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def _is_png(path: Path) -> bool:
    data = path.read_bytes()
    return len(data) > 1000 and data.startswith(PNG)


# -- numbers ----------------------------------------------------------------------------------


def test_family_result_counts_and_percentiles_come_from_the_histograms(tmp_path: Path) -> None:
    _write_family(tmp_path, "tools_call", "stdio", {"tools/call:echo": list(range(1, 1001))}, failed={"tools/call:echo": [5, 7]})
    res = run.family_result(tmp_path / "tools_call-stdio")
    (row,) = res["rows"]
    assert row["name"] == "tools/call:echo" and row["type"] == "mcp-stdio"
    assert row["count"] == 1002 == row["locust_count"]
    assert row["ok"] == 1000 and row["failures"] == 2 == row["histogram_failures"]
    assert row["rps"] == pytest.approx(100.2)
    assert 500 <= row["p50_us"] <= 501 and 990 <= row["p99_us"] <= 991
    assert row["p99.9_us"] >= row["p99_us"] >= row["p90_us"] >= row["p50_us"]
    assert row["max_us"] == 1000 and row["min_us"] == 1
    assert res["requests"] == 1002 and res["failures"] == 2


def test_family_result_without_files_is_empty(tmp_path: Path) -> None:
    res = run.family_result(tmp_path / "missing")
    assert res["rows"] == [] and res["requests"] == 0 and not res["have_histograms"]


def test_table_and_summary_text(synthetic_run: Path) -> None:
    summary = files.load_summary(synthetic_run)
    table = report.render_table(summary)
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["family", "transport", "request"]
    assert any(line.split()[:3] == ["tools_call", "http", "tools/call:echo"] for line in lines)
    echo = next(line for line in lines if line.split()[:3] == ["tools_call", "http", "tools/call:echo"])
    assert echo.split()[3] == "2000"
    text = report.format_summary(summary)
    assert "OK: every family ran" in text
    summary["problems"] = ["tools_call/http: no requests"]
    assert "FAILED" in report.format_summary(summary) and "no requests" in report.format_summary(summary)


def test_main_row_is_the_characteristic_request() -> None:
    rows = [{"name": "tools/call:echo", "count": 10}, {"name": "initialize", "count": 2}, {"name": "sse:gap", "count": 99}]
    assert run.main_row("handshake", rows)["name"] == "initialize"
    assert run.main_row("sse_streaming", rows)["name"] == "tools/call:echo"
    assert run.main_row("other", [{"name": "x", "count": 1}, {"name": "y", "count": 5}])["name"] == "y"


def test_timeline_draws_the_interval_histograms_and_no_zero(synthetic_run: Path) -> None:
    """The timeline's lines are the interval log's figures (read back from the figure, not its
    pixels): a name's p99 per interval is its interval histogram's p99, never 0 for a name
    with requests; its rate is its requests over the interval."""
    prefix = synthetic_run / "handshake-http"
    log = files.interval_log(prefix)
    assert log is not None
    series = iv.series(log, files.histograms(prefix), 1_000_000.0)
    fig = plots.timeline_figure(series, "t")
    rates, p99 = ({line.get_label(): line for line in ax.get_lines()} for ax in fig.axes)
    expected = {
        tag: [(start + length - 1_000_000.0, p99, count / length) for start, length, count, p99 in rows]
        for tag, rows in hdrh_log.intervals(f"{prefix}_histograms.hlog").items()
    }
    for name in ("initialize", "notifications/initialized", "tools/call:echo (first)", "DELETE"):
        want = expected[tag_of("mcp-http", name)]
        assert list(p99[name].get_xdata()) == pytest.approx([t for t, _, _ in want])
        assert list(p99[name].get_ydata()) == [v for _, v, _ in want]
        assert all(v > 0 for v in p99[name].get_ydata())
        assert list(rates[name].get_ydata()) == pytest.approx([r for _, _, r in want])
    assert min(p99["Aggregated"].get_ydata()) > 0 and len(p99["Aggregated"].get_xdata()) == 10
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert labels and all(("µs" in t or "ms" in t or " s" in t) and "10^" not in t for t in labels if t), labels


def test_timeline_of_a_run_without_an_interval_log_says_so(tmp_path: Path) -> None:
    fig = plots.timeline_figure(None, "old run")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert all(not ax.get_lines() for ax in fig.axes)  # no line drawn as if it were data
    assert texts == ["no interval log (.hlog): a run of an older mcpfast"] * 2
    assert _is_png(plots.timeline_plot(None, tmp_path / "t.png", "old run"))


def test_percentile_curve_is_monotonic_and_ends_at_the_max() -> None:
    h = _hist(list(range(1, 10_001)))
    xs, ys = plots.percentile_curve(h)
    assert xs[0] == 1.0 and ys[-1] == pytest.approx(10_000.0)  # µs
    assert all(b >= a for a, b in itertools.pairwise(xs))
    assert all(b >= a for a, b in itertools.pairwise(ys))
    assert plots.percentile_curve(Histogram()) == ([], [])


def test_handshake_phases_are_in_protocol_order() -> None:
    rows = [{"name": n, "count": 1} for n in ("DELETE", "tools/call:echo (first)", "initialize", "notifications/initialized", "x")]
    assert [name for name, _ in report.handshake_phases(rows)] == [
        "initialize",
        "notifications/initialized",
        "tools/call:echo (first)",
        "DELETE",
    ]


def test_memory_series_over_http_counts_open_sessions(synthetic_run: Path) -> None:
    fam = {"family": "session_churn", "transport": "http", "prefix": "session_churn-http", "churn": None}
    series = report.memory_series(synthetic_run, fam)
    assert series is not None
    assert len(series["sessions"]) == len(series["rss_kib"]) > 10
    assert series["sessions"][0] == 0 and 450 <= max(series["sessions"]) <= 500  # 1000 initialised - 500 DELETEd by the end
    assert report.memory_series(synthetic_run, {**fam, "prefix": "nothing-here"}) is None


# -- plots ------------------------------------------------------------------------------------


def test_each_plot_function_writes_a_png(tmp_path: Path) -> None:
    h = _hist([random.Random(1).randint(10, 5000) for _ in range(500)])
    made = [
        plots.percentile_plot({"a": h, "b": _hist([5, 6, 7]), "empty": Histogram()}, tmp_path / "p.png", "t"),
        plots.percentile_plot({}, tmp_path / "p0.png", "nothing"),
        plots.timeline_plot({iv.AGGREGATED: [iv.Point(0.0, 1.0, h)], ("t", "x"): [iv.Point(0.0, 1.0, h)]}, tmp_path / "t.png", "t"),
        plots.timeline_plot({}, tmp_path / "t0.png", "empty"),
        plots.handshake_plot(
            {"http": [("initialize", {"p50_us": 100, "p90_us": 200, "p99_us": 900, "count": 3})], "stdio": []}, tmp_path / "h.png", "t"
        ),
        plots.sse_plot({"http": {"first": {"sse:first-event": h}, "gap": {}}}, tmp_path / "s.png", "t"),
        plots.memory_plot({"http": {"sessions": [0, 10, 20], "rss_kib": [1000, 1100, 1200]}, "stdio": {}}, tmp_path / "m.png", "t"),
        plots.compare_plot({"x/http": {"a": (h, h), "b": (None, h)}}, tmp_path / "c.png", "A", "B"),
        plots.compare_plot({}, tmp_path / "c0.png", "A", "B"),
    ]
    for path in made:
        assert _is_png(path), path


def test_memory_fit_is_kib_per_session() -> None:
    fit = least_squares([0, 10, 20], [1000, 1100, 1200])  # the line the memory plot draws
    assert fit is not None and fit[:2] == pytest.approx((1000.0, 10.0))
    assert least_squares([4, 4, 4], [1, 2, 3]) is None


def test_generate_plots_draws_every_plot_of_a_run(synthetic_run: Path) -> None:
    made = report.generate_plots(synthetic_run)
    names = {p.name for p in made}
    for family in ("handshake", "tools_call", "sse_streaming", "session_churn"):
        assert f"latency-{family}-http.png" in names
        assert f"timeline-{family}-http.png" in names
    assert {"handshake-phases.png", "sse.png", "churn-memory.png"} <= names
    for path in made:
        assert _is_png(path), path


def test_load_summary_rejects_other_directories(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        files.load_summary(tmp_path)
    (tmp_path / "summary.json").write_text('{"format": "other"}')
    with pytest.raises(SystemExit):
        files.load_summary(tmp_path)


# -- command line and server probe ---------------------------------------------------------------


def test_subcommands_register_and_dispatch(synthetic_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="mcpfast")
    sub = parser.add_subparsers(dest="command", required=True)
    add_subcommands(sub)
    args = parser.parse_args(["bench", "--quick", "--transport", "stdio", "--family", "handshake", "--out", "x"])
    assert (args.command, args.quick, args.transport, args.family) == ("bench", True, "stdio", ["handshake"])
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--users", "0"])
    assert set(COMMANDS) == {"bench", "capacity", "report", "compare"}
    assert run_subcommand(parser.parse_args(["report", str(synthetic_run)])) == 0
    assert "plots written" in capsys.readouterr().out and (synthetic_run / "report.html").is_file()
    assert run_subcommand(parser.parse_args(["compare", str(synthetic_run), str(synthetic_run)])) == 0
    assert (synthetic_run / "compare-synthetic-vs-synthetic.png").exists()
    assert "verdict: no regression beyond noise" in capsys.readouterr().out
    with pytest.raises(ValueError):
        run_subcommand(argparse.Namespace(command="serve"))


def test_http_server_probe_reports_a_server_that_exits(tmp_path: Path) -> None:
    server = procs.reference_server("/bin/false", tmp_path / "server.log")
    with pytest.raises(RuntimeError, match="exited with code 1"):
        server.start(timeout=5)
    assert server.proc is not None and server.proc.returncode == 1
    assert (tmp_path / "server.log").read_text().startswith("$ /bin/false -m mcpfast serve")


def test_server_process_waits_for_its_port_and_stops(tmp_path: Path) -> None:
    port = procs.free_port()
    argv = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]
    with procs.ServerProcess("http.server", argv, "127.0.0.1", port, log_path=tmp_path / "s.log").start(timeout=20) as server:
        assert procs.port_open("127.0.0.1", port) and server.pid > 0
    assert server.proc is not None and server.proc.poll() is not None
    assert not procs.port_open("127.0.0.1", port)


def test_server_process_that_never_gets_ready_is_stopped() -> None:
    server = procs.ServerProcess("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], "127.0.0.1", procs.free_port())
    with pytest.raises(RuntimeError, match=r"sleeper not ready .* within 0.5 s \(never\)"):
        server.start(timeout=0.5, ready=lambda: "never")
    assert server.proc is not None and server.proc.poll() is not None


def test_progress_lines_without_a_terminal() -> None:
    import io

    stream = io.StringIO()
    p = run.Progress(stream)
    p.update("a/stdio", "starting")
    p.update("a/stdio", "running 1s")  # not a terminal: no repeated lines
    p.update("a/stdio", "done", final=True)
    assert stream.getvalue().splitlines() == ["a/stdio                  starting", "a/stdio                  done"]


def test_memory_series_without_an_interval_log_reads_locust_history(synthetic_run: Path) -> None:
    (synthetic_run / "session_churn-http_histograms.hlog").unlink()  # a run of an older mcpfast
    fam = {"family": "session_churn", "transport": "http", "prefix": "session_churn-http", "churn": None}
    series = report.memory_series(synthetic_run, fam)
    assert series is not None and 450 <= max(series["sessions"]) <= 500


def test_history_starts_every_name_at_the_first_second(synthetic_run: Path) -> None:
    series = files.history(synthetic_run / "tools_call-http")
    assert set(series) == {"Aggregated", "tools/call:echo"}
    # the name appears in Locust's history a second after the aggregate row: its count was 0 before
    assert series["tools/call:echo"][0] == (1_000_000.0, 0.0, None) and series["Aggregated"][0] == (1_000_000.0, 0.0, None)
    assert series["tools/call:echo"][-1] == (1_000_010.0, 2000.0, 3.0)
    assert files.history(synthetic_run / "nothing-here") == {}
