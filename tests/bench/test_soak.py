"""``mcpfast bench --soak``: a short soak end to end (0.3 min in 3 s intervals after a 3 s capacity
run, about 25 s), the slope finder on synthetic series, and the refusals of bad input before any
load (in process: argparse and the checks return at once)."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpfast.bench.procs import free_port
from mcpfast.bench.soak import (
    LATENCY_SLOPE_THRESHOLD,
    RSS_MIN_RISE,
    RSS_SLOPE_THRESHOLD,
    SoakConfig,
    SoakError,
    check_config,
    find_slope,
    run_soak,
    soak_findings,
)
from mcpfast.cli import main as mcpfast_main
from mcpfast.client.probe import METRIC_SESSIONS, parse_metrics
from mcpfast.results.noise import least_squares

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"
MINUTES, INTERVAL, CAPACITY_S, SHARE, USERS = 0.3, 3.0, 3.0, 0.3, 4


# ------------------------------------------------------------------------------- the short soak


@pytest.fixture(scope="module")
def short_soak(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]]:
    out = tmp_path_factory.mktemp("soak") / "run"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    argv = [sys.executable, "-m", "mcpfast", "bench", "--soak", str(MINUTES), "--soak-interval", str(INTERVAL)]
    argv += ["--soak-share", str(SHARE), "--duration", str(CAPACITY_S), "--users", str(USERS), "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env, cwd=ROOT)
    results = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    yield out, proc, results


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_short_soak_intervals_add_up(short_soak: tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    _out, proc, results = short_soak
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert results["ok"] is True and results["problems"] == []
    rows = results["intervals"]
    assert len(rows) == math.ceil(MINUTES * 60 / INTERVAL)
    soak = results["soak"]
    # every request is in exactly one interval: the rows add up to the run's total and to the
    # engines' own cumulative histograms (a count kept apart from the drained windows)
    assert sum(r["requests"] for r in rows) == soak["requests"] == soak["requests_engine_total"] > 0
    assert soak["counts_consistent"] is True and soak["failures"] == 0
    for r in rows:
        assert sum(r["by_name"].values()) == r["requests"], r
        assert r["failures"] == 0 and r["calls"] > 0 and r["churn_cycles"] > 0, r
        assert r["rss_kib"] > 0 and r["rss_max_kib"] >= r["rss_kib"] and r["server_processes"] >= 1, r
        # the server's own gauge: the long-lived sessions at least, never the churned ones piling up
        assert USERS <= r["sessions_open"] <= USERS + 2 and r["sessions_open_max"] <= USERS + 2, r
        assert 0 < r["call_p50_us"] <= r["call_p99_us"], r
    for a, b in itertools.pairwise(rows):
        assert a["end_s"] == pytest.approx(b["start_s"], abs=1e-3)
    assert all(r["length_s"] == pytest.approx(INTERVAL, abs=0.5) for r in rows[:-1])
    # the open model holds its rate: the share of the measured capacity, interval after interval
    cap = results["capacity"]
    assert soak["calls_rate"] == pytest.approx(SHARE * cap["calls_per_s"], rel=1e-3)
    assert soak["churn_cycles_rate"] == pytest.approx(SHARE * cap["churn_cycles_per_s"], rel=1e-3)
    full = rows[:-1]
    sent = sum(r["calls"] + r["dropped"] for r in full)
    assert sent == pytest.approx(soak["calls_rate"] * sum(r["length_s"] for r in full), rel=0.1)
    for r in full:
        # each arrival goes at its time unless the generator fell behind (a busy machine),
        # which the interval reports: then its calls land in the next one
        on_time = r["calls"] == pytest.approx(soak["calls_rate"] * r["length_s"], rel=0.1)
        assert on_time or r["late"] + r["dropped"] > 0, r
    assert results["sessions_source"].startswith("the server's mcpfast_sessions_open gauge")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_short_soak_writes_the_report(short_soak: tuple[Path, subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    out, proc, results = short_soak
    assert [f["series"] for f in results["findings"]] == ["server RSS", "tools/call p50", "tools/call p99"]
    assert all(f["points"] == len(results["intervals"]) - 1 for f in results["findings"])
    assert isinstance(results["machine_was_busy"], bool) and len(results["loadavg_at_start"]) == 3 and len(results["loadavg_at_end"]) == 3
    assert results["command"].startswith("python -m mcpfast bench --soak 0.3")
    md = (out / "results.md").read_text()
    assert results["command"] in md and "machine_was_busy" in md and "## Findings" in md
    assert md.count("\n| ") == len(results["intervals"]) + 2  # header, rule and one line per interval
    # the finding lines, or "no slope found", are printed too
    assert "server RSS:" in proc.stdout
    # (each series' own line says "no slope found (...)" too: the summary line is the whole line)
    assert ("no slope found" in proc.stdout.splitlines()) != any(f["finding"] for f in results["findings"])
    png = (out / "soak.png").read_bytes()
    assert png.startswith(PNG) and len(png) > 10_000 and results["plots"] == ["soak.png"]
    assert not list(out.glob("*.log"))  # logs go to the ignored logs/ folder
    # `mcpfast report` on a soak draws the plot and writes results.md again from results.json
    (out / "soak.png").unlink()
    (out / "results.md").unlink()
    assert mcpfast_main(["report", str(out)]) == 0
    assert (out / "soak.png").read_bytes().startswith(PNG) and (out / "results.md").read_text() == md


# ------------------------------------------------------------------------------- the slope finder


def _rows(rss: list[float], p50: list[float], p99: list[float], interval: float = 60.0) -> list[dict[str, Any]]:
    return [
        {"start_s": i * interval, "end_s": (i + 1) * interval, "rss_kib": r, "call_p50_us": a, "call_p99_us": b}
        for i, (r, a, b) in enumerate(zip(rss, p50, p99, strict=True))
    ]


NOISE = [0.0, 0.6, -0.4, 0.3, -0.7, 0.5, -0.2, 0.1, -0.5, 0.4, -0.3, 0.2, -0.6, 0.7, -0.1, 0.0, 0.3, -0.4, 0.5, -0.2]


def test_flat_series_give_no_finding() -> None:
    rss = [50_000 + 40 * n for n in NOISE]  # ± 30 KiB around 49 MiB: allocator noise
    p50 = [200 + 5 * n for n in NOISE]
    p99 = [900 + 60 * n for n in NOISE]
    findings = soak_findings(_rows(rss, p50, p99))
    assert [f["finding"] for f in findings] == [False, False, False], [f["text"] for f in findings]
    assert all("no slope found" in f["text"] for f in findings)


def test_growing_rss_is_a_finding() -> None:
    # +25 % of the first minute's RSS per hour (about 200 KiB a minute), with the same noise
    rss = [40_000 + 10_000 * (i / 60.0) + 40 * n for i, n in enumerate(NOISE)]
    findings = soak_findings(_rows(rss, [200.0] * 20, [900.0] * 20))
    rss_finding = findings[0]
    assert rss_finding["series"] == "server RSS" and rss_finding["finding"] is True, rss_finding["text"]
    assert rss_finding["relative_per_h"] == pytest.approx(10_000 / rss[0], rel=0.05)
    assert rss_finding["relative_per_h"] >= RSS_SLOPE_THRESHOLD and "SLOPE FOUND" in rss_finding["text"]
    assert [f["finding"] for f in findings[1:]] == [False, False]


def test_growing_latency_is_a_finding() -> None:
    p99 = [900 * (1 + 2.0 * i / 60.0) for i in range(20)]  # +200 % per hour
    findings = soak_findings(_rows([50_000.0] * 20, [200.0] * 20, p99))
    assert [f["finding"] for f in findings] == [False, False, True], [f["text"] for f in findings]
    assert findings[2]["relative_per_h"] >= LATENCY_SLOPE_THRESHOLD


def test_slow_growth_below_the_threshold_is_not_a_finding() -> None:
    # a clean line, but 5 %/h: below the 10 %/h threshold however significant
    rss = [40_000 * (1 + 0.05 * i / 60.0) for i in range(20)]
    f = soak_findings(_rows(rss, [200.0] * 20, [900.0] * 20))[0]
    assert f["finding"] is False and 0.04 < f["relative_per_h"] < 0.06


def test_a_small_climb_in_a_short_run_is_not_extrapolated_into_a_finding() -> None:
    # six 3 s intervals, RSS 10 KiB more each: a clean line, 31 %/h of the RSS when extrapolated
    # to an hour, but 0.1 % over the run (caches and arenas filling): only the rise rule says no
    rss = [38_000.0 + 10 * i for i in range(6)]
    f = soak_findings(_rows(rss, [200.0] * 6, [900.0] * 6, interval=3.0))[0]
    assert f["relative_per_h"] > RSS_SLOPE_THRESHOLD and f["t"] is None  # a perfect line: infinitely significant
    assert f["rise"] < RSS_MIN_RISE and f["finding"] is False
    # 80 KiB a minute for 20 minutes: 12.6 %/h and a 3.8 % rise over the fit, a finding
    steep = [38_000.0 + 80 * i for i in range(20)]
    g = soak_findings(_rows(steep, [200.0] * 20, [900.0] * 20))[0]
    assert g["rise"] >= RSS_MIN_RISE and g["finding"] is True


def test_a_rise_lost_in_its_noise_is_not_a_finding() -> None:
    # the 80 KiB a minute of the finding above, under a 3 MiB sawtooth (a cache emptied and
    # filled again): as steep, as large a rise, but not 3 standard errors from flat
    rss = [38_000.0 + 80 * i + 3_000 * (i % 2) for i in range(20)]
    f = soak_findings(_rows(rss, [200.0] * 20, [900.0] * 20))[0]
    assert f["relative_per_h"] >= RSS_SLOPE_THRESHOLD and f["rise"] >= RSS_MIN_RISE
    assert f["t"] < 3 and f["finding"] is False


def test_a_falling_series_and_too_few_points_are_no_finding() -> None:
    falling = [50_000 - 300 * i for i in range(10)]
    assert soak_findings(_rows(falling, [200.0] * 10, [900.0] * 10))[0]["finding"] is False
    few = find_slope("server RSS", "KiB", [0.1, 0.2], [1.0, 2.0], 1.0, 0.1)
    assert few["finding"] is False and "too few intervals" in few["text"]
    assert least_squares([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == pytest.approx((0.0, 2.0, 0.0))
    assert least_squares([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None


def test_the_sessions_gauge_is_read_from_prometheus_text() -> None:
    text = "# HELP mcpfast_sessions_open x\n# TYPE mcpfast_sessions_open gauge\nmcpfast_sessions_open 9.0\nmcpfast_streams_open 1.0\n"
    assert parse_metrics(text)[METRIC_SESSIONS] == 9.0
    workers = 'mcpfast_sessions_open{pid="1"} 3.0\nmcpfast_sessions_open{pid="2"} 4.0\n'
    assert parse_metrics(workers)[METRIC_SESSIONS] == 7.0
    assert METRIC_SESSIONS not in parse_metrics("mcpfast_sessions_opened 3\nother 1\n")


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--soak", "0"], "MINUTES must be a finite number > 0"),
        (["--soak", "-1"], "MINUTES must be a finite number > 0"),
        (["--soak", "nan"], "MINUTES must be a finite number > 0"),
        (["--soak", "1", "--soak-share", "0"], "must be within (0, 1]"),
        (["--soak", "1", "--soak-share", "1.5"], "must be within (0, 1]"),
        (["--soak", "1", "--soak-interval", "0"], "must be a finite number > 0"),
    ],
)
def test_bad_soak_values_are_refused_by_the_parser(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        mcpfast_main(["bench", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_options_a_soak_does_not_take_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert mcpfast_main(["bench", "--soak", "1", "--transport", "stdio", "--out", str(tmp_path / "x")]) == 2
    assert "not with --soak: --transport stdio" in capsys.readouterr().err
    assert mcpfast_main(["bench", "--soak", "1", "--rate", "100", "--out", str(tmp_path / "x")]) == 2
    assert "--rate" in capsys.readouterr().err
    assert mcpfast_main(["bench", "--soak-share", "0.5", "--out", str(tmp_path / "x")]) == 2
    assert "need --soak MINUTES" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_an_unreachable_target_is_refused_before_any_load(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    out = tmp_path / "soak"
    assert mcpfast_main(["bench", "--soak", "1", "--target", url, "--server-pid", str(os.getpid()), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the target {url}" in err
    assert not out.exists()  # nothing ran, nothing was written
    # a target needs the server's pid (its RSS), and a live one
    assert mcpfast_main(["bench", "--soak", "1", "--target", url, "--out", str(out)]) == 2
    assert "needs --server-pid" in capsys.readouterr().err
    with pytest.raises(SoakError, match="no such process"):
        check_config(SoakConfig(out=out, minutes=1, target=url, server_pid=2**22 + 12345))
    with pytest.raises(SoakError, match="http"):
        check_config(SoakConfig(out=out, minutes=1, target="ftp://x/mcp", server_pid=os.getpid()))
    # the checks hold for a config made in code too
    with pytest.raises(SoakError, match="MINUTES"):
        check_config(SoakConfig(out=out, minutes=0))
    with pytest.raises(SoakError, match="soak-share"):
        check_config(SoakConfig(out=out, minutes=1, share=0.0))
    assert run_soak(SoakConfig(out=out, minutes=1, share=2.0)) == 2
    assert not out.exists()
